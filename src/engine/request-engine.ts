/**
 * The request engine of one worker: its parameter blocks, its operations in flight (in the shared slot
 * table that the completion callbacks dispatch on) and the two ways to post an operation, so that a
 * posting site is the UCP call and nothing else:
 *
 * ```ts
 * // An operation without a result: a slot id, the nbx call, then its Request (the shared COMPLETED
 * // when UCX finished at once, so the common case allocates nothing).
 * const request = requests.void(requests.slot(block), ucx().ucp_put_nbx(ep, data, n, addr, rkey, block.address), 'memPut', data);
 * // An operation with a result: its Request first (the callback may run inside the call), then track.
 * const request = requests.open<TagRecvInfo>(block, ResultKind.TagInfo, 'tagRecv', buffer);
 * requests.track(request, block, ucx().ucp_tag_recv_nbx(worker, buffer, n, tag, mask, block.address));
 * ```
 *
 * Arguments are evaluated left to right, so `slot()` runs before the nbx call and `void()` after it. A
 * block's `bracketed` rule is applied here and nowhere else.
 */
import { UCS_INPROGRESS, UCS_OK, statusOfPtr, ucx, type Ptr } from '../ffi/index.js';
import { COMPLETED, Request, ResultKind, type AnyRequest, type RequestHost } from '../request.js';
import { INTERNAL } from '../errors/misuse.js';
import { beginPost, endPost, inflight } from './completions.js';
import { ParamBlocks, type ParamBlock } from './param-blocks.js';
import type { OwnMemh } from './own-memh.js';
import type { OwnRequests } from './own-request.js';
import {
  kBackground, kComplete, kDetached, kForget, kHost, kReleased, kSlotId, kTracked, kUcxRequest,
} from '../internal/symbols.js';

/** Orphaned requests of every engine of this thread (their slots stay taken): for getDiagnostics(). */
let orphanedCount = 0;

/** @internal How many slots orphaned requests hold in this thread. */
export function orphanedRequestCount(): number {
  return orphanedCount;
}

/** What the engine needs from its worker. */
export interface RequestEngineHost {
  /** The ucp_worker_h while it exists (also during close), for cancellation. */
  workerHandle(): bigint | null;
  /** The in-flight count went 0 -> 1 or 1 -> 0: the worker's busy state may have changed. */
  busyChanged(): void;
}

/** What the engine tells the worker's progress: called directly, on every operation. */
interface Progress {
  /** An operation was posted while others are in flight: progress must be due soon. */
  kick(): void;
  /** An operation completed at once: an answer is likely on its way, keep polling a little. */
  touch(): void;
}

export class RequestEngine implements RequestHost {
  readonly params = new ParamBlocks();
  /** Where the profile says so, the maps of the handles of PEER-mode sends (null otherwise). */
  ownMemh: OwnMemh | null = null;
  /** Where the profile says so, zeroed request memory for fetching atomics (null otherwise). */
  ownRequests: OwnRequests | null = null;
  readonly #host: RequestEngineHost;
  #progress: Progress = { kick() {}, touch() {} };
  /** Operations in flight that keep the worker busy (background ones are not counted). */
  #count = 0;

  constructor(host: RequestEngineHost) {
    this.#host = host;
  }

  /** The worker's progress engine, once it exists (it reads this engine's in-flight count). */
  attach(progress: Progress): void {
    this.#progress = progress;
  }

  /** How many operations are in flight (background ones aside). */
  get inflightCount(): number {
    return this.#count;
  }

  /** Reserves a slot id for an operation without a result and writes it into `block`. */
  slot(block: ParamBlock): number {
    const id = inflight.reserve();
    block.setId(id);
    return id;
  }

  /**
   * The Request of an operation without a result, from its slot id and the nbx call's return value.
   * `keep` is what must stay reachable while UCX holds the request (the buffers).
   */
  void(id: number, ptr: Ptr, what: string, keep: unknown): Request<void> {
    if (ptr === null) {
      inflight.release(id);
      this.#progress.touch();
      return COMPLETED;
    }
    const request = new Request<void>(INTERNAL, this, ResultKind.Void, what, keep);
    const status = statusOfPtr(ptr);
    if (status !== UCS_INPROGRESS) {
      inflight.release(id);
      request[kComplete](status, 0, 0n);
      return request;
    }
    request[kSlotId] = id;
    inflight.set(id, request);
    request[kUcxRequest] = ptr;
    this.#countInflight(request);
    return request;
  }

