/** Normalising the memory arguments users pass (ArrayBuffer, SharedArrayBuffer, any view). */

export type BufferSource = ArrayBufferView | ArrayBuffer | SharedArrayBuffer;

/** True for what ucxx-ts accepts as memory. */
export function isBufferSource(value: unknown): value is BufferSource {
  return ArrayBuffer.isView(value) || value instanceof ArrayBuffer ||
    (typeof SharedArrayBuffer !== 'undefined' && value instanceof SharedArrayBuffer);
}

/** A Uint8Array over exactly the bytes of `memory` (no copy). Throws TypeError for anything else. */
export function asBytes(memory: unknown, what: string): Uint8Array {
  if (memory instanceof Uint8Array) return memory;
  if (ArrayBuffer.isView(memory)) return new Uint8Array(memory.buffer, memory.byteOffset, memory.byteLength);
  if (memory instanceof ArrayBuffer) return new Uint8Array(memory);
  if (typeof SharedArrayBuffer !== 'undefined' && memory instanceof SharedArrayBuffer) {
    return new Uint8Array(memory);
  }
  throw new TypeError(
    `${what} must be an ArrayBuffer, SharedArrayBuffer, TypedArray, DataView or Buffer, got ${describe(memory)}`,
  );
}

/** The byte length of a BufferSource without creating a view. */
export function byteLengthOf(memory: unknown, what: string): number {
  if (ArrayBuffer.isView(memory)) return memory.byteLength;
  if (memory instanceof ArrayBuffer) return memory.byteLength;
  if (typeof SharedArrayBuffer !== 'undefined' && memory instanceof SharedArrayBuffer) return memory.byteLength;
  throw new TypeError(
    `${what} must be an ArrayBuffer, SharedArrayBuffer, TypedArray, DataView or Buffer, got ${describe(memory)}`,
  );
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') return (value as object).constructor?.name ?? 'object';
  return typeof value;
}

const U64_MAX = (1n << 64n) - 1n;

/** A non-negative integer (number or bigint) as bigint; RangeError/TypeError otherwise. */
export function toU64(value: unknown, what: string): bigint {
  if (typeof value === 'bigint') {
    if (value < 0n || value > U64_MAX) throw new RangeError(`${what} must be in [0, 2^64), got ${value}`);
    return value;
  }
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`${what} must be a non-negative safe integer or a bigint, got ${value}`);
    }
    return BigInt(value);
  }
  throw new TypeError(`${what} must be a number or a bigint, got ${describe(value)}`);
}

/** A 64-bit tag or mask: a bigint in [0, 2^64) or a non-negative safe integer. */
export function toTag(value: unknown, what = 'tag'): bigint {
  return toU64(value, what);
}
