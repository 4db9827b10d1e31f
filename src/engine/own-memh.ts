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
 * The handle covers exactly the operation's buffer and lives until UCX completes the operation
 * (`request[kUcxDone]`); without a registration cache UCX would have registered the same range for
 * the same time. One whose operation is still in flight when its worker is destroyed is not unmapped
 * (UCX may complete nothing then): a small leak, as the operation's other UCX memory.
 */
import { CONSTANTS, OutCell, StructBuffer, addressOf, layouts, ucx } from '../ffi/index.js';
import { kUcxDone } from '../internal/symbols.js';
import type { AnyRequest } from '../request.js';
import type { ParamBlock } from './param-blocks.js';

const K = CONSTANTS;

/**
 * The smallest operation that is given its own handle, chosen well below the sizes at which UCX's
 * automatic threshold switches to rendezvous (1.20 over tcp: 16 KiB and up). Where the user sets
 * UCX_RNDV_THRESH (which may be lower), every operation is.
 */
export const OWN_MEMH_MIN = process.env['UCX_RNDV_THRESH'] === undefined ? 1024 : 1;

/** Maps and unmaps the operation handles of one context. */
export class OwnMemh {
  readonly #context: bigint;
  readonly #params = new StructBuffer(layouts.ucp_mem_map_params_t);
  readonly #out = new OutCell();

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
    return this.#out.ptr();
  }

  /** A function that unmaps `memh` once (the operation's kUcxDone). */
  unmapper(memh: bigint): () => void {
    return () => {
      ucx().ucp_mem_unmap(this.#context, memh);
    };
  }

  /**
   * A handle for a receive of `count` bytes into `memory` when it may take a rendezvous message, written
   * into `block` (one with UCP_OP_ATTR_FIELD_MEMH); null when it is too small or UCX refuses the mapping
   * (the receive is then posted with the plain block).
   */
  mapReceive(memory: ArrayBufferView | ArrayBuffer, count: number, block: ParamBlock): bigint | null {
    if (count < OWN_MEMH_MIN) return null;
    const memh = this.map(addressOf(memory), count);
    if (memh !== null) block.setMemh(memh);
    return memh;
  }

  /** Unmaps `memh` once UCX is done with `request`: at once when it completed inside the call. */
  unmapAfter(request: AnyRequest, memh: bigint): void {
    const unmap = this.unmapper(memh);
    if (request.completed) unmap();
    else request[kUcxDone] = unmap;
  }
}
