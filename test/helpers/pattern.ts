/** Deterministic byte patterns, so that both sides of a transfer can check bytes without sending them. */

/** `length` bytes of a xorshift32 stream seeded by `seed` (never all-zero, different per seed). */
export function pattern(seed: number, length: number): Uint8Array {
  const out = new Uint8Array(length);
  const words = new Uint32Array(out.buffer, 0, length >>> 2);
  let x = (seed * 2654435761 + 0x9e3779b9) >>> 0 || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    words[i] = x;
  }
  for (let i = words.length * 4; i < length; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

/** The index of the first differing byte, or -1 when equal. */
export function firstMismatch(actual: Uint8Array, expected: Uint8Array): number {
  if (actual.length !== expected.length) return Math.min(actual.length, expected.length);
  if (Buffer.from(actual.buffer, actual.byteOffset, actual.length)
    .equals(Buffer.from(expected.buffer, expected.byteOffset, expected.length))) return -1;
  for (let i = 0; i < actual.length; i++) if (actual[i] !== expected[i]) return i;
  return -1;
}

/** `length` bytes of seed `seed` as the C peers (test/c/*.c) write them: byte i is (uint8_t)((i*131 + s*7 + (i>>8)) ^ (i>>16)). */
export function cPattern(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = ((i * 131 + seed * 7 + (i >>> 8)) ^ (i >>> 16)) & 0xff;
  return out;
}

/** Asserts that `actual` is exactly `cPattern(length, seed)`, naming the first wrong byte. */
export function assertCPattern(actual: Uint8Array, length: number, seed: number, what: string): void {
  if (actual.byteLength !== length) throw new Error(`${what}: ${actual.byteLength} bytes, expected ${length}`);
  const expected = cPattern(length, seed);
  const i = firstMismatch(actual, expected);
  if (i >= 0) {
    throw new Error(`${what} (${length} bytes): byte ${i} is 0x${(actual[i] ?? 0).toString(16)}, expected 0x${(expected[i] ?? 0).toString(16)}`);
  }
}
