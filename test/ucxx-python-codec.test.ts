/**
 * The pure part of the ucxx Python layer (src/ucxx-python): Python's repr, hash64bits, int hash(), the
 * peer-information message and the tagMulti header, against vectors that python3 computed the way ucxx
 * Python computes them (test/vectors/ucxx-python-vectors.py writes test/vectors/ucxx-python.json).
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HandshakeError, MessageFormatError } from '#ucxx-ts/ucxx-python/errors.js';
import {
  PEER_INFO_BYTES, decodePeerInfo, encodePeerInfo, hash64bits, makeMsgTag, messageTag, pyHashInt, pyRepr,
} from '#ucxx-ts/ucxx-python/peer-info.js';
import { HEADER_BYTES, decodeHeader, encodeHeaders } from '#ucxx-ts/ucxx-python/tag-multi-header.js';

interface Vectors {
  int: [string, string, string][];
  peer: [string, string][];
  msgtag: [string, string, string, string][];
  allbytes: string;
  strs: [string, string][];
  pyhash: [string, string][];
  usertag: [string, string, string][];
  header: [boolean, number[], string][];
}

const VECTORS = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'test', 'vectors', 'ucxx-python.json');
const v = JSON.parse(readFileSync(VECTORS, 'utf8')) as Vectors;
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const fromHex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'hex'));

test('pyRepr and hash64bits of ints match Python (tuples of one, big and negative values)', () => {
  for (const [value, repr, hash] of v.int) {
    assert.equal(pyRepr([BigInt(value)]), repr);
    assert.equal(hash64bits(BigInt(value)), BigInt(hash), `hash64bits(${value})`);
  }
  assert.equal(hash64bits(5), hash64bits(5n), 'a number is the same Python int as a bigint');
  assert.throws(() => pyRepr(1.5), RangeError);
});

test('pyRepr of bytes and str matches Python: quote choice, escapes, every byte value', () => {
  const all = new Uint8Array(256).map((_, i) => i);
  assert.equal(pyRepr(all), v.allbytes);
  for (const [s, repr] of v.strs) assert.equal(pyRepr([s]), repr);
  assert.equal(pyRepr([]), '()');
  assert.throws(() => pyRepr('é'), RangeError);
});

test("the endpoint tag: hash64bits('msg_tag', seed, handle) as ucxx Python makes it", () => {
  for (const [seed, handle, repr, tag] of v.msgtag) {
    assert.equal(pyRepr(['msg_tag', fromHex(seed), BigInt(handle)]), repr);
    assert.equal(makeMsgTag(fromHex(seed), BigInt(handle)), BigInt(tag));
  }
});

test('the peer information: struct.pack("QQ", tag, hash64bits(tag)), decoded and checked', () => {
  for (const [tag, bytes] of v.peer) {
    const encoded = encodePeerInfo(BigInt(tag));
    assert.equal(encoded.byteLength, PEER_INFO_BYTES);
    assert.equal(hex(encoded), bytes);
    assert.equal(decodePeerInfo(fromHex(bytes)).msgTag, BigInt(tag));
  }
  assert.throws(() => encodePeerInfo(-1n), RangeError);
  assert.throws(() => encodePeerInfo(1n << 64n), RangeError);
});

test('a bad checksum or a wrong length is a HandshakeError with a stable code', () => {
  const good = fromHex((v.peer[2] as [string, string])[1]);
  for (let bit = 0; bit < 128; bit += 7) {
    const bad = good.slice();
    bad[bit >> 3] = (bad[bit >> 3] as number) ^ (1 << (bit & 7));
    assert.throws(() => decodePeerInfo(bad), (err: unknown) => {
      assert.ok(err instanceof HandshakeError);
      assert.equal(err.code, 'UCXX_ERR_HANDSHAKE');
      assert.equal(err.reason, 'checksum');
      return true;
    }, `bit ${bit} flipped`);
  }
  for (const length of [0, 8, 15, 17, 32]) {
    assert.throws(() => decodePeerInfo(new Uint8Array(length)), (err: unknown) =>
      err instanceof HandshakeError && err.reason === 'truncated' && err.received === length);
  }
});

test("Python's hash() of ints and the tag of a user-tagged message", () => {
  for (const [value, hash] of v.pyhash) assert.equal(pyHashInt(BigInt(value)), BigInt(hash), `hash(${value})`);
  for (const [base, tag, expected] of v.usertag) {
    assert.equal(messageTag(BigInt(base), BigInt(tag)), BigInt(expected), `tag ${tag}`);
  }
  assert.equal(messageTag(7n), 7n, 'no user tag: the endpoint tag');
  assert.equal(messageTag(7n, 99n, true), 99n, 'forceTag: the tag itself');
  assert.throws(() => messageTag(7n, -1n, true), RangeError);
  assert.throws(() => messageTag(7n, 0.5), RangeError);
});

test('the tagMulti header: ucxx::Header::serialize() byte for byte, 100 frames per header', () => {
  assert.equal(HEADER_BYTES, 1209);
  const [next0, sizes0, bytes0] = v.header[0] as [boolean, number[], string];
  assert.equal(next0, false);
  const one = encodeHeaders(sizes0);
  assert.equal(one.length, 1);
  assert.equal(hex(one[0] as Uint8Array), bytes0);
  assert.deepEqual(decodeHeader(fromHex(bytes0)), { next: false, sizes: sizes0.map(BigInt), cuda: sizes0.map(() => false) });

  const [, sizes1, bytes1] = v.header[1] as [boolean, number[], string];
  const many = encodeHeaders([...sizes1, 7, 8]);
  assert.equal(many.length, 2);
  assert.equal(hex(many[0] as Uint8Array), bytes1, 'a full header says another follows');
  const last = decodeHeader(many[1] as Uint8Array);
  assert.deepEqual(last, { next: false, sizes: [7n, 8n], cuda: [false, false] });
  assert.deepEqual(encodeHeaders([]), []);
  assert.equal(encodeHeaders(new Array<number>(100).fill(1)).length, 1, 'exactly 100 frames: one header, next = 0');
});

test('a malformed tagMulti header is a MessageFormatError', () => {
  const good = encodeHeaders([1, 2])[0] as Uint8Array;
  const check = (bytes: Uint8Array, what: string): void => {
    assert.throws(() => decodeHeader(bytes), (err: unknown) =>
      err instanceof MessageFormatError && err.code === 'UCXX_ERR_MESSAGE_FORMAT', what);
  };
  check(good.subarray(0, 1208), 'short');
  check(new Uint8Array(1210), 'long');
  const next = good.slice();
  next[0] = 2;
  check(next, 'next = 2');
  const nframes = good.slice();
  new DataView(nframes.buffer).setBigUint64(1, 101n, true);
  check(nframes, 'nframes = 101');
  new DataView(nframes.buffer).setBigUint64(1, 1n << 63n, true);
  check(nframes, 'nframes = 2^63');
});
