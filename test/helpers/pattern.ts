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
