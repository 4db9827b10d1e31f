/**
 * A non-blocking UCX operation. Every `*_nbx` call of ucxx-ts returns a Request: await it (it is
 * PromiseLike), or look at `completed`/`status` without awaiting, or `cancel()` it.
 *
 * An operation that UCX completes at once returns an already-completed Request and creates no Promise
 * unless somebody awaits it; an immediate failure is only reported to whoever awaits (no unhandled
 * rejection for a fire-and-forget operation whose result is checked by a later flush). An operation never
 * throws: a closed object, a bad argument or a failed bounds check is the failure of the Request it
 * returns, already completed (`completed`, `error`), as a failure in flight would be (engine/operations.ts).
 *
 * ```ts
 * const req = endpoint.memPut(data, remoteKey);
 * if (!req.completed) await req;           // or `await req.promise`: cheaper in hot loops
 * ```
 */
import { lastLoopTurn, noteLoopTurn } from './internal/loop-turn.js';
import { UCS_ERR_CANCELED, UCS_ERR_MESSAGE_TRUNCATED, UCS_INPROGRESS, UCS_OK } from './ffi/index.js';
import { CanceledError, errorFromStatus, type UcxError } from './errors/index.js';
import { INTERNAL, checkConstructorToken } from './errors/misuse.js';
import { abortError } from './internal/abort-error.js';
import {
  kAbandon, kBackground, kBindSignal, kCancelFallback, kComplete, kDetachable, kDetached, kFail,
  kFailDetached, kForget, kGroup, kGroupNext, kGroupPrev, kHeldByUcx, kHost, kOnSettle, kUcxDone, kOpSettled, kOwner, kReleased,
  kReply, kSlotId, kTracked, kUcxRequest, kWatched,
} from './internal/symbols.js';
import type { RequestGroup } from './engine/request-group.js';

/** A Request's boolean members and their bits in its `#flags`. */
const FLAGS: readonly (readonly [symbol, number])[] = [
  [kTracked, 1], [kBackground, 2], [kReleased, 4], [kWatched, 8], [kDetachable, 16], [kDetached, 32],
];

// Keys of this module's own members (no other module uses them).
const kUnbind: unique symbol = Symbol('ucxx-ts.unbind');
const kWhat: unique symbol = Symbol('ucxx-ts.what');

/**
 * Awaits of requests that had already settled (UCX completed them inside the call: same-host RMA,
 * flush, a message already there) run on microtasks only, so a loop of them would never let the event
 * loop turn: no timer, signal, I/O or worker progress (the peer-failure reports) would run. Every
 * SETTLED_AWAITS_PER_CHECK such awaits the clock is read, and once SETTLED_SLICE_MS passed since the
 * event loop last turned (this yield, or a polling slice of a progress engine: internal/loop-turn.ts),
 * that await resolves through a macrotask (setImmediate) instead. A polling engine turns the loop
 * every slice: had its awaits yielded too, each would have waited for the engine's next slice, up to
 * a slice per yield (ms at the 99.9th percentile of an awaited ping-pong).
 */
const SETTLED_AWAITS_PER_CHECK = 64;
const SETTLED_SLICE_MS = 2;
let settledAwaits = 0;

/** Whether this await of a settled request should go through a macrotask (see SETTLED_SLICE_MS). */
function settledAwaitYields(): boolean {
  if ((++settledAwaits & (SETTLED_AWAITS_PER_CHECK - 1)) !== 0) return false;
  const now = performance.now();
  if (now - lastLoopTurn() < SETTLED_SLICE_MS) return false;
  noteLoopTurn(now);
  return true;
}

function nextMacrotask(resolve: () => void): void {
  setImmediate(resolve);
}

/**
 * What a truncated tag receive says: the message's length (UCX reports it in the receive info when the
 * receive was posted first; 0 when it failed inside the call) and the buffer's.
 */
function truncation(what: string, length: number, buffer: unknown): string {
  const parts = Array.isArray(buffer) ? buffer as { byteLength: number }[] : [buffer as { byteLength: number }];
  let size = 0;
  for (const part of parts) size += part?.byteLength ?? 0;
  const message = length > size ? `the message (${length} bytes)` : 'the message';
  return `${what}: ${message} is longer than the ${size}-byte buffer (the message is consumed)`;
}

