/**
 * Memory handles that ucxx-ts maps itself for single operations, where the UCX version's profile says
 * UCX must not register the buffer on its own (`workarounds.peerRendezvousOwnMemh`): UCX 1.20 purges a
 * PEER-mode endpoint's rendezvous send (its peer failed, or the endpoint was closed before the peer
 * matched it) through ucp_request_memh_invalidate, which hands the memory handle UCX registered itself
 * to the registration cache, and with memory events off (src/ffi/library.ts) the context has none:
 * SIGSEGV (docs/ucx-1.20-bugs/force_close_unmatched_rndv.c). A handle the application passed
 * (UCP_OP_ATTR_FIELD_MEMH) is never invalidated there, so the send completes with its error instead.
 * Receives meet the same path when the sender's endpoint is purged while a rendezvous message is being
 * fetched into them (ucp_proto_rndv_rtr_abort; a ucxx peer killed mid-transfer): tag receives and
 * rendezvous AM data are given a handle too. A receive is not tied to an endpoint, so every receive
 * large enough to take a rendezvous message gets one, whatever the mode of the endpoints.
 *
 * The handle covers exactly the operation's buffer and lives at least until UCX completes the
 * operation. Handles of buffers that are used again are kept for the next operation on the same range
 * of the same buffer (a loop that reuses its buffers maps twice, where a mapping per operation cost two
 * more FFI calls and UCX's registration work each time; a buffer made per operation, such as an AM
 * receive's, is mapped for that operation only), a few per ArrayBuffer and at most CACHE_LIMIT per
 * worker, and unmapped when the buffer is collected or the worker closes. The worker's destruction
 * unmaps every handle, those of operations still in flight included (UCX completes nothing after it).
 * `getDiagnostics().operationMappings` counts them.
 */
import { CONSTANTS, OutCell, StructBuffer, addressOf, layouts, ucx } from '../ffi/index.js';
import { kUcxDone } from '../internal/symbols.js';
import { liveCounts } from '../internal/live-counts.js';
import type { AnyRequest } from '../request.js';
import type { ParamBlock } from './param-blocks.js';

const K = CONSTANTS;

/**
 * The smallest operation that is given its own handle, chosen well below the sizes at which UCX's
 * automatic threshold switches to rendezvous (1.20 over tcp: 16 KiB and up). Where the user sets
 * UCX_RNDV_THRESH (which may be lower), every operation is.
 */
export const OWN_MEMH_MIN = process.env['UCX_RNDV_THRESH'] === undefined ? 1024 : 1;

/** Handles kept per ArrayBuffer (the ranges its last operations used). */
const PER_BUFFER = 4;
/** Handles kept per worker; past it, a new range is mapped for its operation only. */
const CACHE_LIMIT = 256;

/** A handle for one range, with the operations in flight on it. */
export interface OperationMemh {
  readonly address: bigint;
  readonly length: number;
  readonly memh: bigint;
  /** Operations in flight on it. */
  uses: number;
  /** Kept for the next operation on the same range; otherwise unmapped once no operation uses it. */
  kept: boolean;
  /** `release` bound to this handle (an operation's kUcxDone, made once per handle). */
  readonly done: () => void;
}

