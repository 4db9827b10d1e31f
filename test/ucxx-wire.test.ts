/**
 * The pure codecs of ucxx's wire protocols (no UCX involved): the tagMulti header (`ucxx::Header`,
 * cpp/src/header.cpp) and the active-message header (`AmHeader`, cpp/src/request_am.cpp). Byte vectors
 * are written out from ucxx's layout by hand; the fuzz cases feed the decoders thousands of random and
 * mutated inputs, each of which must decode or throw UcxxHeaderFormatError, nothing else.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import {
  TAG_MULTI_HEADER_FRAMES, TAG_MULTI_HEADER_SIZE, UcxxHeaderFormatError, decodeTagMultiHeader, decodeUcxxAmHeader,
  encodeTagMultiHeaders, encodeUcxxAmHeader,
} from 'ucxx-ts';

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');
const fromHex = (text: string): Uint8Array => new Uint8Array(Buffer.from(text.replace(/\s+/g, ''), 'hex'));
const zeros = (n: number): string => '00'.repeat(n);
/** A u64 little-endian, as hex. */
const u64 = (v: bigint | number): string => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(v));
  return b.toString('hex');
};
const i32 = (v: number): string => {
  const b = Buffer.alloc(4);
  b.writeInt32LE(v);
  return b.toString('hex');
};

function isFormatError(header: 'tag-multi' | 'am') {
  return (err: unknown): boolean => {
    assert.ok(err instanceof UcxxHeaderFormatError, `expected UcxxHeaderFormatError, got ${String(err)}`);
    assert.equal(err.code, 'UCXX_ERR_HEADER_FORMAT');
    assert.equal(err.header, header);
    return true;
  };
}

/** A deterministic PRNG (xorshift32), so that a failing fuzz case can be replayed. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x;
  };
}

// ---- tagMulti header ----------------------------------------------------------------------------

/** A header written out field by field: next, nframes, 100 x i32 isCUDA, 100 x u64 size. */
function headerHex(next: 0 | 1, sizes: readonly number[], cuda: readonly number[] = []): string {
  let out = (next ? '01' : '00') + u64(sizes.length);
  for (let i = 0; i < 100; i++) out += i32(cuda[i] ?? 0);
  for (let i = 0; i < 100; i++) out += u64(sizes[i] ?? 0);
  return out;
}

test('tagMulti header: 1209 bytes, fields at 0 / 1 / 9 / 409 (ucxx::Header::serialize)', () => {
  assert.equal(TAG_MULTI_HEADER_SIZE, 1 + 8 + 100 * 4 + 100 * 8);
  assert.equal(TAG_MULTI_HEADER_FRAMES, 100);
  const [header, ...rest] = encodeTagMultiHeaders([0, 5, 1 << 20]);
  assert.equal(rest.length, 0);
  assert.ok(header !== undefined);
  assert.equal(hex(header), headerHex(0, [0, 5, 1 << 20]));
  // Spot checks of the same bytes by offset.
  assert.equal(header[0], 0);
  assert.equal(hex(header.subarray(1, 9)), '0300000000000000');
  assert.equal(hex(header.subarray(9, 409)), zeros(400));
  assert.equal(hex(header.subarray(409, 417)), zeros(8));
  assert.equal(hex(header.subarray(417, 425)), '0500000000000000');
  assert.equal(hex(header.subarray(425, 433)), '0000100000000000');
  assert.equal(hex(header.subarray(433)), zeros(8 * 97));
});

test('tagMulti headers: 101 frames take two (next=1 with 100, then 1); 200 take two full ones', () => {
  const sizes101 = Array.from({ length: 101 }, (_, i) => i * 3);
  const h101 = encodeTagMultiHeaders(sizes101);
  assert.equal(h101.length, 2);
  assert.equal(hex(h101[0] as Uint8Array), headerHex(1, sizes101.slice(0, 100)));
  assert.equal(hex(h101[1] as Uint8Array), headerHex(0, sizes101.slice(100)));
  const h200 = encodeTagMultiHeaders(new Array<number>(200).fill(1));
  assert.deepEqual(h200.map((h) => [h[0], decodeTagMultiHeader(h).sizes.length]), [[1, 100], [0, 100]]);
  const h100 = encodeTagMultiHeaders(new Array<number>(100).fill(7));
  assert.deepEqual(h100.map((h) => h[0]), [0]);
  const withCuda = encodeTagMultiHeaders([8, 9], [true, false]);
  assert.equal(hex(withCuda[0] as Uint8Array), headerHex(0, [8, 9], [1, 0]));
});

