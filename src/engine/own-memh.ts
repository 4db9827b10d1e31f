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
 * operation. Handles of application buffers are kept for the next operation on the same range of the
 * same buffer (a loop that reuses its buffers maps once, where a mapping per operation cost two more
 * FFI calls and UCX's registration work each time), a few per ArrayBuffer and at most CACHE_LIMIT in
 * all, and unmapped when the buffer is collected or the worker closes. One whose operation is still in
 * flight when its worker is destroyed is not unmapped (UCX may complete nothing then): a small leak,
 * as the operation's other UCX memory.
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
/** Handles kept in all; past it, a new range is mapped for its operation only. */
const CACHE_LIMIT = 256;

/** A handle for one range, with the operations in flight on it. */
export interface OperationMemh {
  readonly address: bigint;
  readonly length: number;
  readonly memh: bigint;
  /** Operations in flight on it. */
  uses: number;
  /** Not kept: unmapped once its operation is done. */
  readonly once: boolean;
  /** `release` bound to this handle (an operation's kUcxDone, made once per handle). */
  readonly done: () => void;
}

/** Maps and unmaps the operation handles of one context. */
export class OwnMemh {
  readonly #context: bigint;
  readonly #params = new StructBuffer(layouts.ucp_mem_map_params_t);
  readonly #out = new OutCell();
  readonly #byBuffer = new WeakMap<ArrayBufferLike, OperationMemh[]>();
  /** Every kept handle, for close(). */
  readonly #kept = new Set<OperationMemh>();
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
   * A handle for `length` bytes at `address`, or null where UCX refuses to map them (the operation then
   * goes without one, as it would on a version without the bug).
   */
  map(address: bigint, length: number): bigint | null {
    this.#params.setPtr('address', address).setU64('length', length);
    if (ucx().ucp_mem_map(this.#context, this.#params.buffer, this.#out.reset()) !== 0) return null;
    liveCounts.mappings++;
    return this.#out.ptr();
  }

  /** A function that unmaps `memh` once (the operation's kUcxDone). */
  unmapper(memh: bigint): () => void {
    return () => this.#unmap(memh);
  }

  #unmap(memh: bigint): void {
    ucx().ucp_mem_unmap(this.#context, memh);
    liveCounts.mappings--;
  }

  /**
   * A handle for one operation on `length` bytes of `memory` at `address` (its first byte): the kept
   * one for that range of that buffer, or a new one (kept where there is room). Null where UCX refuses
   * the mapping. `release` it (or set its `done` as the operation's kUcxDone) once UCX is done.
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
    const memh = this.map(address, length);
    if (memh === null) return null;
    let once = this.#closed || this.#kept.size >= CACHE_LIMIT;
    if (!once) {
      if (handles === undefined) {
        handles = [];
        this.#byBuffer.set(buffer, handles);
        this.#collected.register(buffer, handles);
      }
      if (handles.length >= PER_BUFFER) {
        const idle = handles.findIndex((handle) => handle.uses === 0);
        if (idle < 0) once = true;
        else this.#forget((handles.splice(idle, 1)[0]) as OperationMemh);
      }
    }
    const handle: OperationMemh = { address, length, memh, uses: 1, once, done: () => this.release(handle) };
    if (!once) {
      (handles as OperationMemh[]).push(handle);
      this.#kept.add(handle);
    }
    return handle;
  }

  /** An operation on `handle` is done: a handle not kept is unmapped once none is in flight. */
  release(handle: OperationMemh): void {
    if (--handle.uses === 0 && handle.once && !this.#closed) this.#unmap(handle.memh);
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

  /** The worker is closing: kept handles that no operation uses are unmapped, later ones are not kept. */
  close(): void {
    if (this.#closed) return;
    for (const handle of this.#kept) if (handle.uses === 0) this.#unmap(handle.memh);
    this.#kept.clear();
    this.#closed = true;
  }

  /** Unmaps a kept handle (its buffer was collected, or it made room), unless the worker closed. */
  #forget(handle: OperationMemh): void {
    if (!this.#kept.delete(handle) || this.#closed) return;
    if (handle.uses === 0) this.#unmap(handle.memh);
  }
}