/** Maps, keeps and unmaps the operation handles of one worker (in its context). */
export class OwnMemh {
  readonly #context: bigint;
  readonly #params = new StructBuffer(layouts.ucp_mem_map_params_t);
  readonly #out = new OutCell();
  readonly #byBuffer = new WeakMap<ArrayBufferLike, OperationMemh[]>();
  /** Buffers that had an operation: the next one on them is kept. */
  readonly #seen = new WeakSet<ArrayBufferLike>();
  /** Every handle mapped and not yet unmapped, kept or in flight. */
  readonly #live = new Set<OperationMemh>();
  #kept = 0;
  readonly #collected = new FinalizationRegistry<OperationMemh[]>((handles) => {
    for (const handle of handles) this.#forget(handle);
  });
  #closed = false;

  constructor(contextHandle: bigint) {
    this.#context = contextHandle;
    this.#params.setU64('field_mask', K.UCP_MEM_MAP_PARAM_FIELD_ADDRESS | K.UCP_MEM_MAP_PARAM_FIELD_LENGTH |
      K.UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE).setU32('memory_type', Number(K.UCS_MEMORY_TYPE_HOST));
  }

  /**
   * A handle for one operation on `length` bytes at `address` that is not kept (memory of ucxx-ts's
   * own outside any ArrayBuffer: a thread's send copy); null where UCX refuses to map them (the operation then goes without one,
   * as it would on a version without the bug). `release` it once UCX is done.
   */
  mapOnce(address: bigint, length: number): OperationMemh | null {
    return this.#map(address, length, false);
  }

  /**
   * A handle for one operation on `length` bytes of the application's `memory` at `address` (its first
   * byte): the kept one for that range of that buffer, or a new one (kept where there is room). Null
   * where UCX refuses the mapping. `release` it (or set its `done` as the operation's kUcxDone) once
   * UCX is done.
   */
  acquire(memory: ArrayBufferView | ArrayBuffer, address: bigint, length: number): OperationMemh | null {
    const buffer = ArrayBuffer.isView(memory) ? memory.buffer : memory;
    let handles = this.#byBuffer.get(buffer);
    if (handles !== undefined) {
      for (const handle of handles) {
        if (handle.address === address && handle.length === length) {
          handle.uses++;
          return handle;
        }
      }
    }
    // A buffer's first operation maps for itself only (a buffer made per operation never reaches the
    // cache and its finalization registry); from its second on, its ranges are kept.
    if (handles === undefined && !this.#seen.has(buffer)) {
      this.#seen.add(buffer);
      return this.#map(address, length, false);
    }
    let keep = !this.#closed && this.#kept < CACHE_LIMIT;
    if (keep && handles !== undefined && handles.length >= PER_BUFFER) {
      const idle = handles.findIndex((handle) => handle.uses === 0);
      if (idle < 0) keep = false;
      else this.#forget(handles.splice(idle, 1)[0] as OperationMemh);
    }
    const handle = this.#map(address, length, keep);
    if (handle === null || !keep) return handle;
    if (handles === undefined) {
      handles = [];
      this.#byBuffer.set(buffer, handles);
      this.#collected.register(buffer, handles);
    }
    handles.push(handle);
    this.#kept++;
    return handle;
  }

  /** An operation on `handle` is done: one not kept is unmapped once none is in flight. */
  release(handle: OperationMemh): void {
    if (--handle.uses === 0 && !handle.kept) this.#unmap(handle);
  }

  /**
   * A handle for a receive of `count` bytes into `memory` when it may take a rendezvous message, written
   * into `block` (one with UCP_OP_ATTR_FIELD_MEMH); null when it is too small or UCX refuses the mapping
   * (the receive is then posted with the plain block).
   */
  mapReceive(memory: ArrayBufferView | ArrayBuffer, count: number, block: ParamBlock): OperationMemh | null {
    if (count < OWN_MEMH_MIN) return null;
    const handle = this.acquire(memory, addressOf(memory), count);
    if (handle !== null) block.setMemh(handle.memh);
    return handle;
  }

  /** Releases `handle` once UCX is done with `request`: at once when it completed inside the call. */
  releaseAfter(request: AnyRequest, handle: OperationMemh): void {
    if (request.completed) this.release(handle);
    else request[kUcxDone] = handle.done;
  }

  /**
   * The worker was destroyed: every handle is unmapped, those of operations it abandoned included (no
   * UCX object refers to them any more, and no completion comes for them).
   */
  close(): void {
    this.#closed = true;
    for (const handle of [...this.#live]) {
      handle.kept = false;
      this.#unmap(handle);
    }
    this.#kept = 0;
  }

  #map(address: bigint, length: number, kept: boolean): OperationMemh | null {
    this.#params.setPtr('address', address).setU64('length', length);
    if (ucx().ucp_mem_map(this.#context, this.#params.buffer, this.#out.reset()) !== 0) return null;
    liveCounts.operationMappings++;
    const handle: OperationMemh = { address, length, memh: this.#out.ptr() as bigint, uses: 1, kept, done: () => this.release(handle) };
    this.#live.add(handle);
    return handle;
  }

  #unmap(handle: OperationMemh): void {
    if (!this.#live.delete(handle)) return;
    ucx().ucp_mem_unmap(this.#context, handle.memh);
    liveCounts.operationMappings--;
  }

  /** A kept handle is no longer kept (its buffer was collected, or it made room): unmapped once idle. */
  #forget(handle: OperationMemh): void {
    if (!handle.kept) return;
    handle.kept = false;
    this.#kept--;
    if (handle.uses === 0) this.#unmap(handle);
  }
}