/** The reasons of the requests whose signal aborted (set only then: nothing on the hot path). */
const abortReasons = new WeakMap<object, unknown>();

let capturedResolve: ((value: never) => void) | undefined;
let capturedReject: ((reason: Error) => void) | undefined;
function captureResolvers(resolve: (value: never) => void, reject: (reason: Error) => void): void {
  capturedResolve = resolve;
  capturedReject = reject;
}

/** What a completed tag receive reports. */
export interface TagRecvInfo {
  /** Bytes received. */
  readonly length: number;
  /** The tag the sender used. */
  readonly senderTag: bigint;
}

/** How a Request's value is derived from its completion (kept as a number: no closure per operation). */
export const enum ResultKind {
  Void = 0,
  TagInfo = 1,
  Length = 2,
  /** The 32-bit value in `[kReply]` (an atomic's fetched value). */
  Reply32 = 3,
  /** The 64-bit value in `[kReply]`, as a bigint. */
  Reply64 = 4,
  /** The bytes received into `[kReply]` (a Uint8Array), trimmed to the length. */
  Bytes = 5,
  /**
   * The value in `[kReply]` as it is: a request made of other requests or of JavaScript-side work
   * (tagMultiRecv's frames, amRecv's message).
   */
  Value = 6,
}

/** The worker-side hooks a Request needs (implemented by the worker's RequestEngine). @internal */
export interface RequestHost {
  cancelRequest(handle: bigint): void;
  requestSettled(request: AnyRequest): void;
}

/**
 * The endpoint an operation in flight belongs to (implemented by Endpoint): told when the operation
 * settles, for its failure watchdog. @internal
 */
export interface RequestOwner {
  /**
   * `completed`: UCX finished it (false when settled early: cancelled, or its endpoint failed);
   * `status`: how it settled (UCS_OK, or the status of the error it rejected with).
   */
  [kOpSettled](watched: boolean, completed: boolean, status: number): void;
}

/** @internal A request of any result type, for bookkeeping. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyRequest = Request<any>;

/** @internal What a RequestOwner (Endpoint) is told of its operations rejected while UCX still holds them. */
interface HeldByUcx {
  [kHeldByUcx](request: AnyRequest): void;
}

/**
 * A non-blocking operation: await it (or its `promise`), read `completed`/`status`/`value`, or
 * `cancel()` it.
 *
 * @example
 * ```ts
 * const request = ep.memPut(data, key);
 * if (!request.completed) await request.promise;
 * ```
 */
export class Request<T = void> implements PromiseLike<T> {
  #status: number = UCS_INPROGRESS;
  #value: T | undefined;
  #error: Error | undefined;
  #promise: Promise<T> | undefined;
  #resolve: ((value: T) => void) | undefined;
  #reject: ((reason: Error) => void) | undefined;
  #kind: ResultKind;
  #host: RequestHost | null;
  /** Memory the operation reads or writes, kept reachable until it completes. */
  #keep: unknown;
  /**
   * The boolean members declared below, one bit each (a Request is allocated per operation: one field,
   * not six); their accessors are defined from FLAGS.
   */
  #flags = 0;

