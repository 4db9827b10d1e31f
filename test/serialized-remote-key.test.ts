// Unit tests of the pure-TypeScript remote-key serialization: libstdc++'s hash, the ucxx serialized
// remote-key format with the ucxx-ts access trailer, and the structural validator of packed UCP rkeys.
// No FFI: the fixtures below are bytes that ucp_rkey_pack (UCX 1.13.1) and ucxx's serialize() logic
// produced on the development machine.
import { test } from 'node:test';
// (`import assert from 'node:assert/strict'` needs allowSyntheticDefaultImports, which this project leaves off.)
import { strict as assert } from 'node:assert';

import { stdHashBytes } from '#ucxx-ts/internal/std-hash.js';
import {
  ACCESS_TRAILER_SIZE,
  MAX_PACKED_RKEY_SIZE,
  decodeSerializedRemoteKey,
  encodeSerializedRemoteKey,
  type DecodedSerializedRemoteKey,
  type RemoteKeyAccess,
} from '#ucxx-ts/internal/serialized-remote-key.js';
import { checkPackedRkeyAgainstReference, parsePackedRkey } from '#ucxx-ts/internal/packed-rkey.js';
import { RemoteKeyFormatError } from '#ucxx-ts/errors/remote-key-format.js';
import { selectProfile } from '#ucxx-ts/ffi/ucx-versions.js';

// The fixtures are UCX 1.13.1's keys: the parsers check 1.13's format here, whichever UCX the run loads
// (none: this file loads no library). Keys of UCX 1.20 are tested in packed-rkey-1.20.test.ts.
selectProfile([1, 13, 1]);

const hex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'hex'));
const toHex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
const ascii = (s: string): Uint8Array => new TextEncoder().encode(s);

interface Fixture {
  readonly name: string;
  /** What ucp_rkey_pack returned (UCX 1.13.1, Debian 12, x86-64). */
  readonly packed: string;
  readonly base: bigint;
  readonly size: bigint;
  /** What ucxx::RemoteKey::serialize()'s logic (cpp/src/remote_key.cpp) made of it, compiled with g++. */
  readonly ucxx: string;
  readonly mdMap: bigint;
  readonly mds: ReadonlyArray<readonly [index: number, size: number]>;
}

// Captured with a C++ program that runs ucp_init_version(1, 13) / ucp_mem_map / ucp_rkey_pack and then the
// statements of ucxx's RemoteKey::serialize(); "alloc" = UCP_MEM_MAP_ALLOCATE, "malloc" = a registered
// malloc'ed buffer, 4096 bytes. MDs on this machine: 0 self, 1 tcp, 2 sysv, 3 posix, 4 cma (with UCX_TLS
// restricted, the numbering shrinks to the selected ones).
const FIXTURES: readonly Fixture[] = [
  {
    name: 'default transports, UCP_MEM_MAP_ALLOCATE (sysv key)',
    packed: '17000000000000000000000c3c80000000b0216cbe7f000000',
    base: 140455834660864n,
    size: 4096n,
    ucxx:
      'caf63ac41692ee7c190000000000000017000000000000000000000c3c80000000b0216cbe7f00000000b0216cbe7f0000' +
      '0010000000000000',
    mdMap: 0x17n,
    mds: [[0, 0], [1, 0], [2, 12], [4, 0]],
  },
  {
    name: 'default transports, malloc buffer',
    packed: '130000000000000000000000',
    base: 93903016717632n,
    size: 4096n,
    ucxx: '822ccdc1a81894ad0c00000000000000130000000000000000000000406df47f675500000010000000000000',
    mdMap: 0x13n,
    mds: [[0, 0], [1, 0], [4, 0]],
  },
  {
    name: 'UCX_TLS=posix, UCP_MEM_MAP_ALLOCATE (24-byte posix key)',
    packed: '01000000000000000018ae110000030000c000105f4c1f7f00000010000000000000',
    base: 139772402012160n,
    size: 4096n,
    ucxx:
      '866584e4b0176937220000000000000001000000000000000018ae110000030000c000105f4c1f7f0000001000000000' +
      '000000105f4c1f7f00000010000000000000',
    mdMap: 0x1n,
    mds: [[0, 24]],
  },
  {
    // No selected transport registers memory: md_map is empty, and UCX emulates RMA over active messages
    // (a put through this key was checked to land).
    name: 'UCX_TLS=posix, malloc buffer (empty md_map)',
    packed: '000000000000000000',
    base: 94356836611280n,
    size: 4096n,
    ucxx: 'cc246cfd6a18c0c80900000000000000000000000000000000d074ba29d15500000010000000000000',
    mdMap: 0n,
    mds: [],
  },
  {
    name: 'UCX_TLS=tcp, UCP_MEM_MAP_ALLOCATE',
    packed: '01000000000000000000',
    base: 140015239806976n,
    size: 4096n,
    ucxx: '27897b6ce62e0c090a000000000000000100000000000000000000c0a1d6577f00000010000000000000',
    mdMap: 0x1n,
    mds: [[0, 0]],
  },
  {
    name: 'UCX_TLS=sm, UCP_MEM_MAP_ALLOCATE (MD 0 is sysv here)',
    packed: '0500000000000000000c1000010000b06115ab7f000000',
    base: 140372774858752n,
    size: 4096n,
    ucxx:
      'a4c7d7327c14d14017000000000000000500000000000000000c1000010000b06115ab7f00000000b06115ab7f000000' +
      '10000000000000',
    mdMap: 0x5n,
    mds: [[0, 12], [2, 0]],
  },
];

