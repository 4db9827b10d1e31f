/**
 * The completion callbacks: one registered C function per kind of completion, dispatching on the slot id
 * that each operation carries in `user_data`. A completed UCX request is released here, exactly once.
 */
import { layouts, readStruct, registerCallback, sizeAt, ucx, type Address } from '../ffi/index.js';
import type { AnyRequest } from '../request.js';
import { SlotTable } from '../internal/slot-table.js';
import { kComplete, kReleased, kSlotId } from '../internal/symbols.js';

/** Requests in flight, by the id written into their `user_data`. */
export const inflight = new SlotTable<AnyRequest>();

/**
 * Set while an nbx call is running: a callback that UCX invokes from inside that call (operations posted
 * with UCP_OP_ATTR_FLAG_NO_IMM_CMPL) must not free the request that the call is about to return.
 */
let posting = false;
let freeAfterPost: Address = 0;

/**
 * Bracket an nbx call whose callback may run inside it (RequestEngine.open and track do, for the blocks
 * marked `bracketed`): `beginPost()` before, `endPost()` after. A request completed from inside the
 * call is freed only once it has returned. Brackets never nest (a callback run inside a call settles a
 * request whose chained work is attached only after the call returns), so a bracket still open at the
 * next `beginPost()` is one whose call threw: it is closed first.
 */
export function beginPost(): void {
  if (posting) endPost();
  posting = true;
}

export function endPost(): void {
  posting = false;
  if (freeAfterPost !== 0) {
    ucx().ucp_request_free(freeAfterPost);
    freeAfterPost = 0;
  }
}

/**
 * Requests completed inside ucp_worker_progress, freed once it returns: a call back into C from inside
 * a koffi callback is a nested FFI call, far dearer than the same call made afterwards.
 */
let progressing = false;
/** Handles to free, in [0, toFree) (a count rather than `length = 0`, which is a runtime call in V8). */
const freeAfterProgress: Address[] = [];
let toFree = 0;

/** Runs one ucp_worker_progress call and frees what completed inside it. */
export function progressOnce(progress: (worker: bigint) => number, worker: bigint): number {
  progressing = true;
  let n: number;
  try {
    n = progress(worker);
  } finally {
    progressing = false;
  }
  if (toFree > 0) {
    const free = ucx().ucp_request_free;
    for (let i = 0; i < toFree; i++) {
      free(freeAfterProgress[i] as Address);
      freeAfterProgress[i] = 0;
    }
    toFree = 0;
  }
  return n;
}

function complete(handle: Address, id: number, status: number, length: number, tag: bigint): void {
  const request = inflight.get(id);
  inflight.delete(id);
  if (handle !== 0 && request?.[kReleased] !== true) {
    if (posting) freeAfterPost = handle;
    else if (progressing) freeAfterProgress[toFree++] = handle;
    else ucx().ucp_request_free(handle);
  }
  if (request !== undefined) {
    request[kSlotId] = 0;
    request[kComplete](status, length, tag);
  }
}

const RECV_INFO = layouts.ucp_tag_recv_info_t;
const TAG_OFFSET = RECV_INFO.offsets.sender_tag;
const LENGTH_OFFSET = RECV_INFO.offsets.length;

let registered: { send: bigint; tagRecv: bigint; streamRecv: bigint } | undefined;

/** The addresses of the registered completion callbacks (registered on first use). */
export function completionCallbacks(): { send: bigint; tagRecv: bigint; streamRecv: bigint } {
  registered ??= {
    send: registerCallback('send', (handle: Address, status: number, id: number) => {
      complete(handle, id, status, 0, 0n);
    }),
    tagRecv: registerCallback('tagRecv', (handle: Address, status: number, info: Address, id: number) => {
      if (info === 0) complete(handle, id, status, 0, 0n);
      else {
        const fields = readStruct(info, RECV_INFO.size);
        complete(handle, id, status, sizeAt(fields, LENGTH_OFFSET), fields.readBigUInt64LE(TAG_OFFSET));
      }
    }),
    streamRecv: registerCallback('streamRecv', (handle: Address, status: number, length: number, id: number) => {
      complete(handle, id, status, length, 0n);
    }),
  };
  return registered;
}
