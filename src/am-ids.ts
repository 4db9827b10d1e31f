/**
 * The active-message id space: what is the program's, and the id ucxx-ts keeps for itself.
 */

/**
 * UCP carries AM ids in 16 bits. The two highest, `AM_ID_STREAM_END` (AM_ID_MAX) and `AM_ID_FAST_LANE`
 * (AM_ID_MAX - 1), are ucxx-ts's own: ids 0 to AM_ID_MAX - 2 are the program's.
 *
 * @example
 * ```ts
 * if (!Number.isInteger(id) || id < 0 || id >= AM_ID_FAST_LANE) throw new RangeError(`not an AM id of ours: ${id}`);
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
/**
 * The AM id ucxx-ts reserves for setting up fast lanes between ucxx-ts processes (src/endpoint/fast-lane.ts):
 * refused by `setAmHandler`, `amMessages` and `amSend` as AM_ID_STREAM_END is. Only a ucxx-ts listener
 * sends on it, and only to a ucxx-ts client.
 *
 * @example
 * ```ts
 * worker.setAmHandler(AM_ID_FAST_LANE, handler); // throws ArgumentOutOfRangeError: the id is reserved
 * ```
 */
export const AM_ID_FAST_LANE = AM_ID_MAX - 1;