const ACCESSES: readonly RemoteKeyAccess[] = ['read', 'write', 'read-write'];
const MAIN = FIXTURES[0] as Fixture;

/** Deterministic PRNG (mulberry32), so that a failure can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Recompute the ucxx checksum of a (possibly mutated) serialized key in place. */
function fixChecksum(bytes: Uint8Array): Uint8Array {
  if (bytes.length >= 8) {
    new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).setBigUint64(0, stdHashBytes(bytes.subarray(8)), true);
  }
  return bytes;
}

function isFormatError(error: unknown): boolean {
  return error instanceof RemoteKeyFormatError && error.code === 'UCXX_ERR_REMOTE_KEY_FORMAT';
}

/**
 * Decode `bytes`; the only allowed outcomes are a RemoteKeyFormatError, or a result that re-encodes to
 * exactly the same bytes (so nothing in the input was ignored or misread). Returns the result or null.
 */
function decodeOrReject(bytes: Uint8Array, context: string): DecodedSerializedRemoteKey | null {
  let decoded: DecodedSerializedRemoteKey;
  try {
    decoded = decodeSerializedRemoteKey(bytes);
  } catch (error) {
    if (!isFormatError(error)) {
      assert.fail(`${context}: threw something other than RemoteKeyFormatError: ${String(error)}`);
    }
    assert.match((error as Error).message, /^serialized remote key: /, context);
    return null;
  }
  const again = encodeSerializedRemoteKey({
    packedRkey: decoded.packedRkey,
    baseAddress: decoded.baseAddress,
    size: decoded.size,
    ...(decoded.hasAccessTrailer ? { access: decoded.access } : {}),
  });
  assert.equal(toHex(again), toHex(bytes), `${context}: accepted, but does not re-encode to the same bytes`);
  return decoded;
}

function assertFormatError(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(isFormatError(error), `expected RemoteKeyFormatError, got ${String(error)}`);
    assert.match((error as Error).message, message);
    return true;
  });
}

// ---------------------------------------------------------------------------------------------------------
// std::hash<std::string>

test('stdHashBytes: the test vectors of UCX-NOTES', () => {
  assert.equal(stdHashBytes(ascii('')), 0x553e93901e462a6en);
  assert.equal(stdHashBytes(ascii('a')), 0x454ddee488c1ed6bn);
  assert.equal(stdHashBytes(ascii('abcdefgh')), 0x783db3e38db898bbn);
  assert.equal(stdHashBytes(ascii('abcdefghi')), 0xb4ec9257851c8aafn);
});

test('stdHashBytes: agrees with g++/libstdc++ std::hash<std::string> and std::_Hash_bytes', () => {
  // Printed by a C++ program compiled with g++ 12 on the development machine.
  assert.equal(stdHashBytes(ascii('0123456789abcdef')), 0x934b0d760642ed86n);
  assert.equal(stdHashBytes(ascii('The quick brown fox jumps over the lazy dog')), 0xdccbf2541704bc75n);
  const ramp = new Uint8Array(256).map((_, i) => i);
  const expected: ReadonlyArray<readonly [number, bigint]> = [
    [7, 0xda198a9190737033n],
    [15, 0x621819cf54afbb80n],
    [16, 0xad258e8fcf86c7fdn],
    [17, 0x7c3026daef20c1c3n],
    [200, 0xa7e883b7d5e3d3d3n],
    [255, 0x6e1861ca4ef8d15cn],
    [256, 0xf64918f170835cb9n],
  ];
  for (const [n, h] of expected) assert.equal(stdHashBytes(ramp.subarray(0, n)), h, `bytes 0..${n}`);

  // std::_Hash_bytes(b, n, seed) with b[i] = (unsigned char)(255 - 7 i).
  const b = new Uint8Array(64).map((_, i) => (255 - i * 7) & 0xff);
  const seeded: ReadonlyArray<readonly [number, bigint, bigint]> = [
    [0, 0x0n, 0x0000000000000000n],
    [0, 0x1n, 0xc6a4a7935bd064dcn],
    [0, 0xffffffffffffffffn, 0xb0d9485c2cd761b2n],
    [3, 0x0n, 0xa67e54dac3465b95n],
    [3, 0x123456789abcdef0n, 0x8bc455849e68e674n],
    [8, 0x1n, 0x5a657b538303255bn],
    [8, 0xffffffffffffffffn, 0xcc4e698a1d916066n],
    [13, 0x0n, 0xb085ebc157e1720bn],
    [13, 0x123456789abcdef0n, 0x28e3f3e7f744caa8n],
    [64, 0x0n, 0x6483c81abc877decn],
    [64, 0xffffffffffffffffn, 0x11c1b996271c7c44n],
  ];
  for (const [n, seed, h] of seeded) assert.equal(stdHashBytes(b.subarray(0, n), seed), h, `n=${n} seed=${seed}`);
});