test('tagMulti headers: zero frames, negative or fractional sizes are refused when sending', () => {
  assert.throws(() => encodeTagMultiHeaders([]), RangeError);
  assert.throws(() => encodeTagMultiHeaders([-1]), RangeError);
  assert.throws(() => encodeTagMultiHeaders([1.5]), RangeError);
  assert.throws(() => encodeTagMultiHeaders([1], [true, true]), RangeError);
});

test('tagMulti header decode: round trip, and every malformation is UcxxHeaderFormatError', () => {
  const decoded = decodeTagMultiHeader(fromHex(headerHex(0, [0, 5, 2 ** 40], [0, 1, 0])));
  assert.deepEqual(decoded, { next: false, sizes: [0, 5, 2 ** 40], isCUDA: [false, true, false] });
  const full = Array.from({ length: 100 }, (_, i) => i);
  assert.equal(decodeTagMultiHeader(fromHex(headerHex(1, full))).next, true);

  const bad: [string, Uint8Array][] = [
    ['short', new Uint8Array(1208)],
    ['long', new Uint8Array(1210)],
    ['empty', new Uint8Array(0)],
    ['next = 2', fromHex('02' + headerHex(0, [1]).slice(2))],
    ['nframes = 0', fromHex(headerHex(0, []))],
    ['nframes = 101', fromHex('00' + u64(101) + headerHex(0, []).slice(18))],
    ['nframes = 2^64-1', fromHex('00' + u64((1n << 64n) - 1n) + headerHex(0, []).slice(18))],
    ['next with 99 frames', fromHex(headerHex(1, new Array<number>(99).fill(1)))],
    ['isCUDA = 2', fromHex(headerHex(0, [1], [2]))],
    ['isCUDA = -1', fromHex(headerHex(0, [1], [-1]))],
    ['size 2^53', fromHex(headerHex(0, [2 ** 53]))],
    ['slot past nframes: size', fromHex(headerHex(0, [1, 2]).replace(/^(00)0200/, '$10100'))],
    ['slot past nframes: isCUDA', fromHex(headerHex(0, [1], [0, 1]))],
  ];
  for (const [what, bytes] of bad) {
    assert.throws(() => decodeTagMultiHeader(bytes), isFormatError('tag-multi'), what);
  }
  // size 2^53 in its own encoding (u64 above MAX_SAFE_INTEGER)
  const big = fromHex(headerHex(0, [0]));
  new DataView(big.buffer).setBigUint64(409, 1n << 60n, true);
  assert.throws(() => decodeTagMultiHeader(big), isFormatError('tag-multi'));
});

test('tagMulti header decode: 20,000 random and mutated inputs decode or throw UcxxHeaderFormatError', () => {
  const next = rng(0x7a6);
  const valid = [
    ...encodeTagMultiHeaders(Array.from({ length: 150 }, (_, i) => i * 1000)),
    ...encodeTagMultiHeaders([0]),
    ...encodeTagMultiHeaders([5, 6, 7], [true, false, true]),
  ];
  let decoded = 0;
  for (let n = 0; n < 20_000; n++) {
    let bytes: Uint8Array;
    if (n % 2 === 0) {
      const length = n % 10 === 0 ? TAG_MULTI_HEADER_SIZE : next() % 1400;
      bytes = new Uint8Array(length);
      const density = next() % 4; // mostly-zero inputs reach the deeper checks
      for (let i = 0; i < length; i++) if (next() % 4 < density) bytes[i] = next() & 0xff;
    } else {
      bytes = new Uint8Array(valid[next() % valid.length] as Uint8Array);
      const edits = 1 + (next() % 3);
      for (let e = 0; e < edits; e++) {
        const at = next() % bytes.length;
        bytes[at] = next() % 2 === 0 ? next() & 0xff : (bytes[at] as number) ^ (1 << (next() % 8));
      }
      if (next() % 16 === 0) bytes = bytes.subarray(0, next() % bytes.length);
    }
    let header;
    try {
      header = decodeTagMultiHeader(bytes);
    } catch (err) {
      isFormatError('tag-multi')(err);
      continue;
    }
    decoded++;
    // What decodes is canonical: re-encoding gives the same bytes (the `next` flag aside).
    const [again] = encodeTagMultiHeaders(header.sizes, header.isCUDA);
    assert.equal(hex((again as Uint8Array).subarray(1)), hex(bytes.subarray(1)), `case ${n}`);
  }
  assert.ok(decoded > 100, `only ${decoded} inputs decoded: the mutations are too destructive to test much`);
});