  static {
    for (const [key, bit] of FLAGS) {
      Object.defineProperty(Request.prototype, key, {
        get(this: Request<unknown>): boolean {
          return (this.#flags & bit) !== 0;
        },
        set(this: Request<unknown>, on: boolean): void {
          this.#flags = on ? this.#flags | bit : this.#flags & ~bit;
        },
      });
    }
  }
  /** @internal The slot id carried in user_data; 0 when none. */
  [kSlotId] = 0;
  /** @internal Counted among its worker's operations in flight. */
  declare [kTracked]: boolean;
  /**
   * @internal In flight without keeping the worker busy (a stream read-ahead nobody waits for yet), so
   * that it neither keeps the process alive nor makes 'polling' spin; see RequestEngine.foreground.
   */
  declare [kBackground]: boolean;
  /** @internal Set once ucp_request_free was called on an unfinished request (worker teardown). */
  declare [kReleased]: boolean;
  /** @internal The UCX request handle while in flight. */
  [kUcxRequest]: bigint | null = null;
  /** @internal The group that tracks this request until it settles (an endpoint's receives). */
  [kGroup]: RequestGroup | null = null;
  /** @internal The previous request in that group's list. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  [kGroupPrev]: Request<any> | null = null;
  /** @internal The next request in that group's list. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  [kGroupNext]: Request<any> | null = null;
  /** @internal Where the operation's result lands (atomic fetch, received bytes, a ucxx AM message). */
  [kReply]: unknown = null;
  /**
   * @internal For operations UCX cannot cancel (stream receives in 1.13): settles the request as
   * cancelled at once; UCX's real completion later only releases what the request held.
   */
  [kCancelFallback]: (() => void) | null = null;
  /** @internal Runs once UCX has completed this request (a thread's send copy is freed by it). */
  [kUcxDone]: (() => void) | null = null;
  /**
   * @internal Called synchronously when the request settles (status, reported length, error). Internal
   * chains use it instead of a Promise continuation, so that they also advance inside
   * `worker.progressUntil()`, which runs no microtasks.
   */
  [kOnSettle]: ((status: number, length: number, error: Error | undefined) => void) | null = null;
  /** @internal Detaches this request from an AbortSignal once it settles. */
  [kUnbind]: (() => void) | null = null;
  /** @internal What the operation is, for error messages. */
  [kWhat]: string;
  /** @internal The endpoint this operation in flight belongs to (set only when it did not complete at once). */
  [kOwner]: RequestOwner | null = null;
  /** @internal Counted by its owner's watchdog: an operation only the peer's UCX has to answer. */
  declare [kWatched]: boolean;
  /**
   * @internal UCX cannot cancel this kind (sends, RMA, atomics, flush): `cancel()` and a failed endpoint
   * settle it at once and UCX keeps the request, and its memory stays referenced, until UCX is done.
   */
  declare [kDetachable]: boolean;
  /** @internal Settled for JavaScript while UCX still holds the request (see `[kDetachable]`). */
  declare [kDetached]: boolean;

  /** @internal Requests are made by Worker and Endpoint (IllegalConstructorError from outside). */
  constructor(token: typeof INTERNAL, host: RequestHost | null, kind: ResultKind, what: string, keep: unknown) {
    if (token !== INTERNAL) checkConstructorToken(token, 'Request', 'the Request an operation returns');
    this.#host = host;
    this.#kind = kind;
    this[kWhat] = what;
    this.#keep = keep;
  }

  /** @internal The worker it belongs to until it settles. */
  get [kHost](): RequestHost | null {
    return this.#host;
  }

  /**
   * The UCS status: UCS_INPROGRESS (1) while in flight, 0 when done, negative on failure (the
   * UcxError's status; UCS_ERR_INVALID_PARAM for an error raised before the operation reached UCX,
   * such as ClosedError or InvalidArgumentError: `error` says which).
   */
  get status(): number {
    return this.#status;
  }

  /** True once the operation has finished, successfully or not. */
  get completed(): boolean {
    return this.#status !== UCS_INPROGRESS;
  }

  /**
   * The result, read synchronously: what awaiting gives once the request completed successfully (it
   * throws the error if it failed), undefined while in flight. For loops that progress by hand.
   *
   * ```ts
   * const req = endpoint.streamRecv(buffer);
   * worker.progressUntil(req);
   * const received = req.value;
   * ```
   */
  get value(): T | undefined {
    if (this.#error !== undefined) throw this.#error;
    return this.#value;
  }

  /** The error it failed with, once completed; undefined otherwise. */
  get error(): Error | undefined {
    return this.#error;
  }

  /**
   * Cancels the operation: it rejects with `CanceledError` at once. A receive that has not matched a
   * message is cancelled in UCX (`ucp_request_cancel`). One that matched (its data still coming: a
   * rendezvous, an AM `receive()`, a probed message) and sends, RMA, atomics and flush cannot be
   * cancelled in UCX 1.13: those settle as cancelled at once, UCX finishes them in the background (or
   * drops them when the endpoint closes), and the matched message is dropped. Their buffers stay
   * referenced until then, and UCX may still write into a receive buffer or take effect at the peer:
   * do not reuse a receive buffer, a memGet destination or an atomic
   * target for something else before a later flush. No effect on a completed request.
   *
   * @example
   * ```ts
   * const request = worker.tagRecv(buffer, 9n);
   * const timer = setTimeout(() => request.cancel(), 1000);
   * try {
   *   await request;
   * } catch (err) {
   *   if ((err as UcxError).code === 'UCS_ERR_CANCELED') console.log('nothing within 1 s');
   * } finally {
   *   clearTimeout(timer);
   * }
   * ```
   */
  cancel(): void {
    if (this.completed) return;
    if (this[kCancelFallback] !== null) {
      this[kCancelFallback]();
      return;
    }
    if (this[kUcxRequest] !== null && this.#host !== null) this.#host.cancelRequest(this[kUcxRequest]);
    if (!this.completed && this[kDetachable]) this[kFailDetached](new CanceledError(`${this[kWhat]}: canceled`));
  }

  /**
   * @internal Rejects with `error` now, leaving the UCX request to finish (or be purged) later: its
   * handle, id and memory stay until UCX's completion arrives (the completion's branch for a detached request).
   */
  [kFailDetached](error: Error): void {
    if (this.completed) return;
    this[kDetached] = this[kUcxRequest] !== null;
    if (this[kDetached]) (this[kOwner] as (RequestOwner & HeldByUcx) | null)?.[kHeldByUcx](this);
    this[kFail](error);
  }

  /**
   * The operation as a native Promise (made on first use, then the same one; for a request that has
   * already settled, about every 2 ms one that settles a macrotask later, so that a loop of awaits lets
   * the event loop turn). Awaiting it is cheaper than
   * awaiting the Request itself: `await request` goes through the thenable protocol (two more Promises
   * and two more microtask hops), `await request.promise` takes one hop. Like any Promise,
   * a failed one that nobody handles is an unhandled rejection.
   *
   * ```ts
   * const info = await worker.tagRecv(buffer, 7n).promise;   // hot loops
   * ```
   */
  get promise(): Promise<T> {
    return this.#awaitable();
  }

  /**
   * What makes a Request awaitable (PromiseLike): `then` of its `promise`.
   *
   * @example
   * ```ts
   * ep.tagSend(data, 1n).then(() => console.log('sent'), (err) => console.error('send failed', err));
   * ```
   */
  then<R1 = T, R2 = never>(
    onfulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: any) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    return this.#awaitable().then(onfulfilled, onrejected);
  }

  /**
   * The same as awaiting the request and catching.
   *
   * @example
   * ```ts
   * ep.memPut(data, key).catch((err) => console.error('put failed', err)); // fire and forget, but not silently
   * ```
   */
  catch<R = never>(onrejected?: ((reason: any) => R | PromiseLike<R>) | null): Promise<T | R> {
    return this.#awaitable().catch(onrejected);
  }

  /** The Promise an await gets: the request's own, or, now and then for a settled one, a macrotask later. */
  #awaitable(): Promise<T> {
    if (this.#status !== UCS_INPROGRESS && settledAwaitYields()) {
      return new Promise<void>(nextMacrotask).then(() => this.#getPromise());
    }
    return this.#getPromise();
  }

  #getPromise(): Promise<T> {
    if (this.#promise === undefined) {
      if (this.#status === UCS_OK) this.#promise = Promise.resolve(this.#value as T);
      else if (this.#error !== undefined) this.#promise = Promise.reject(this.#error);
      else {
        // One shared executor (no closure per Promise): it hands the resolving functions over here.
        this.#promise = new Promise<T>(captureResolvers);
        this.#resolve = capturedResolve as (value: T) => void;
        this.#reject = capturedReject;
        capturedResolve = capturedReject = undefined;
      }
    }
    return this.#promise;
  }

  /** @internal Completes with a UCS status and the raw completion data. */
  [kComplete](status: number, length: number, tag: bigint): void {
    if (this[kUcxDone] !== null) {
      const done = this[kUcxDone];
      this[kUcxDone] = null;
      done();
    }
    if (this.#status !== UCS_INPROGRESS) {
      if (this[kDetached]) {
        // UCX is done with a request settled earlier: release what it held.
        this[kDetached] = false;
        this.#release();
      }
      return;
    }
    if (status === UCS_OK) {
      this.#status = UCS_OK;
      switch (this.#kind) {
        case ResultKind.TagInfo:
          this.#value = { length, senderTag: tag } as T;
          break;
        case ResultKind.Length:
          this.#value = length as T;
          break;
        case ResultKind.Reply32: {
          const reply = this[kReply] as Uint8Array;
          this.#value = new DataView(reply.buffer, reply.byteOffset, 4).getUint32(0, true) as T;
          break;
        }
        case ResultKind.Reply64: {
          const reply = this[kReply] as Uint8Array;
          this.#value = new DataView(reply.buffer, reply.byteOffset, 8).getBigUint64(0, true) as T;
          break;
        }
        case ResultKind.Bytes:
          this.#value = (this[kReply] as Uint8Array).subarray(0, length) as T;
          break;
        case ResultKind.Value:
          this.#value = this[kReply] as T;
          break;
        default:
          break;
      }
      this.#finish();
      const resolve = this.#resolve;
      this.#resolve = this.#reject = undefined;
      resolve?.(this.#value as T);
      this.#notify(UCS_OK, length, undefined);
    } else if (status === UCS_ERR_MESSAGE_TRUNCATED && this.#kind === ResultKind.TagInfo) {
      this[kFail](errorFromStatus(status, truncation(this[kWhat], length, this.#keep)));
    } else {
      this[kFail](errorFromStatus(status, this[kWhat]));
    }
  }

  /** @internal Fails with a given error (status taken from it when it is a UcxError, unless given). */
  [kFail](error: Error, status?: number): void {
    if (this.#status !== UCS_INPROGRESS) return;
    // However the cancellation of an aborted request reaches here (UCX's completion, a detached or
    // fallback settle), it says why.
    if (error instanceof CanceledError && abortReasons.has(this)) error = abortError(this[kWhat], abortReasons.get(this));
    this.#status = status ?? (error as Partial<UcxError>).status ?? UCS_ERR_CANCELED;
    this.#error = error;
    this.#finish();
    const reject = this.#reject;
    this.#resolve = this.#reject = undefined;
    reject?.(error);
    this.#notify(this.#status, 0, error);
  }

  #notify(status: number, length: number, error: Error | undefined): void {
    const onSettle = this[kOnSettle];
    if (onSettle === null) return;
    this[kOnSettle] = null;
    onSettle(status, length, error);
  }

  /**
   * @internal A detached request that UCX will never complete (RequestEngine.orphan): its memory and
   * handle are let go of now; its slot stays reserved until its worker is destroyed.
   */
  [kForget](): void {
    if (!this[kDetached]) return;
    this[kDetached] = false;
    this.#release();
  }

  /** @internal Fails with CanceledError, e.g. when its worker or endpoint closes before it completes. */
  [kAbandon](reason: string): void {
    this[kFail](new CanceledError(`${this[kWhat]}: ${reason}`));
  }

  /**
   * @internal Cancels this request when `signal` aborts: it rejects with a CanceledError that names the
   * signal's reason (see abortError).
   */
  [kBindSignal](signal: AbortSignal | undefined): void {
    if (signal === undefined || this.completed) return;
    const onAbort = (): void => {
      abortReasons.set(this, signal.reason);
      if (this[kUcxRequest] !== null || this[kCancelFallback] !== null) this.cancel();
      else this[kFail](abortError(this[kWhat], signal.reason));
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    this[kUnbind] = () => signal.removeEventListener('abort', onAbort);
  }

  #finish(): void {
    this[kCancelFallback] = null;
    if (this[kUnbind] !== null) {
      this[kUnbind]();
      this[kUnbind] = null;
    }
    this[kGroup]?.delete(this);
    const owner = this[kOwner];
    if (owner !== null) {
      this[kOwner] = null;
      owner[kOpSettled](this[kWatched], !this[kDetached], this.#status);
    }
    if (!this[kDetached]) this.#release();
  }

  /** What UCX needed while it held the request: memory, handle, the worker's count. */
  #release(): void {
    this.#keep = undefined;
    this[kReply] = null;
    this[kUcxRequest] = null;
    const host = this.#host;
    this.#host = null;
    host?.requestSettled(this);
  }
}

/**
 * The Request returned by every operation without a result that UCX completed at once: it holds no
 * state that could change, so one instance serves them all and such an operation allocates nothing.
 */
export const COMPLETED: Request<void> = new Request<void>(INTERNAL, null, ResultKind.Void, 'completed operation', null);
COMPLETED[kComplete](UCS_OK, 0, 0n);