test('stdHashBytes: reads only its view (byteOffset honoured) and is fast enough', () => {
  const backing = new Uint8Array(300).fill(0xee);
  backing.set(ascii('abcdefghi'), 17);
  assert.equal(stdHashBytes(backing.subarray(17, 26)), 0xb4ec9257851c8aafn);
  assert.equal(stdHashBytes(Buffer.from('abcdefghi')), 0xb4ec9257851c8aafn);

  // About 0.5 us per 200-byte hash on the development machine; the bound is loose on purpose.
  const input = new Uint8Array(200).map((_, i) => (i * 37) & 0xff);
  let acc = 0n;
  const start = process.hrtime.bigint();
  for (let i = 0; i < 20_000; i++) acc ^= stdHashBytes(input);
  const perHashNs = Number(process.hrtime.bigint() - start) / 20_000;
  assert.equal(acc, 0n); // even number of identical hashes
  assert.ok(perHashNs < 50_000, `a 200-byte hash took ${perHashNs} ns`);
});

// ---------------------------------------------------------------------------------------------------------
// Packed rkey structure

test('parsePackedRkey: every key ucp_rkey_pack produced here parses, with the expected records', () => {
  for (const f of FIXTURES) {
    const parsed = parsePackedRkey(hex(f.packed));
    assert.equal(parsed.mdMap, f.mdMap, f.name);
    assert.equal(parsed.memType, 0, f.name);
    assert.deepEqual(
      parsed.mds.map((m) => [m.index, m.size]),
      f.mds.map(([i, s]) => [i, s]),
      f.name,
    );
    assert.equal(parsed.trailer, 0, f.name);
    assert.equal(parsed.sysDev, null, f.name);
    // Records are contiguous: size byte, then the key.
    let p = 9;
    for (const m of parsed.mds) {
      assert.equal(m.offset, p + 1, f.name);
      p = m.offset + m.size;
    }
    assert.equal(p, hex(f.packed).length, f.name);
  }
  // The sysv record of the first fixture carries the segment's address.
  const sysv = parsePackedRkey(hex(MAIN.packed)).mds[2];
  assert.deepEqual(sysv, { index: 2, offset: 12, size: 12 });
});

test('parsePackedRkey: the optional sys_dev / distance section', () => {
  const base = hex(MAIN.packed);
  const withSection = (...extra: number[]): Uint8Array => Uint8Array.of(...base, ...extra);

  const one = parsePackedRkey(withSection(3));
  assert.equal(one.trailer, 1);
  assert.equal(one.sysDev, 3);
  assert.deepEqual(one.distances, []);

  const two = parsePackedRkey(withSection(3, 1, 0x40, 0x50, 63, 0x41, 0x51));
  assert.equal(two.trailer, 7);
  assert.deepEqual(two.distances, [
    { sysDev: 1, latencyFp8: 0x40, bandwidthFp8: 0x50 },
    { sysDev: 63, latencyFp8: 0x41, bandwidthFp8: 0x51 },
  ]);

  for (const extra of [[3, 1], [3, 1, 2], [3, 1, 2, 3, 4]]) {
    assertFormatError(() => parsePackedRkey(withSection(...extra)), /sys_dev section is 1 byte plus 3 bytes/);
  }
  assertFormatError(() => parsePackedRkey(withSection(255)), /UCS_SYS_DEVICE_ID_UNKNOWN/);
  assertFormatError(() => parsePackedRkey(withSection(3, 64, 0, 0)), /system device 64 \(must be below 64\)/);
  assertFormatError(() => parsePackedRkey(withSection(3, 5, 0, 0, 5, 0, 0)), /out of increasing order/);
  assertFormatError(() => parsePackedRkey(withSection(3, 6, 0, 0, 5, 0, 0)), /out of increasing order/);
});