  /**
   * A Request with a result, in the slot table and its id in `block`, before the nbx call; opens the
   * block's bracket. Follow it with `track` (also when the call is not made: `abandonOpen`).
   */
  open<T>(block: ParamBlock, kind: ResultKind, what: string, keep: unknown): Request<T> {
    const request = new Request<T>(INTERNAL, this, kind, what, keep);
    request[kSlotId] = inflight.add(request);
    block.setId(request[kSlotId]);
    if (block.bracketed) beginPost();
    return request;
  }

  /**
   * Interprets the nbx call's return value for a request made by `open` and closes the block's bracket:
   * done at once (with `immediateLength` bytes, for a stream receive), failed at once, or in flight.
   */
  track<T>(request: Request<T>, block: ParamBlock, ptr: Ptr, immediateLength = 0): Request<T> {
    if (block.bracketed) endPost();
    if (ptr === null) {
      this.#releaseId(request);
      request[kComplete](UCS_OK, immediateLength, 0n);
      return request;
    }
    const status = statusOfPtr(ptr);
    if (status !== UCS_INPROGRESS) {
      this.#releaseId(request);
      request[kComplete](status, 0, 0n);
      return request;
    }
    if (!request.completed) {
      request[kUcxRequest] = ptr;
      this.#countInflight(request);
    }
    return request;
  }

  /** Someone now waits on a background request: it counts as in flight from here on. */
  foreground(request: AnyRequest): void {
    if (!request[kBackground]) return;
    request[kBackground] = false;
    if (request[kTracked]) {
      request[kTracked] = false;
      this.#countInflight(request);
    }
  }

  /** Nobody waits on this request any more: it stops counting as in flight (see `foreground`). */
  background(request: AnyRequest): void {
    if (request[kBackground]) return;
    request[kBackground] = true;
    if (request[kTracked] && --this.#count === 0) this.#host.busyChanged();
  }

  /** This worker's requests in flight (background ones included). */
  inflightRequests(): AnyRequest[] {
    return inflight.values().filter((request) => request[kTracked] && request[kHost] === this);
  }

  /** Requests let go of by `orphan`, whose slots are given back when the worker is destroyed. */
  readonly #orphans = new Set<AnyRequest>();

  /**
   * Lets go of detached requests that UCX will never complete: the sends of an endpoint whose peer
   * is gone, in NONE error mode, where UCX 1.13 neither completes nor purges a rendezvous send whose
   * peer left (it waits for an answer that cannot come), so each one kept its buffers referenced until
   * the worker was destroyed. They are released to UCX (ucp_request_free: freed if it ever completes
   * them) and their memory to the garbage collector; their slot ids stay reserved, so that a
   * completion UCX might still deliver finds them, until `releaseOrphans` after the worker's destroy.
   */
  orphan(requests: readonly AnyRequest[]): void {
    for (const request of requests) {
      const handle = request[kUcxRequest];
      // (A request the worker's destroy already released is UCX's no more.)
      if (!request[kDetached] || handle === null || request[kReleased] || this.#orphans.has(request)) continue;
      ucx().ucp_request_free(handle);
      request[kReleased] = true;
      request[kForget]();
      this.#orphans.add(request);
      orphanedCount++;
    }
  }

  /** After ucp_worker_destroy: gives the orphans' slot ids back. */
  releaseOrphans(): void {
    for (const request of this.#orphans) this.#releaseId(request);
    orphanedCount -= this.#orphans.size;
    this.#orphans.clear();
  }

  /** Forgets the slot of a request whose UCX request is gone without a completion (worker destroyed). */
  releaseSlot(request: AnyRequest): void {
    this.#releaseId(request);
  }

  /** RequestHost: `request.cancel()` of a request UCX holds. */
  cancelRequest(handle: bigint): void {
    const worker = this.#host.workerHandle();
    if (worker !== null) ucx().ucp_request_cancel(worker, handle);
  }

  /** RequestHost: a request settled (or UCX let go of a detached one). */
  requestSettled(request: AnyRequest): void {
    if (!request[kTracked]) return;
    request[kTracked] = false;
    if (request[kBackground]) return;
    if (--this.#count === 0) this.#host.busyChanged();
  }

  #countInflight(request: AnyRequest): void {
    request[kTracked] = true;
    if (request[kBackground]) return;
    // Busy state changes only on 0 <-> 1; in between, a new operation only needs progress to be due.
    if (this.#count++ === 0) this.#host.busyChanged();
    else this.#progress.kick();
  }

  #releaseId(request: AnyRequest): void {
    if (request[kSlotId] !== 0) {
      inflight.delete(request[kSlotId]);
      request[kSlotId] = 0;
    }
  }
}