// ---- AM header ----------------------------------------------------------------------------------

const ownerHex = (owner: string): string => Buffer.from(owner).toString('hex').padEnd(128, '0');

test('AM header: ucxx AmHeader::serialize byte vectors', () => {
  // No receiver callback, no user header: memoryType, flag, policy, size.
  assert.equal(hex(encodeUcxxAmHeader()), '00000000' + '00' + '00' + u64(0));
  // Everything: memory type 1, owner + id, policy 1, a 2-byte user header.
  assert.equal(
    hex(encodeUcxxAmHeader({
      memoryType: 1, memoryTypePolicy: 'errorOnUnsupported',
      receiverCallbackInfo: { owner: 'ucxx-ts', id: 0x0102030405060708n }, userHeader: new Uint8Array([0x68, 0x69]),
    })),
    '01000000' + '01' + ownerHex('ucxx-ts') + '0807060504030201' + '01' + u64(2) + '6869',
  );
  // A 63-byte owner fills the storage but its NUL.
  const longest = 'o'.repeat(63);
  const encoded = encodeUcxxAmHeader({ receiverCallbackInfo: { owner: longest, id: 7 } });
  assert.equal(encoded.byteLength, 4 + 1 + 64 + 8 + 1 + 8);
  assert.equal(encoded[5 + 63], 0);
});

test('AM header: encoder refusals (owner too long or with NUL, ids, memory types, policies)', () => {
  assert.throws(() => encodeUcxxAmHeader({ receiverCallbackInfo: { owner: 'o'.repeat(64), id: 1 } }), RangeError);
  assert.throws(() => encodeUcxxAmHeader({ receiverCallbackInfo: { owner: 'é'.repeat(32), id: 1 } }), RangeError);
  assert.throws(() => encodeUcxxAmHeader({ receiverCallbackInfo: { owner: 'a\0b', id: 1 } }), RangeError);
  assert.throws(() => encodeUcxxAmHeader({ receiverCallbackInfo: { owner: 'a', id: -1 } }), RangeError);
  assert.throws(() => encodeUcxxAmHeader({ receiverCallbackInfo: { owner: 'a', id: 1n << 64n } }), RangeError);
  assert.throws(() => encodeUcxxAmHeader({ memoryType: 64 }), RangeError);
  assert.throws(() => encodeUcxxAmHeader({ memoryTypePolicy: 'strict' as never }), TypeError);
});