test('parsePackedRkey: rejects short buffers, bad memory types and records that run past the end', () => {
  const key = hex(MAIN.packed);
  for (let len = 0; len < 9; len++) {
    assertFormatError(() => parsePackedRkey(key.subarray(0, len)), /shorter than its md_map/);
  }
  // Cut inside the records: a size byte or a key runs past the end. (Cuts that end exactly after a record
  // make the md_map promise more records than there are.)
  for (let len = 9; len < key.length; len++) {
    assertFormatError(() => parsePackedRkey(key.subarray(0, len)), /past the end/);
  }
  for (const memType of [5, 6, 9, 0x7f, 0xff]) {
    const bad = key.slice();
    bad[8] = memType;
    assertFormatError(() => parsePackedRkey(bad), new RegExp(`memory type ${memType} is not a valid`));
  }
  for (const memType of [1, 2, 3, 4]) {
    const ok = key.slice();
    ok[8] = memType;
    assert.equal(parsePackedRkey(ok).memType, memType);
  }
  // A newer UCX's memory types, when the caller says its UCX has them.
  const rdma = key.slice();
  rdma[8] = 5;
  assert.equal(parsePackedRkey(rdma, { memoryTypeLimit: 10 }).memType, 5);

  // A size byte larger than what is left.
  const big = key.slice();
  big[11] = 14;
  assertFormatError(() => parsePackedRkey(big), /the 14-byte record of MD 2 at offset 12 runs past the end/);
  // All 64 MD bits set, but no records.
  const all = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0);
  assertFormatError(() => parsePackedRkey(all), /size byte of the record of MD 0 is at offset 9, past the end/);
  // The highest MD bit is a valid index in 1.13 (UCP_MAX_MDS = 64).
  const top = Uint8Array.of(0, 0, 0, 0, 0, 0, 0, 0x80, 0, 2, 0xaa, 0xbb);
  assert.deepEqual(parsePackedRkey(top).mds, [{ index: 63, offset: 10, size: 2 }]);
  assertFormatError(() => parsePackedRkey(top, { maxMds: 16 }), /MD index of 16 or more/);
  assert.throws(() => parsePackedRkey('abc' as unknown as Uint8Array), TypeError);
});

test('checkPackedRkeyAgainstReference: rejects a record whose length differs from the local one', () => {
  const parsed = parsePackedRkey(hex(MAIN.packed));
  const reference = new Map<number, number>([
    [0, 0],
    [1, 0],
    [2, 12],
    [3, 24],
    [4, 0],
  ]);
  checkPackedRkeyAgainstReference(parsed, reference);
  checkPackedRkeyAgainstReference(parsed, new Map()); // nothing to compare with
  checkPackedRkeyAgainstReference(parsed, new Map([[7, 99]])); // MD unknown to the key
  assertFormatError(
    () => checkPackedRkeyAgainstReference(parsed, new Map([[2, 24]])),
    /record of MD 2 is 12 bytes, but this context packs 24-byte keys/,
  );
  assertFormatError(
    () => checkPackedRkeyAgainstReference(parsed, new Map([[4, 8]])),
    /record of MD 4 is 0 bytes, but this context packs 8-byte keys/,
  );
});

// ---------------------------------------------------------------------------------------------------------
// Serialized remote keys

test('ucxx C++ keys decode: no trailer, access read-write, fields as packed', () => {
  for (const f of FIXTURES) {
    const decoded = decodeSerializedRemoteKey(hex(f.ucxx));
    assert.equal(toHex(decoded.packedRkey), f.packed, f.name);
    assert.equal(decoded.baseAddress, f.base, f.name);
    assert.equal(decoded.size, f.size, f.name);
    assert.equal(decoded.access, 'read-write', f.name);
    assert.equal(decoded.hasAccessTrailer, false, f.name);
    assert.equal(decoded.packedRkeyInfo.mdMap, f.mdMap, f.name);
  }
});

test('encoding without access is byte-identical to ucxx C++ serialize()', () => {
  for (const f of FIXTURES) {
    const encoded = encodeSerializedRemoteKey({ packedRkey: hex(f.packed), baseAddress: f.base, size: f.size });
    assert.equal(toHex(encoded), f.ucxx, f.name);
  }
});

test('a key built by hand in the ucxx layout decodes', () => {
  const packed = hex(MAIN.packed);
  const n = packed.length;
  const bytes = new Uint8Array(32 + n);
  const view = new DataView(bytes.buffer);
  view.setBigUint64(8, BigInt(n), true);
  bytes.set(packed, 16);
  view.setBigUint64(16 + n, 0x7f00_1234_5000n, true);
  view.setBigUint64(24 + n, 1n << 20n, true);
  view.setBigUint64(0, stdHashBytes(bytes.subarray(8)), true);
  const decoded = decodeSerializedRemoteKey(bytes);
  assert.equal(decoded.baseAddress, 0x7f00_1234_5000n);
  assert.equal(decoded.size, 1n << 20n);
  assert.equal(decoded.access, 'read-write');
  assert.deepEqual(decoded.packedRkey, packed);
});

