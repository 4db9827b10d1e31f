/**
 * Copies of incoming payloads, carved out of shared slabs. Allocating an ArrayBuffer costs ~4 us on
 * these machines (more than copying 64 KiB), so a message-per-allocation design caps small-message
 * rates; Node's own Buffer pool only serves sizes below 4 KiB. Like that pool, a slice keeps its whole
 * slab (SLAB_SIZE) alive while it is reachable: copy out (`Buffer.from(slice)`) what you keep for long.
 */
import { addressOf, copyIntoMemory, copyIntoRegion, type Address } from '../ffi/index.js';

/** Slab size; payloads above MAX_SLICE get a buffer of their own. */
const SLAB_SIZE = 256 * 1024;
const MAX_SLICE = 16 * 1024;

let slab: ArrayBuffer | null = null;
/** The slab's address (it does not move: an ArrayBuffer's backing store stays where it was allocated). */
let slabAddress = 0;
let used = 0;

/** A new Buffer holding a copy of `length` bytes of C memory at `address`. */
export function copyPayload(address: Address, length: number): Buffer {
  if (length > MAX_SLICE) {
    const out = Buffer.allocUnsafeSlow(length);
    copyIntoMemory(out, address, length);
    return out;
  }
  if (slab === null || used + length > SLAB_SIZE) {
    slab = new ArrayBuffer(SLAB_SIZE);
    slabAddress = Number(addressOf(slab));
    used = 0;
  }
  copyIntoRegion(slabAddress, SLAB_SIZE, used, address, length);
  const out = Buffer.from(slab, used, length);
  used += (length + 7) & ~7; // keep slices 8-byte aligned
  return out;
}
