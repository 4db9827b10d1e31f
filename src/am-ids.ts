/**
 * The active-message id space: what is the program's, and the id ucxx-ts keeps for itself.
 */

/**
 * UCP carries AM ids in 16 bits. The highest, `AM_ID_STREAM_END`, is ucxx-ts's own: ids 0 to
 * AM_ID_MAX - 1 are the program's.
 *
 * @example
 * ```ts
 * if (!Number.isInteger(id) || id < 0 || id >= AM_ID_MAX) throw new RangeError(`not an AM id of ours: ${id}`);
 * worker.setAmHandler(id, handler);
 * ```
 */
export const AM_ID_MAX = 0xffff;
/**
 * The AM id ucxx-ts reserves for the Duplex's end-of-stream marker (see `createEndpointDuplex`):
 * `setAmHandler`, `amMessages` and `amSend` refuse it (ArgumentOutOfRangeError). A worker whose
 * context has the 'am' feature handles it from its creation, so a marker that arrives first is kept.
 *
 * @example
 * ```ts
 * worker.setAmHandler(AM_ID_STREAM_END, handler); // throws ArgumentOutOfRangeError: the id is reserved
 * ```
 */
export const AM_ID_STREAM_END = AM_ID_MAX;