test('round trip with and without the access trailer', () => {
  for (const f of FIXTURES) {
    const packedRkey = hex(f.packed);
    for (const access of [undefined, ...ACCESSES]) {
      const encoded = encodeSerializedRemoteKey({ packedRkey, baseAddress: f.base, size: f.size, access });
      assert.equal(encoded.length, 32 + packedRkey.length + (access === undefined ? 0 : ACCESS_TRAILER_SIZE));
      const decoded = decodeSerializedRemoteKey(encoded);
      assert.deepEqual(decoded.packedRkey, packedRkey);
      assert.equal(decoded.baseAddress, f.base);
      assert.equal(decoded.size, f.size);
      assert.equal(decoded.access, access ?? 'read-write');
      assert.equal(decoded.hasAccessTrailer, access !== undefined);
      // The ucxx part is untouched by the trailer; only the checksum (which covers it) differs.
      assert.equal(toHex(encoded.subarray(8, 32 + packedRkey.length)), f.ucxx.slice(16));
    }
  }
});

test('the trailer layout: "UCXXTS", version 1, reserved 0, access flags; inside the checksum', () => {
  const packedRkey = hex(MAIN.packed);
  const end = 32 + packedRkey.length;
  const flags = { read: 1, write: 2, 'read-write': 3 } as const;
  for (const access of ACCESSES) {
    const encoded = encodeSerializedRemoteKey({ packedRkey, baseAddress: MAIN.base, size: MAIN.size, access });
    assert.equal(toHex(encoded.subarray(end)), `55435858545301${'00'}0${flags[access]}`);
    // ucxx's deserialize() hashes [8, end) -- trailer included -- so that is what the checksum covers.
    const view = new DataView(encoded.buffer, encoded.byteOffset, encoded.byteLength);
    assert.equal(view.getBigUint64(0, true), stdHashBytes(encoded.subarray(8)));
  }
});

test('decoding accepts Buffers (pooled), subarrays, other views and ArrayBuffers; returns a copy', () => {
  const encoded = encodeSerializedRemoteKey({
    packedRkey: hex(MAIN.packed),
    baseAddress: MAIN.base,
    size: MAIN.size,
    access: 'read',
  });
  // Buffer.from of a small hex string lives at a non-zero offset of Node's shared pool.
  const pooled = Buffer.from(toHex(encoded), 'hex');
  const fromPool = decodeSerializedRemoteKey(pooled);
  assert.equal(fromPool.access, 'read');
  assert.equal(fromPool.baseAddress, MAIN.base);

  const backing = new Uint8Array(encoded.length + 13).fill(0x5a);
  backing.set(encoded, 5);
  const sub = backing.subarray(5, 5 + encoded.length);
  assert.equal(decodeSerializedRemoteKey(sub).size, MAIN.size);
  assert.equal(decodeSerializedRemoteKey(new DataView(backing.buffer, 5, encoded.length)).access, 'read');
  assert.equal(decodeSerializedRemoteKey(encoded.slice().buffer).access, 'read');

  // The packed key returned is a copy: changing the input afterwards does not change it.
  const input = encoded.slice();
  const decoded = decodeSerializedRemoteKey(input);
  input.fill(0);
  assert.equal(toHex(decoded.packedRkey), MAIN.packed);
  assert.equal(decoded.packedRkey.byteOffset, 0);
  assert.equal(decoded.packedRkey.buffer.byteLength, decoded.packedRkey.length);
});

test('decoding rejects what is not bytes with a TypeError', () => {
  for (const bad of [null, undefined, 'caf63ac4', 42, 42n, [1, 2, 3], {}, { length: 40 }]) {
    assert.throws(() => decodeSerializedRemoteKey(bad as unknown as Uint8Array), TypeError, String(bad));
  }
});

