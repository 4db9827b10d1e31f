/**
 * ucxx Python's endpoint handshake message and the hash behind its tags, with no FFI: pure functions.
 *
 * ucxx Python (python/ucxx/ucxx/_lib_async/utils.py) defines
 *
 *     hash64bits(*args) = int(sha1(repr(args).encode('utf-8')).hexdigest()[:16], 16)
 *
 * that is, the first 8 bytes of the SHA-1 of the Python `repr` of the argument tuple, read big-endian.
 * `pyRepr` reproduces that repr for the value types ucxx hashes: int, str (ASCII) and bytes.
 *
 * The peer information (exchange_peer_info.py) is `struct.pack("QQ", msg_tag, hash64bits(msg_tag))`:
 * 16 bytes, two native-order (little-endian on every platform ucxx runs on) unsigned 64-bit integers.
 */
import { createHash } from 'node:crypto';
import { HandshakeError } from './errors.js';
import { InvalidArgumentError, ArgumentOutOfRangeError } from '../errors/misuse.js';
import { show } from '../internal/bytes.js';

/** A Python value as `hash64bits` sees it: int (number or bigint), str, or bytes. */
export type PyValue = bigint | number | string | Uint8Array;

/** The size of the peer-information message. */
export const PEER_INFO_BYTES = 16;

const U64_MAX = (1n << 64n) - 1n;

function hex2(code: number): string {
  return code.toString(16).padStart(2, '0');
}

/** CPython's choice of quote: ' unless the text contains ' and no ". */
function quoteFor(codes: ArrayLike<number>): number {
  let single = false;
  let double = false;
  for (let i = 0; i < codes.length; i++) {
    if (codes[i] === 0x27) single = true;
    else if (codes[i] === 0x22) double = true;
  }
  return single && !double ? 0x22 : 0x27;
}

/** The body of a str or bytes repr for code points below 0x80 (the rules CPython applies to both). */
function reprAscii(codes: ArrayLike<number>, quote: number): string {
  let out = String.fromCharCode(quote);
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i] as number;
    if (c === quote || c === 0x5c) out += '\\' + String.fromCharCode(c);
    else if (c === 0x09) out += '\\t';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c < 0x20 || c >= 0x7f) out += '\\x' + hex2(c);
    else out += String.fromCharCode(c);
  }
  return out + String.fromCharCode(quote);
}

/**
 * Python's `repr()` of an int, an ASCII str, bytes, or a tuple of those (an array stands for a tuple).
 * Non-ASCII strings are refused (CPython's rules for them depend on Unicode tables).
 */
export function pyRepr(value: PyValue | readonly PyValue[]): string {
  if (Array.isArray(value)) {
    const items = (value as readonly PyValue[]).map((v) => pyRepr(v));
    return items.length === 1 ? `(${items[0]},)` : `(${items.join(', ')})`;
  }
  if (typeof value === 'bigint') return value.toString(10);
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new ArgumentOutOfRangeError(`only integers are Python ints, got ${show(value)}`);
    return value.toString(10);
  }
  if (typeof value === 'string') {
    const codes: number[] = [];
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i);
      if (c >= 0x80) throw new ArgumentOutOfRangeError('pyRepr supports ASCII strings only');
      codes.push(c);
    }
    return reprAscii(codes, quoteFor(codes));
  }
  if (value instanceof Uint8Array) return 'b' + reprAscii(value, quoteFor(value));
  throw new InvalidArgumentError(`no Python repr for ${typeof value}`);
}

/**
 * ucxx Python's `hash64bits(*args)`: the first 8 bytes of sha1(repr(args)), big-endian.
 *
 * @example
 * ```ts
 * hash64bits(5) === hash64bits(5n);           // true: both are the Python int 5
 * const checksum = hash64bits(ep.msgTagRecv); // what the handshake sends beside this side's tag
 * ```
 */
