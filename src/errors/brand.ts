/**
 * What every ucxx-ts error has in common, whatever built-in it extends (Error; TypeError and RangeError
 * for misuse, so that code testing for those keeps working): a brand that its class's field initializer
 * sets. `err instanceof UcxxTsError` and `isUcxxTsError(err)` test for it. The brand is a registered
 * symbol, so two copies of the library in one process agree. Free of imports: every layer may use it.
 */

/** @internal The brand's key (a field of every error class). */
export const UCXX_TS_ERROR: unique symbol = Symbol.for('ucxx-ts.error') as never;

/**
 * Whether `value` is an error raised by ucxx-ts (any class of its: UCX statuses, misuse, format errors,
 * ClosedError...). Each has a stable string `code` (`UCS_*` for a UCX status, `UCXX_ERR_*` otherwise).
 *
 * @example
 * ```ts
 * try { await endpoint.tagSend(data, 1n); } catch (err) {
 *   if (isUcxxTsError(err)) console.error(err.code, err.message); else throw err;
 * }
 * ```
 */
export function isUcxxTsError(value: unknown): value is UcxxTsError {
  return typeof value === 'object' && value !== null && (value as { [UCXX_TS_ERROR]?: unknown })[UCXX_TS_ERROR] === true;
}

/**
 * The one type that answers for every ucxx-ts error: `err instanceof UcxxTsError` is true for each of
 * them (also those that extend TypeError or RangeError), as `isUcxxTsError(err)`. Not a class to extend
 * or construct: the errors carry its brand.
 *
 * @example
 * ```ts
 * process.on('unhandledRejection', (err) => {
 *   if (err instanceof UcxxTsError) console.error(`ucxx-ts: ${err.code}: ${err.message}`);
 * });
 * ```
 */
export abstract class UcxxTsError extends Error {
  /** `UCS_*` for a UCX status, `UCXX_ERR_*` for the others. */
  declare readonly code: string;

  /** What makes `instanceof UcxxTsError` true for every ucxx-ts error: its brand, not its prototype chain. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return isUcxxTsError(value);
  }
}
