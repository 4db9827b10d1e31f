/**
 * Request memory of ucxx-ts's own, zeroed, for fetching atomics (`workarounds.zeroedFetchAtomicRequests`).
 * With UCX's v1 protocols (1.13; 1.20 as ucxx-ts runs it), purging an endpoint (its peer failed, or a
 * forced close) completes a software-emulated fetching atomic still waiting for its reply through
 * ucp_request_send_buffer_dereg, which reads the request's datatype and memory handle. The atomic's
 * init never sets them, so they hold what the request object's previous user left in UCX's pool, and
 * UCX deregisters that stale handle: SIGSEGV in ucp_memh_put (1.20.1) or a failed dereg and an
 * assertion in cma_md.c (1.13.1) (docs/ucx-1.20-bugs/purge_fetch_atomic.c). Passed zeroed
 * (UCP_OP_ATTR_FIELD_REQUEST), the datatype is contig and the handle NULL: the purge only completes the
 * atomic with its error.
 *
 * A block is UCX's from the post until the request's completion (`kUcxDone`); it is not from UCX's pool,
 * so it is never given to ucp_request_free. It is zeroed again and reused after.
 */
import { CONSTANTS, addressOf, layouts, ucx } from '../ffi/index.js';

const ATTR = layouts.ucp_context_attr_t;
/** Room after the request pointer: ucxx-ts asks for no user part (UCP_PARAM_FIELD_REQUEST_SIZE), kept anyway. */
const USER_PART = 64;
/** Blocks kept for reuse per worker: enough for the fetching atomics a loop keeps in flight. */
const KEEP = 256;

/** The zeroed request blocks of one worker. */
export class OwnRequests {
  /** sizeof(ucp_request_t): UCX takes `(ucp_request_t *)param.request - 1`. */
  readonly #ucpPart: number;
  readonly #free: Buffer[] = [];

  constructor(contextHandle: bigint) {
    const attr = Buffer.alloc(Math.max(ATTR.size, 256)); // newer releases grew the struct
    attr.writeBigUInt64LE(CONSTANTS.UCP_ATTR_FIELD_REQUEST_SIZE, ATTR.offsets.field_mask);
    const status = ucx().ucp_context_query(contextHandle, attr);
    const size = status === 0 ? Number(attr.readBigUInt64LE(ATTR.offsets.request_size)) : 0;
    // A query that fails leaves the workaround off (`take` returns null): the atomic goes as before.
    this.#ucpPart = size > 0 ? (size + 15) & ~15 : 0;
  }

  /** A zeroed block, or null where the request size is unknown. */
  take(): Buffer | null {
    if (this.#ucpPart === 0) return null;
    return this.#free.pop() ?? Buffer.alloc(this.#ucpPart + USER_PART);
  }

  /** The address to pass as `ucp_request_param_t.request` for `block`. */
  pointer(block: Buffer): bigint {
    return addressOf(block) + BigInt(this.#ucpPart);
  }

  /** A function that gives `block` back, zeroed, once UCX has completed its request. */
  giver(block: Buffer): () => void {
    return () => {
      if (this.#free.length >= KEEP) return;
      block.fill(0);
      this.#free.push(block);
    };
  }
}