test('AM header decode: round trip, the older format, and every malformation is UcxxHeaderFormatError', () => {
  const full = decodeUcxxAmHeader(fromHex('01000000' + '01' + ownerHex('ucxx-ts') + '0807060504030201' + '01' + u64(2) + '6869'));
  assert.deepEqual(full, {
    memoryType: 1, memoryTypePolicy: 'errorOnUnsupported', receiverCallbackInfo: { owner: 'ucxx-ts', id: 0x0102030405060708n },
    userHeader: new Uint8Array([0x68, 0x69]),
  });
  // Before ucxx's user headers the record ended after the receiver-callback fields (ucxx still reads it).
  assert.deepEqual(decodeUcxxAmHeader(fromHex('00000000' + '00')), {
    memoryType: 0, memoryTypePolicy: 'fallbackToHost', receiverCallbackInfo: null, userHeader: new Uint8Array(0),
  });
  assert.deepEqual(decodeUcxxAmHeader(fromHex('00000000' + '01' + ownerHex('') + u64(9))).receiverCallbackInfo, { owner: '', id: 9n });

  const base = '00000000' + '00' + '00' + u64(2) + '6869';
  const bad: [string, string][] = [
    ['empty', ''],
    ['4 bytes', '00000000'],
    ['flag 2', '00000000' + '02' + '00' + u64(0)],
    ['memory type 64', '40000000' + '00' + '00' + u64(0)],
    ['memory type 2^32-1', 'ffffffff' + '00' + '00' + u64(0)],
    ['owner cut short', '00000000' + '01' + ownerHex('x').slice(0, 40)],
    ['id cut short', '00000000' + '01' + ownerHex('x') + '0102'],
    ['owner without NUL', '00000000' + '01' + '61'.repeat(64) + u64(1)],
    ['byte after the owner NUL', '00000000' + '01' + ownerHex('ab').slice(0, 126) + '01' + u64(1)],
    ['owner not UTF-8', '00000000' + '01' + ownerHex('').replace(/^0000/, 'c328') + u64(1)],
    ['policy only', '00000000' + '00' + '00'],
    ['policy + 7 bytes', '00000000' + '00' + '00' + '00'.repeat(7)],
    ['policy 2', '00000000' + '00' + '02' + u64(0)],
    ['user header size too large', '00000000' + '00' + '00' + u64(3) + '6869'],
    ['user header size too small', '00000000' + '00' + '00' + u64(1) + '6869'],
    ['user header size 2^64-1', '00000000' + '00' + '00' + u64((1n << 64n) - 1n) + '6869'],
    ['trailing byte', base + '00'],
  ];
  assert.deepEqual(decodeUcxxAmHeader(fromHex(base)).userHeader, new Uint8Array([0x68, 0x69]));
  for (const [what, text] of bad) assert.throws(() => decodeUcxxAmHeader(fromHex(text)), isFormatError('am'), what);
});

test('AM header decode: 20,000 random and mutated inputs decode or throw UcxxHeaderFormatError', () => {
  const next = rng(0xa3);
  const valid = [
    encodeUcxxAmHeader(),
    encodeUcxxAmHeader({ userHeader: new Uint8Array(40).fill(3) }),
    encodeUcxxAmHeader({ receiverCallbackInfo: { owner: 'app', id: 5 }, memoryType: 1, memoryTypePolicy: 'errorOnUnsupported' }),
    encodeUcxxAmHeader({ receiverCallbackInfo: { owner: 'x'.repeat(63), id: 1n << 63n }, userHeader: new Uint8Array([1, 2, 3]) }),
  ];
  let decoded = 0;
  for (let n = 0; n < 20_000; n++) {
    let bytes: Uint8Array;
    if (n % 2 === 0) {
      bytes = new Uint8Array(next() % 200);
      const density = next() % 4;
      for (let i = 0; i < bytes.length; i++) if (next() % 4 < density) bytes[i] = next() & 0xff;
      if (bytes.length > 4 && next() % 2 === 0) bytes[4] = next() % 2; // reach past the flag
    } else {
      bytes = new Uint8Array(valid[next() % valid.length] as Uint8Array);
      const edits = 1 + (next() % 3);
      for (let e = 0; e < edits; e++) {
        const at = next() % bytes.length;
        bytes[at] = next() % 2 === 0 ? next() & 0xff : (bytes[at] as number) ^ (1 << (next() % 8));
      }
      if (next() % 8 === 0) bytes = bytes.subarray(0, next() % (bytes.length + 1));
      else if (next() % 8 === 0) bytes = new Uint8Array([...bytes, ...new Uint8Array(next() % 9)]);
    }
    let header;
    try {
      header = decodeUcxxAmHeader(bytes);
    } catch (err) {
      isFormatError('am')(err);
      continue;
    }
    decoded++;
    const legacy = bytes.byteLength === (header.receiverCallbackInfo === null ? 5 : 77);
    if (!legacy) assert.equal(hex(encodeUcxxAmHeader(header)), hex(bytes), `case ${n}: what decodes re-encodes identically`);
  }
  assert.ok(decoded > 1000, `only ${decoded} inputs decoded`);
});