test('decoding: short inputs, checksum mismatch, N of 0 or out of range, N above the maximum', () => {
  const key = hex(MAIN.ucxx);
  for (let len = 0; len < 32; len++) {
    assertFormatError(() => decodeSerializedRemoteKey(key.subarray(0, len)), /shorter than its 32 bytes of fixed fields/);
  }
  const flipped = key.slice();
  flipped[20] = (flipped[20] as number) ^ 0x01;
  assertFormatError(
    () => decodeSerializedRemoteKey(flipped),
    /^serialized remote key: checksum mismatch: the key says 0x7cee9216c43af6ca, its bytes \[8, 57\) hash to 0x[0-9a-f]{16}$/,
  );

  const withN = (n: bigint, length = key.length): Uint8Array => {
    const b = new Uint8Array(length);
    b.set(key.subarray(0, Math.min(length, key.length)));
    new DataView(b.buffer).setBigUint64(8, n, true);
    return fixChecksum(b);
  };
  assertFormatError(() => decodeSerializedRemoteKey(withN(0n)), /the packed rkey length is 0$/);
  assertFormatError(
    () => decodeSerializedRemoteKey(withN(26n)),
    /the packed rkey length 26 exceeds the 25 bytes that the 57-byte input has beyond its fixed fields/,
  );
  for (const n of [1n << 32n, 1n << 53n, (1n << 63n) + 25n, (1n << 64n) - 1n]) {
    assertFormatError(() => decodeSerializedRemoteKey(withN(n)), /exceeds the 25 bytes/);
  }
  // An N that the input does hold, but larger than any real packed key.
  const huge = withN(BigInt(MAX_PACKED_RKEY_SIZE + 1), 32 + MAX_PACKED_RKEY_SIZE + 1);
  assertFormatError(() => decodeSerializedRemoteKey(huge), /the packed rkey length 65537 exceeds the maximum of 65536/);
  const enormous = new Uint8Array(1 << 20);
  assertFormatError(() => decodeSerializedRemoteKey(enormous), /longer than the largest valid key/);
  // A smaller N (the rest then reads as unrecognised trailing bytes).
  assertFormatError(() => decodeSerializedRemoteKey(withN(24n)), /1 unrecognised bytes follow the ucxx fields/);
});

test('decoding: region size 0 and base + size beyond 2^64 are rejected', () => {
  const packedRkey = hex(MAIN.packed);
  const n = packedRkey.length;
  const make = (base: bigint, size: bigint): Uint8Array => {
    const b = hex(MAIN.ucxx);
    const view = new DataView(b.buffer);
    view.setBigUint64(16 + n, base, true);
    view.setBigUint64(24 + n, size, true);
    return fixChecksum(b);
  };
  assertFormatError(() => decodeSerializedRemoteKey(make(MAIN.base, 0n)), /the region size is 0$/);
  assertFormatError(
    () => decodeSerializedRemoteKey(make((1n << 64n) - 4096n, 4097n)),
    /the region at 0xfffffffffffff000 of size 0x0000000000001001 runs past the end of the 64-bit address space/,
  );
  assertFormatError(() => decodeSerializedRemoteKey(make((1n << 64n) - 1n, (1n << 64n) - 1n)), /runs past the end/);
  // Ending exactly at 2^64 is fine, as is a base of 0.
  assert.equal(decodeSerializedRemoteKey(make((1n << 64n) - 4096n, 4096n)).size, 4096n);
  assert.equal(decodeSerializedRemoteKey(make(0n, (1n << 64n) - 1n)).baseAddress, 0n);
});

test('decoding: malformed trailers and unknown trailing bytes are rejected', () => {
  const packedRkey = hex(MAIN.packed);
  const end = 32 + packedRkey.length;
  const good = encodeSerializedRemoteKey({ packedRkey, baseAddress: MAIN.base, size: MAIN.size, access: 'read' });
  const edit = (fn: (b: Uint8Array) => Uint8Array): Uint8Array => fixChecksum(fn(good.slice()));

  for (const [flags, ok] of [[0, false], [1, true], [2, true], [3, true], [4, false], [7, false], [0x81, false], [0xff, false]] as const) {
    const b = edit((x) => {
      x[end + 8] = flags;
      return x;
    });
    if (ok) assert.ok(decodeSerializedRemoteKey(b).hasAccessTrailer);
    else assertFormatError(() => decodeSerializedRemoteKey(b), /access flags of the ucxx-ts trailer are 0x[0-9a-f]+; valid/);
  }
  assertFormatError(
    () => decodeSerializedRemoteKey(edit((x) => ((x[end + 6] = 2), x))),
    /trailer has version 2; this ucxx-ts reads version 1/,
  );
  assertFormatError(
    () => decodeSerializedRemoteKey(edit((x) => ((x[end + 7] = 1), x))),
    /reserved byte of the ucxx-ts trailer is 1, not 0/,
  );
  // Magic present, wrong length (cut short, or followed by more bytes).
  for (const extra of [6, 7, 8, 10, 20]) {
    const b = new Uint8Array(end + extra);
    b.set(good.subarray(0, Math.min(good.length, end + extra)));
    assertFormatError(
      () => decodeSerializedRemoteKey(fixChecksum(b)),
      new RegExp(`the ucxx-ts trailer at offset ${end} is ${extra} bytes, not 9`),
    );
  }
  // Bytes that do not start with the magic (including a prefix of it).
  for (const extra of [[0], [0x55], [0x55, 0x43, 0x58, 0x58, 0x54], [0x55, 0x43, 0x58, 0x58, 0x54, 0x54, 1, 0, 1]]) {
    const b = Uint8Array.of(...hex(MAIN.ucxx), ...extra);
    assertFormatError(
      () => decodeSerializedRemoteKey(fixChecksum(b)),
      new RegExp(`${extra.length} unrecognised bytes follow the ucxx fields at offset ${end}`),
    );
  }
});

