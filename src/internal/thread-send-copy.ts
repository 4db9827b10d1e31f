/**
 * Sends from a `worker_threads` thread are posted from a native copy that outlives the thread. A
 * thread ended by `worker.terminate()` runs no code of ucxx-ts (docs/threads.md), so its UCX objects
 * stay behind with their sends in flight, and its JavaScript heap is freed. A rendezvous receiver
 * pulls the data from the sender's memory itself (CMA, shared memory, RDMA: no progress of the sender
 * needed), so it would read the freed buffer and report success with bytes that were never sent
 * (docs/threads.md). The copy is native memory that only UCX's completion releases: a terminated
 * thread leaks it, as it leaks its other UCX objects, and the receiver gets the real bytes. A send
 * still in flight when its worker is destroyed (a thread that ends or closes meanwhile) keeps its
 * copy too: a receiver that already has its announcement may still pull from it.
 *
 * Main-thread sends are not copied (the main thread's heap lives as long as the process), nor sends
 * below COPY_MIN, which UCX sends eagerly: copied into its own buffers at once, or sent from the
 * buffer by the sender's own progress, which a terminated thread never runs.
 */
import { isMainThread } from 'node:worker_threads';
import { addressOf, ucx } from '../ffi/index.js';

/** Whether this thread's sends are copied. */
export const COPY_THREAD_SENDS = !isMainThread;

/**
 * The smallest send that is copied, chosen well below the sizes at which UCX's automatic threshold
 * switches to rendezvous (not measured for every transport). Where the user sets UCX_RNDV_THRESH
 * (which may be lower), every send is copied.
 */
export const COPY_MIN = process.env['UCX_RNDV_THRESH'] === undefined ? 1024 : 1;

/** A malloc'ed copy of the bytes to send; `free` once UCX has completed the send. */
export interface SendCopy {
  readonly address: bigint;
  readonly free: () => void;
}

/**
 * Blocks kept for reuse, by size class (a power of two): a fresh malloc of a large block pays its
 * page faults on every send. At most POOL_LIMIT bytes are kept; they are freed when the thread exits
 * (a terminated thread leaks them with its other UCX objects).
 */
const POOL_LIMIT = 64 << 20;
const pool = new Map<number, bigint[]>();
let pooled = 0;
let exitHooked = false;

function sizeClass(length: number): number {
  return length <= 4096 ? 4096 : 2 ** Math.ceil(Math.log2(length));
}

function releasePool(): void {
  for (const blocks of pool.values()) for (const block of blocks) ucx().free(block);
  pool.clear();
  pooled = 0;
}

/** Copies `parts` (total `length` bytes, > 0) into one native block. */
export function copyForSend(parts: readonly Uint8Array[], length: number): SendCopy {
  const api = ucx();
  const size = sizeClass(length);
  let blocks = pool.get(size);
  let address = blocks?.pop() ?? null;
  if (address !== null) pooled -= size;
  else address = api.malloc(size);
  if (address === null) throw new RangeError(`no memory for a ${length}-byte send copy`);
  let at = Number(address);
  for (const part of parts) {
    if (part.byteLength > 0) api.memcpy(at, addressOf(part), part.byteLength);
    at += part.byteLength;
  }
  const block = address;
  let freed = false;
  return {
    address: block,
    free: () => {
      if (freed) return;
      freed = true;
      if (pooled + size > POOL_LIMIT) {
        api.free(block);
        return;
      }
      if (blocks === undefined) {
        blocks = [];
        pool.set(size, blocks);
      }
      blocks.push(block);
      pooled += size;
      if (!exitHooked) {
        exitHooked = true;
        process.once('exit', releasePool);
      }
    },
  };
}
