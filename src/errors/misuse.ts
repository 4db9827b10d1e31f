/**
 * Errors for misuse of the API: a wrong argument, a value out of range, a constructor that is not
 * public, an operation the object's state does not allow. Each has a stable `code`, in the style of
 * Node's `ERR_INVALID_ARG_TYPE` and undici's `InvalidArgumentError`, and subclasses TypeError or
 * RangeError so that code testing for those keeps working. They import nothing but errors/brand.ts (and
 * errors/index.ts re-exports them), so that every module, however early it loads, can use them.
 */
import { UCXX_TS_ERROR } from './brand.js';

/**
 * An argument of the wrong type or shape (a string for an options object, a detached buffer...).
 *
 * @example
 * ```ts
 * try {
 *   ep.tagSend('hello' as unknown as Uint8Array, 1n); // a string is not a buffer
 * } catch (err) {
 *   console.log(err instanceof TypeError, (err as InvalidArgumentError).code); // true 'UCXX_ERR_INVALID_ARG'
 * }
 * ```
 */
export class InvalidArgumentError extends TypeError {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'InvalidArgumentError'. */
  override readonly name: string = 'InvalidArgumentError';
  /** Always 'UCXX_ERR_INVALID_ARG'. */
  readonly code: string = 'UCXX_ERR_INVALID_ARG';
}

/**
 * A numeric argument outside what the operation accepts (negative, NaN, not an integer, too large).
 *
 * @example
 * ```ts
 * try {
 *   ep.memPut(data, key, key.getSize()); // past the end of the remote region
 * } catch (err) {
 *   if (err instanceof ArgumentOutOfRangeError) console.log(err.code); // 'UCXX_ERR_OUT_OF_RANGE', a RangeError
 * }
 * ```
 */
export class ArgumentOutOfRangeError extends RangeError {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'ArgumentOutOfRangeError'. */
  override readonly name: string = 'ArgumentOutOfRangeError';
  /** Always 'UCXX_ERR_OUT_OF_RANGE'. */
  readonly code: string = 'UCXX_ERR_OUT_OF_RANGE';
}

/**
 * A memory region larger than this machine can back: UCX-allocated regions live in shared memory
 * (/dev/shm, or System V segments), and UCX 1.13 would fill /dev/shm page by page until the machine
 * runs out of memory rather than fail.
 *
 * @example
 * ```ts
 * try {
 *   region = context.createMemoryHandle(64 * 2 ** 30); // 64 GiB of shared memory
 * } catch (err) {
 *   if (err instanceof InsufficientMemoryError) console.error(err.message); // instead of filling /dev/shm
 * }
 * ```
 */
export class InsufficientMemoryError extends RangeError {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'InsufficientMemoryError'. */
  override readonly name: string = 'InsufficientMemoryError';
  /** Always 'UCXX_ERR_INSUFFICIENT_MEMORY'. */
  readonly code: string = 'UCXX_ERR_INSUFFICIENT_MEMORY';
}

/**
 * `new` on a class that only ucxx-ts creates (Worker, Endpoint, MemoryHandle, Request, ...).
 *
 * @example
 * ```ts
 * try {
 *   Reflect.construct(Worker, []);
 * } catch (err) {
 *   console.log((err as IllegalConstructorError).code); // 'UCXX_ERR_ILLEGAL_CONSTRUCTOR': use context.createWorker()
 * }
 * ```
 */
export class IllegalConstructorError extends TypeError {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'IllegalConstructorError'. */
  override readonly name: string = 'IllegalConstructorError';
  /** Always 'UCXX_ERR_ILLEGAL_CONSTRUCTOR'. */
  readonly code: string = 'UCXX_ERR_ILLEGAL_CONSTRUCTOR';
}

/**
 * An operation the object's state does not allow (receiving a message twice, progress inside a callback).
 *
 * @example
 * ```ts
 * const probe = worker.tagProbe(7n, undefined, { remove: true });
 * await probe?.receive?.(buffer);
 * try {
 *   probe?.receive?.(buffer); // a probed message is received once
 * } catch (err) {
 *   if (err instanceof InvalidStateError) console.log(err.code); // 'UCXX_ERR_INVALID_STATE'
 * }
 * ```
 */
export class InvalidStateError extends TypeError {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'InvalidStateError'. */
  override readonly name: string = 'InvalidStateError';
  /** Always 'UCXX_ERR_INVALID_STATE'. */
  readonly code: string = 'UCXX_ERR_INVALID_STATE';
}

/**
 * The token that the constructors of internal classes require: module-private to the package (not
 * exported from its entry point), so only ucxx-ts itself can create those objects.
 */
export const INTERNAL: unique symbol = Symbol('ucxx-ts internal constructor');

/** Throws IllegalConstructorError unless `token` is INTERNAL. */
export function checkConstructorToken(token: unknown, className: string, howToGetOne: string): void {
  if (token !== INTERNAL) {
    throw new IllegalConstructorError(`${className} is not constructible: use ${howToGetOne}`);
  }
}