test('decoding: a packed rkey with a bad structure is rejected even with a valid checksum', () => {
  const packed = hex(MAIN.packed);
  const bad = packed.slice();
  bad[8] = 5; // memory type out of range for UCX 1.13
  const b = new Uint8Array(hex(MAIN.ucxx));
  b.set(bad, 16);
  assertFormatError(
    () => decodeSerializedRemoteKey(fixChecksum(b)),
    /^serialized remote key: packed remote key: memory type 5 is not a valid ucs_memory_type_t/,
  );
  try {
    decodeSerializedRemoteKey(b);
  } catch (error) {
    assert.ok((error as Error).cause instanceof RemoteKeyFormatError);
  }
});

test('encoding rejects bad arguments', () => {
  const packedRkey = hex(MAIN.packed);
  const ok = { packedRkey, baseAddress: MAIN.base, size: MAIN.size };
  assert.throws(() => encodeSerializedRemoteKey({ ...ok, size: 0n }), RangeError);
  assert.throws(() => encodeSerializedRemoteKey({ ...ok, size: -1n }), RangeError);
  assert.throws(() => encodeSerializedRemoteKey({ ...ok, size: 1n << 64n }), RangeError);
  assert.throws(() => encodeSerializedRemoteKey({ ...ok, baseAddress: -1n }), RangeError);
  assert.throws(() => encodeSerializedRemoteKey({ ...ok, baseAddress: (1n << 64n) - 1n, size: 2n }), RangeError);
  assert.throws(() => encodeSerializedRemoteKey({ ...ok, baseAddress: 5 as unknown as bigint }), TypeError);
  assert.throws(() => encodeSerializedRemoteKey({ ...ok, access: 'none' as RemoteKeyAccess }), TypeError);
  assert.throws(() => encodeSerializedRemoteKey({ ...ok, packedRkey: new Uint8Array(0) }), RangeError);
  assert.throws(() => encodeSerializedRemoteKey({ ...ok, packedRkey: [1, 2] as unknown as Uint8Array }), TypeError);
  assertFormatError(() => encodeSerializedRemoteKey({ ...ok, packedRkey: new Uint8Array(8) }), /shorter than its md_map/);
  assertFormatError(() => encodeSerializedRemoteKey({ ...ok, packedRkey: packedRkey.subarray(0, 20) }), /past the end/);
});

test('RemoteKeyFormatError: name, code, instanceof', () => {
  const error = new RemoteKeyFormatError('x');
  assert.ok(error instanceof Error);
  assert.equal(error.name, 'RemoteKeyFormatError');
  assert.equal(error.code, 'UCXX_ERR_REMOTE_KEY_FORMAT');
  assert.equal(error.message, 'x');
});

// ---------------------------------------------------------------------------------------------------------
// Exhaustive and random corruption

/**
 * Replacement values for one byte: all 255 others for the first fixture's keys, and for the rest every
 * single-bit flip plus 0x00 and 0xff (keeps the exhaustive tests to a few seconds).
 */
function replacements(exhaustive: boolean, original: number): number[] {
  const values = exhaustive
    ? Array.from({ length: 256 }, (_, v) => v)
    : [0x00, 0xff, ...Array.from({ length: 8 }, (_, bit) => original ^ (1 << bit))];
  return [...new Set(values)].filter((v) => v !== original);
}

/** Every fixture in both forms: as ucxx wrote it, and with each ucxx-ts access trailer. */
function validKeys(): Array<{ name: string; bytes: Uint8Array; exhaustive: boolean }> {
  const keys: Array<{ name: string; bytes: Uint8Array; exhaustive: boolean }> = [];
  for (const f of FIXTURES) {
    const exhaustive = f === MAIN;
    keys.push({ name: `${f.name} (ucxx)`, bytes: hex(f.ucxx), exhaustive });
    for (const access of ACCESSES) {
      keys.push({
        name: `${f.name} (${access})`,
        bytes: encodeSerializedRemoteKey({ packedRkey: hex(f.packed), baseAddress: f.base, size: f.size, access }),
        exhaustive,
      });
    }
  }
  return keys;
}

test('every single-byte corruption of a real key is rejected (checksum), never a crash', () => {
  for (const { name, bytes, exhaustive } of validKeys()) {
    for (let i = 0; i < bytes.length; i++) {
      for (const v of replacements(exhaustive, bytes[i] as number)) {
        const b = bytes.slice();
        b[i] = v;
        const result = decodeOrReject(b, `${name}: byte ${i} = ${v}`);
        assert.equal(result, null, `${name}: byte ${i} = ${v} was accepted despite the checksum`);
      }
    }
  }
});

