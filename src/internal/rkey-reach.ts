/**
 * Which shared-memory records of a packed remote key `ucp_ep_rkey_unpack` will hand to a transport on
 * a given endpoint.
 *
 * UCX 1.13.1: `ucp_ep_rkey_unpack` calls `ucp_ep_rkey_unpack_reachable` (src/ucp/core/ucp_rkey.inl:53-58),
 * which passes the endpoint configuration's `reachable_md_map` to `ucp_ep_rkey_unpack_internal`; that
 * keeps `md_map = remote_md_map & reachable_md_map` (ucp_rkey.c:385) and skips the record of every other
 * remote MD without reading it (ucp_rkey.c:427-430). `reachable_md_map` is built in
 * `ucp_wireup_get_reachable_mds` (src/ucp/wireup/wireup.c:1113-1173): every MD of the peer's address
 * that *any* local transport reaches (`uct_iface_is_reachable`), merged with the previous configuration's
 * map, so it only grows. For the shared-memory transports that is "same system id (boot id) and same
 * IPC namespace" (uct_iface.c:848-870): a peer on another host never has its sysv/posix records
 * unpacked, and one on this host always has, whether or not a lane uses shared memory (with
 * peer error handling and UCX_MM_ERROR_HANDLING=n no lane does, and a bad sysv record still crashes
 * the unpack: checked on 1.13.1).
 *
 * Neither the API nor `ucp_ep_print_info` shows `reachable_md_map`, so it is probed: a key whose only
 * record is one of this context's own shared-memory records (a segment that exists and attaches), put
 * at the MD index in question, is unpacked on the endpoint, and `ucp_rkey_ptr` says whether a
 * shared-memory component took it (UCS_OK) or nothing did (UCS_ERR_UNREACHABLE). A probe is only made
 * with a record of the same component and size as the one it stands for, so the component that reads
 * it is the one whose format it has.
 */
import { kMdComponents, kPackedRkey } from './symbols.js';
import { OutCell, ucx } from '../ffi/index.js';
import { parsePackedRkey } from './packed-rkey.js';
import type { Context } from '../context.js';
import type { MemoryHandle } from '../memory-handle.js';

/** The shared-memory components whose records name a segment (checked by shm-rkey-check.ts). */
export const SHARED_MEMORY_COMPONENTS: ReadonlySet<string> = new Set(['sysv', 'posix']);

const UCS_OK = 0;

interface OwnRecord {
  readonly bytes: Uint8Array;
  readonly address: bigint;
}

interface OwnRecords {
  readonly handle: MemoryHandle | null;
  readonly byComponent: ReadonlyMap<string, OwnRecord>;
}

const ownRecords = new WeakMap<Context, OwnRecords>();
/** MD indices an endpoint is known to unpack (reachable_md_map only grows). */
const reachable = new WeakMap<object, Set<number>>();

/**
 * This context's own shared-memory records, from a small UCX-allocated region that lives as long as the
 * context (the context closes it with its other memory handles).
 */
function ownSharedMemoryRecords(context: Context): OwnRecords {
  let own = ownRecords.get(context);
  if (own === undefined) {
    const components = context[kMdComponents]();
    const handle = context.createMemoryHandle(4096);
    const packed = handle[kPackedRkey]();
    const byComponent = new Map<string, OwnRecord>();
    for (const md of parsePackedRkey(packed).mds) {
      const component = components.get(md.index);
      if (component !== undefined && SHARED_MEMORY_COMPONENTS.has(component) && !byComponent.has(component)) {
        byComponent.set(component, {
          bytes: packed.slice(md.offset, md.offset + md.size),
          address: handle.getBaseAddress(),
        });
      }
    }
    if (byComponent.size === 0) handle.close();
    own = { handle: byComponent.size === 0 ? null : handle, byComponent };
    ownRecords.set(context, own);
  }
  return own;
}

/**
 * Whether `ucp_ep_rkey_unpack` on this endpoint would unpack a `component` record (sysv or posix, by
 * this context's MD numbering) of `size` bytes at remote MD index `index`. Answers true (check it)
 * whenever it cannot tell: no own record of that component, or one of another size.
 *
 * `owner` identifies the endpoint for the cache (the Endpoint object); `ep` is its `ucp_ep_h`.
 */
export function endpointUnpacksRecord(
  context: Context, owner: object, ep: bigint, index: number, component: string, size: number,
): boolean {
  let known = reachable.get(owner);
  if (known?.has(index) === true) return true;
  const record = ownSharedMemoryRecords(context).byComponent.get(component);
  if (record === undefined || record.bytes.length !== size) return true;

  const probe = Buffer.alloc(8 + 1 + 1 + size);
  probe.writeBigUInt64LE(1n << BigInt(index), 0);
  probe[8] = 0; // UCS_MEMORY_TYPE_HOST
  probe[9] = size;
  probe.set(record.bytes, 10);
  const api = ucx();
  const out = new OutCell();
  if (api.ucp_ep_rkey_unpack(ep, probe, out.reset()) !== UCS_OK) return true;
  const rkey = out.ptr();
  let unpacked: boolean;
  try {
    unpacked = api.ucp_rkey_ptr(rkey, record.address, Buffer.alloc(8)) === UCS_OK;
  } finally {
    api.ucp_rkey_destroy(rkey);
  }
  if (unpacked) {
    if (known === undefined) reachable.set(owner, (known = new Set()));
    known.add(index);
  }
  return unpacked;
}
