/**
 * Addresses of JS memory and JS views of C memory: the two koffi calls every other FFI module builds on
 * (a module of its own, so that struct-buffer.ts and index.ts both import it without a cycle).
 */
import koffi from 'koffi';

/** The address of a JS memory region's first byte (TypedArray/DataView byteOffset included). */
export function addressOf(memory: ArrayBufferView | ArrayBuffer): bigint {
  return koffi.address(memory) as bigint;
}

/**
 * An ArrayBuffer over C memory. It has no finalizer and dangles once the memory is freed: the caller
 * must keep the memory mapped for as long as the ArrayBuffer is reachable.
 */
export function viewOfMemory(address: bigint, length: number): ArrayBuffer {
  return koffi.view(address, length);
}
