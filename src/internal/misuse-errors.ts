/**
 * Errors for misuse of the API: a wrong argument, a value out of range, a constructor that is not
 * public, an operation the object's state does not allow. Each has a stable `code`, in the style of
 * Node's `ERR_INVALID_ARG_TYPE` and undici's `InvalidArgumentError`, and subclasses TypeError or
 * RangeError so that code testing for those keeps working. Kept free of imports (re-exported by
 * errors.ts) so that every module, however early it loads, can use them.
 */

/** An argument of the wrong type or shape (a string for an options object, a detached buffer...). */
export class InvalidArgumentError extends TypeError {
  /** Always 'InvalidArgumentError'. */
  override readonly name: string = 'InvalidArgumentError';
  /** Always 'UCXX_ERR_INVALID_ARG'. */
  readonly code: string = 'UCXX_ERR_INVALID_ARG';
}

/** A numeric argument outside what the operation accepts (negative, NaN, not an integer, too large). */
export class ArgumentOutOfRangeError extends RangeError {
  /** Always 'ArgumentOutOfRangeError'. */
  override readonly name: string = 'ArgumentOutOfRangeError';
  /** Always 'UCXX_ERR_OUT_OF_RANGE'. */
  readonly code: string = 'UCXX_ERR_OUT_OF_RANGE';
}

/**
 * A memory region larger than this machine can back: UCX-allocated regions live in shared memory
 * (/dev/shm, or System V segments), and UCX 1.13 would fill /dev/shm page by page until the machine
 * runs out of memory rather than fail.
 */
export class InsufficientMemoryError extends RangeError {
  /** Always 'InsufficientMemoryError'. */
  override readonly name: string = 'InsufficientMemoryError';
  /** Always 'UCXX_ERR_INSUFFICIENT_MEMORY'. */
  readonly code: string = 'UCXX_ERR_INSUFFICIENT_MEMORY';
}

/** `new` on a class that only ucxx-ts creates (Worker, Endpoint, MemoryHandle, Request, ...). */
export class IllegalConstructorError extends TypeError {
  /** Always 'IllegalConstructorError'. */
  override readonly name: string = 'IllegalConstructorError';
  /** Always 'UCXX_ERR_ILLEGAL_CONSTRUCTOR'. */
  readonly code: string = 'UCXX_ERR_ILLEGAL_CONSTRUCTOR';
}

/** An operation the object's state does not allow (receiving a message twice, progress inside a callback). */
export class InvalidStateError extends TypeError {
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