export function hash64bits(...args: PyValue[]): bigint {
  const digest = createHash('sha1').update(pyRepr(args), 'utf8').digest();
  return digest.readBigUInt64BE(0);
}

const MERSENNE_61 = (1n << 61n) - 1n;

/**
 * Python's `hash()` of an int (CPython, 64-bit): the value modulo 2^61 - 1 with the sign kept, and
 * -1 becomes -2. ucxx Python combines a user tag with the endpoint's tag as
 * `hash64bits(endpoint_tag, hash(tag))`; only int tags hash the same in every process (str hashes are
 * randomized per process unless PYTHONHASHSEED is fixed).
 */
export function pyHashInt(value: bigint | number): bigint {
  const n = typeof value === 'bigint' ? value : BigInt(value);
  const h = n >= 0n ? n % MERSENNE_61 : -((-n) % MERSENNE_61);
  return h === -1n ? -2n : h;
}

/**
 * The tag a message goes out (or is received) with, as ucxx Python's Endpoint computes it: the
 * endpoint's tag when no user tag is given, the user tag itself with `forceTag`, otherwise
 * `hash64bits(endpointTag, hash(tag))`.
 */
export function messageTag(endpointTag: bigint, tag?: bigint | number, forceTag = false): bigint {
  if (tag === undefined) return endpointTag;
  if (typeof tag === 'number' && !Number.isSafeInteger(tag)) throw new ArgumentOutOfRangeError(`tag must be an integer, got ${show(tag)}`);
  if (typeof tag !== 'number' && typeof tag !== 'bigint') throw new InvalidArgumentError('tag must be a number or a bigint');
  if (forceTag) {
    const t = BigInt(tag);
    if (t < 0n || t > U64_MAX) throw new ArgumentOutOfRangeError(`a forced tag must be in [0, 2^64), got ${show(t)}`);
    return t;
  }
  return hash64bits(endpointTag, pyHashInt(tag));
}

/**
 * A fresh endpoint tag as ucxx Python makes one: `hash64bits("msg_tag", seed, handle)` with 16 random
 * bytes as `seed` and the `ucp_ep_h` address as `handle`.
 */
export function makeMsgTag(seed: Uint8Array, handle: bigint): bigint {
  return hash64bits('msg_tag', seed, handle);
}

/** The 16-byte peer information for `msgTag`: the tag and its checksum, little-endian u64s. */
export function encodePeerInfo(msgTag: bigint): Uint8Array {
  if (typeof msgTag !== 'bigint' || msgTag < 0n || msgTag > U64_MAX) {
    throw new ArgumentOutOfRangeError(`msgTag must be a bigint in [0, 2^64), got ${show(msgTag)}`);
  }
  const out = new Uint8Array(PEER_INFO_BYTES);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, msgTag, true);
  view.setBigUint64(8, hash64bits(msgTag), true);
  return out;
}

/**
 * The peer's tag from its peer information. Throws HandshakeError: 'truncated' unless exactly 16 bytes,
 * 'checksum' when the second word is not hash64bits of the first (ucxx Python raises there too).
 */
export function decodePeerInfo(bytes: Uint8Array): { msgTag: bigint; checksum: bigint } {
  if (!(bytes instanceof Uint8Array)) throw new InvalidArgumentError('peer information must be a Uint8Array');
  if (bytes.byteLength !== PEER_INFO_BYTES) {
    throw new HandshakeError('truncated',
      `ucxx peer information is ${bytes.byteLength} bytes, expected ${PEER_INFO_BYTES}`, bytes.byteLength);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const msgTag = view.getBigUint64(0, true);
  const checksum = view.getBigUint64(8, true);
  const expected = hash64bits(msgTag);
  if (checksum !== expected) {
    throw new HandshakeError('checksum',
      `ucxx peer information checksum invalid: 0x${expected.toString(16)} expected for tag ` +
      `0x${msgTag.toString(16)}, got 0x${checksum.toString(16)}`, PEER_INFO_BYTES);
  }
  return { msgTag, checksum };
}