test('every single-byte corruption with the checksum recomputed is rejected or decodes consistently', () => {
  // A corruption that also fixes the checksum exercises the structural checks behind it.
  let accepted = 0;
  let rejected = 0;
  for (const { name, bytes, exhaustive } of validKeys()) {
    for (let i = 8; i < bytes.length; i++) {
      for (const v of replacements(exhaustive, bytes[i] as number)) {
        const b = bytes.slice();
        b[i] = v;
        if (decodeOrReject(fixChecksum(b), `${name}: byte ${i} = ${v} (checksum fixed)`) === null) rejected++;
        else accepted++;
      }
    }
  }
  // Key material, addresses and sizes can legitimately take many values; lengths, md_map bits, memory
  // types and the trailer mostly cannot.
  assert.ok(accepted > 0 && rejected > 0, `accepted ${accepted}, rejected ${rejected}`);
});

test('truncation at every length is rejected (and with the checksum fixed, only a whole ucxx key remains valid)', () => {
  for (const { name, bytes } of validKeys()) {
    const hasTrailer = decodeSerializedRemoteKey(bytes).hasAccessTrailer;
    const plainLength = bytes.length - (hasTrailer ? ACCESS_TRAILER_SIZE : 0);
    for (let len = 0; len < bytes.length; len++) {
      assert.equal(decodeOrReject(bytes.slice(0, len), `${name}: cut to ${len}`), null);
      const fixed = decodeOrReject(fixChecksum(bytes.slice(0, len)), `${name}: cut to ${len}, checksum fixed`);
      // Cutting the trailer off entirely leaves a valid plain ucxx key (read-write): that is the format.
      assert.equal(fixed !== null, len === plainLength, `${name}: cut to ${len}, checksum fixed`);
      if (fixed !== null) assert.equal(fixed.access, 'read-write');
    }
  }
});

test('10,000 random inputs: RemoteKeyFormatError (or TypeError-free consistent decode), nothing else', () => {
  const random = prng(0x5eed_0001);
  const byte = (): number => Math.floor(random() * 256);
  for (let i = 0; i < 10_000; i++) {
    const length = Math.floor(random() * 120);
    const b = new Uint8Array(length).map(byte);
    if (i % 2 === 1 && length >= 16) {
      // Half of them with a plausible N and a valid checksum, so that they get past the first checks.
      const n = Math.floor(random() * Math.max(1, length - 31)) + (random() < 0.2 ? 40 : 0);
      new DataView(b.buffer).setBigUint64(8, BigInt(n), true);
      fixChecksum(b);
    }
    decodeOrReject(b, `random input #${i}`);
    try {
      parsePackedRkey(b);
    } catch (error) {
      assert.ok(isFormatError(error), `parsePackedRkey, random input #${i}: ${String(error)}`);
    }
  }
});

test('10,000 random mutations of valid keys: RemoteKeyFormatError or a consistent decode, nothing else', () => {
  const random = prng(0x5eed_0002);
  const keys = validKeys();
  let accepted = 0;
  let refused = 0;
  for (let i = 0; i < 10_000; i++) {
    const { name, bytes } = keys[Math.floor(random() * keys.length)] as { name: string; bytes: Uint8Array };
    let b = Array.from(bytes);
    const edits = 1 + Math.floor(random() * 4);
    for (let e = 0; e < edits; e++) {
      const at = Math.floor(random() * (b.length + 1));
      const kind = random();
      if (kind < 0.5 && at < b.length) b[at] = Math.floor(random() * 256);
      else if (kind < 0.65 && at < b.length) b[at] = (b[at] as number) ^ (1 << Math.floor(random() * 8));
      else if (kind < 0.8) b.splice(at, 0, Math.floor(random() * 256));
      else if (kind < 0.9) b.splice(at, 1 + Math.floor(random() * 3));
      else b = b.slice(0, at);
    }
    const mutated = Uint8Array.from(b);
    const unchanged = toHex(mutated) === toHex(bytes);
    // Most mutations are caught by the checksum; fix it for two thirds of them to reach the other checks.
    if (i % 3 !== 0) fixChecksum(mutated);
    const decoded = decodeOrReject(mutated, `${name}, mutation #${i}`);
    if (decoded !== null) accepted++;
    else refused++;
    // A changed key whose checksum was not recomputed is always refused.
    if (i % 3 === 0 && !unchanged) assert.equal(decoded, null, `${name}, mutation #${i}: a stale checksum was accepted`);
  }
  // The checksum-broken third is refused whole; among the resealed ones, the structure checks refuse
  // most too. Decodes happen (edits of the address or size fields reseal into valid keys), so both
  // branches of decodeOrReject ran.
  assert.ok(refused > 3000, `only ${refused} of 10,000 mutations refused`);
  assert.ok(accepted > 0, 'no resealed mutation decoded: the consistency branch never ran');
  assert.equal(accepted + refused, 10_000);
});
