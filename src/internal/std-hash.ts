/**
 * libstdc++'s `std::_Hash_bytes` (the function behind `std::hash<std::string>` on 64-bit targets),
 * reimplemented bit for bit so that ucxx-ts produces and checks the same checksum as ucxx C++.
 *
 * It is a MurmurHash64A variant (libstdc++-v3/libsupc++/hash_bytes.cc):
 *
 *     m = 0xc6a4a7935bd1e995
 *     h = seed ^ (len * m)
 *     for each full 8-byte little-endian word w:  h ^= shift_mix(w * m) * m;  h *= m
 *     if 1..7 bytes remain (little-endian into t): h ^= t;  h *= m
 *     return shift_mix(shift_mix(h) * m)            where shift_mix(v) = v ^ (v >> 47)
 *
 * all modulo 2^64. `std::hash<std::string>` uses seed 0xc70f6907.
 *
 * Speed: BigInt arithmetic allocates on every operation, so 64-bit values are carried here as two
 * unsigned 32-bit halves in local number variables (which V8 keeps unboxed), and every multiplication
 * is by the constant m: the low 32 bits of the product come from `Math.imul`, the high 32 bits from
 * 16-bit partial products that are exact in a double (`mulHiMLo`) plus two `Math.imul` cross terms.
 * Only the final result becomes a BigInt (about 8x faster than a BigInt per word: docs/performance.md).
 * Keep the 64-bit halves in locals: a number above 2^31 stored in a module-level `let` is boxed.
 */

const TWO_POW_32 = 0x1_0000_0000;

/** Default seed of libstdc++'s `std::hash<std::string>` / `std::hash<std::string_view>`. */
export const STD_HASH_STRING_SEED = 0xc70f6907n;

// m = 0xc6a4a7935bd1e995 as 32-bit halves, and the low half's 16-bit halves.
const M_HI = 0xc6a4a793;
const M_LO = 0x5bd1e995;
const M_LO_0 = M_LO & 0xffff;
const M_LO_1 = M_LO >>> 16;

/** High 32 bits of the 64-bit product a * M_LO, for an unsigned 32-bit a. */
function mulHiMLo(a: number): number {
  const a0 = a & 0xffff;
  const a1 = a >>> 16;
  const p00 = a0 * M_LO_0; // < 2^32
  const mid = a0 * M_LO_1 + a1 * M_LO_0 + (p00 >>> 16); // < 2^33, exact
  return a1 * M_LO_1 + Math.floor(mid / 0x10000); // < 2^32
}

// For (xHi:xLo) * m mod 2^64:
//   low  = Math.imul(xLo, M_LO) >>> 0
//   high = (mulHiMLo(xLo) + Math.imul(xHi, M_LO) + Math.imul(xLo, M_HI)) >>> 0
// written out at each use so that nothing but plain numbers crosses a call.

/**
 * libstdc++ `_Hash_bytes(bytes, bytes.length, seed)`, as an unsigned 64-bit BigInt.
 * With the default seed this equals `std::hash<std::string>{}(std::string(bytes))` on LP64 libstdc++.
 */
export function stdHashBytes(bytes: Uint8Array, seed: bigint = STD_HASH_STRING_SEED): bigint {
  const len = bytes.length;
  let seedHi = 0;
  let seedLo = 0xc70f6907;
  if (seed !== STD_HASH_STRING_SEED) {
    const seed64 = BigInt.asUintN(64, seed);
    seedHi = Number(seed64 >> 32n);
    seedLo = Number(seed64 & 0xffff_ffffn);
  }

  // h = seed ^ (len * m)
  const lenLo = len >>> 0;
  const lenHi = Math.floor(len / TWO_POW_32) >>> 0;
  let hLo = (seedLo ^ Math.imul(lenLo, M_LO)) >>> 0;
  let hHi = (seedHi ^ (mulHiMLo(lenLo) + Math.imul(lenHi, M_LO) + Math.imul(lenLo, M_HI))) >>> 0;

  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const aligned = len - (len & 7);
  for (let off = 0; off < aligned; off += 8) {
    const wLo = view.getUint32(off, true);
    const wHi = view.getUint32(off + 4, true);
    // x = shift_mix(w * m)
    const xHi = (mulHiMLo(wLo) + Math.imul(wHi, M_LO) + Math.imul(wLo, M_HI)) >>> 0;
    const xLo = ((Math.imul(wLo, M_LO) >>> 0) ^ (xHi >>> 15)) >>> 0;
    // y = x * m
    const yLo = Math.imul(xLo, M_LO) >>> 0;
    const yHi = (mulHiMLo(xLo) + Math.imul(xHi, M_LO) + Math.imul(xLo, M_HI)) >>> 0;
    // h = (h ^ y) * m
    const zLo = (hLo ^ yLo) >>> 0;
    const zHi = (hHi ^ yHi) >>> 0;
    hLo = Math.imul(zLo, M_LO) >>> 0;
    hHi = (mulHiMLo(zLo) + Math.imul(zHi, M_LO) + Math.imul(zLo, M_HI)) >>> 0;
  }

  const rest = len & 7;
  if (rest !== 0) {
    // load_bytes: the remaining bytes, little-endian, into one word t; h = (h ^ t) * m
    let tLo = 0;
    let tHi = 0;
    for (let i = rest - 1; i >= 0; i--) {
      const byte = bytes[aligned + i] as number;
      if (i >= 4) tHi = ((tHi << 8) | byte) >>> 0;
      else tLo = ((tLo << 8) | byte) >>> 0;
    }
    const zLo = (hLo ^ tLo) >>> 0;
    const zHi = (hHi ^ tHi) >>> 0;
    hLo = Math.imul(zLo, M_LO) >>> 0;
    hHi = (mulHiMLo(zLo) + Math.imul(zHi, M_LO) + Math.imul(zLo, M_HI)) >>> 0;
  }

  // h = shift_mix(shift_mix(h) * m)
  const sLo = (hLo ^ (hHi >>> 15)) >>> 0;
  const fLo = Math.imul(sLo, M_LO) >>> 0;
  const fHi = (mulHiMLo(sLo) + Math.imul(hHi, M_LO) + Math.imul(sLo, M_HI)) >>> 0;
  return (BigInt(fHi) << 32n) | BigInt((fLo ^ (fHi >>> 15)) >>> 0);
}
