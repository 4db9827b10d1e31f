/**
 * How a public operation reports failure: through what it returns, never by throwing. A method that
 * returns a Request (or a Promise) is decorated with `@requestOperation` (or `@promiseOperation`), and
 * whatever its body throws before the operation reaches UCX (a closed object, a bad argument, a bounds
 * check) becomes the failure of the Request it returns. So `ep.tagSend(key, 1n).catch(log)` handles an
 * endpoint whose peer has already left, as it handles a send that fails in flight, and no operation
 * kills a process with a synchronous exception its caller did not expect.
 *
 * An immediate failure is reported to whoever awaits or reads `error`, as for an operation UCX fails at
 * once: no unhandled rejection for a fire-and-forget call.
 *
 * The wrappers pass five arguments (the most any operation takes) rather than a rest array, so that
 * the hot path allocates nothing.
 */
import { UCS_ERR_INVALID_PARAM } from '../ffi/index.js';
import { Request, ResultKind, type AnyRequest } from '../request.js';
import { INTERNAL } from '../errors/misuse.js';
import { kFail } from '../internal/symbols.js';

/** Status of a Request failed before UCX: the UcxError's own, else UCS_ERR_INVALID_PARAM. */
function statusOf(error: unknown): number {
  const status = (error as { status?: unknown } | null)?.status;
  return typeof status === 'number' ? status : UCS_ERR_INVALID_PARAM;
}

function asError(thrown: unknown): Error {
  return thrown instanceof Error ? thrown : new Error(String(thrown));
}

/** A Request that has already failed with `thrown`. */
export function failedRequest<T>(what: string, thrown: unknown): Request<T> {
  const request = new Request<T>(INTERNAL, null, ResultKind.Void, what, null);
  const error = asError(thrown);
  request[kFail](error, statusOf(error));
  return request;
}

type Method<This, A extends unknown[], R> = (this: This, ...args: A) => R;
/** The wrapper's shape: five positional arguments (undefined where the caller gave fewer). */
type Forwarder = (a?: unknown, b?: unknown, c?: unknown, d?: unknown, e?: unknown) => unknown;

/** The wrapper with the method's own name and declared arity (what `fn.length` and stack traces show). */
function sameShape<M>(method: M, wrapper: (...args: never[]) => unknown): M {
  const { name, length } = method as unknown as { name: string; length: number };
  Object.defineProperty(wrapper, 'name', { value: name });
  Object.defineProperty(wrapper, 'length', { value: length });
  return wrapper as unknown as M;
}

/** Decorates a method that returns a Request: what it throws becomes that Request's failure. */
export function requestOperation<This, A extends unknown[], R extends AnyRequest>(
  method: Method<This, A, R>, context: ClassMethodDecoratorContext<This, Method<This, A, R>>,
): Method<This, A, R> {
  const what = String(context.name);
  const body = method as unknown as Forwarder;
  return sameShape(method, function (this: This, a?: unknown, b?: unknown, c?: unknown, d?: unknown, e?: unknown): unknown {
    try {
      return body.call(this, a, b, c, d, e);
    } catch (thrown) {
      return failedRequest(what, thrown);
    }
  });
}

/** Decorates a method that returns a Promise: what it throws becomes a rejection. */
export function promiseOperation<This, A extends unknown[], R extends Promise<unknown>>(
  method: Method<This, A, R>, _context: ClassMethodDecoratorContext<This, Method<This, A, R>>,
): Method<This, A, R> {
  const body = method as unknown as Forwarder;
  return sameShape(method, function (this: This, a?: unknown, b?: unknown, c?: unknown, d?: unknown, e?: unknown): unknown {
    try {
      return body.call(this, a, b, c, d, e);
    } catch (thrown) {
      return Promise.reject(asError(thrown));
    }
  });
}
