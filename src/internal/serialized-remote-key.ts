/**
 * The ucxx serialized remote-key format (wire-compatible with ucxx C++ `ucxx::RemoteKey::serialize()` /
 * `deserialize()`), plus an optional ucxx-ts trailer carrying the region's access rights.
 *
 * Layout, all integers u64 little-endian (ucxx writes native-endian `size_t`/`uint64_t`; every target it
 * supports is little-endian):
 *
 *     [0, 8)          checksum = std::hash<std::string> of bytes [8, end)   (see std-hash.ts)
 *     [8, 16)         N = length of the packed rkey
 *     [16, 16+N)      packed rkey, as ucp_rkey_pack returned it
 *     [16+N, 24+N)    base address of the region
 *     [24+N, 32+N)    size of the region
 *     [32+N, end)     ucxx-ts only, optional: the access trailer below
 *
 * What ucxx C++ does (rapidsai/ucxx cpp/src/remote_key.cpp at 458950913fd7, 2026-08-20):
 * - serialize() (lines 110-133) writes N, the packed key, base and size into a stringstream, takes
 *   `std::hash<std::string>` of that whole string and prepends it: the checksum covers [8, end).
 * - deserialize() (lines 135-169) hashes `std::string(begin + 8, end)` -- every byte after the checksum,
 *   *including any trailing bytes* -- and throws "Checksum error of serialized remote key" on mismatch
 *   (lines 137-149). It then reads N, checks (length - 8) >= 24 and N <= (length - 8) - 24, i.e.
 *   N <= length - 32 (lines 154-160, added by ucxx PR #639 in 2026-04; older ucxx did not check), and
 *   reads the packed key, base and size (lines 165-168). Bytes after 32+N are never looked at: they are
 *   ignored, but they are inside the hash. It does not guard an input shorter than 8 bytes.
 *
 * Consequence for the trailer: ucxx C++ accepts a key with our trailer exactly when the checksum is
 * computed over [8, end) *including the trailer*, which is what encodeSerializedRemoteKey does; ucxx then
 * ignores the trailer (docs/performance.md records how that was checked against ucxx's own code);
 * without `access`, the encoding here is byte-identical to what ucxx's serialize() produces. Keys from
 * ucxx C++ have no trailer and decode here with access 'read-write' (ucxx
 * has no notion of access rights; its regions are mapped read-write).
 *
 * ucxx-ts access trailer (9 bytes, immediately after the size field):
 *
 *     [0, 6)   ASCII "UCXXTS"   magic
 *     [6]      0x01             trailer version
 *     [7]      0x00             reserved, must be 0
 *     [8]      access flags     bit 0 = remote may read (get), bit 1 = remote may write (put, atomics);
 *                               exactly one of 1 ('read'), 2 ('write'), 3 ('read-write')
 *
 * Decoding is strict: after 32+N the input must end, or hold exactly one well-formed version-1 trailer.
 * Trailing bytes that do not start with the magic are rejected too (ucxx would ignore them): a key that
 * carries data we do not understand is not honoured with the most permissive access, and bounding the
 * length before hashing keeps a huge input from costing a long hash. The checksum is not a MAC: it
 * catches corruption, not a peer that forges keys.
 */

import { RemoteKeyFormatError } from '../errors/remote-key-format.js';
import { stdHashBytes } from './std-hash.js';
import { parsePackedRkey, type ParsedPackedRkey, type ParsePackedRkeyOptions } from './packed-rkey.js';
import { InvalidArgumentError, ArgumentOutOfRangeError } from '../errors/misuse.js';
import { show } from './bytes.js';

/** The RMA a remote key allows: gets, puts, or both. */
export type RemoteKeyAccess = 'read' | 'write' | 'read-write';

/** checksum + N + base + size. */
export const SERIALIZED_REMOTE_KEY_FIXED_SIZE = 32;
/**
 * Largest packed rkey accepted. UCX 1.13's own maximum is 8 + 1 + 64 * (1 + 255) + 1 + 64 * 3 = 16,586
 * bytes; real keys are a few tens of bytes.
 */
export const MAX_PACKED_RKEY_SIZE = 64 * 1024;

/** "UCXXTS" */
const TRAILER_MAGIC = Uint8Array.of(0x55, 0x43, 0x58, 0x58, 0x54, 0x53);
const TRAILER_VERSION = 1;
export const ACCESS_TRAILER_SIZE = 9;

const ACCESS_READ = 1;
const ACCESS_WRITE = 2;

const TWO_POW_64 = 1n << 64n;

function accessToFlags(access: RemoteKeyAccess): number {
  switch (access) {
    case 'read':
      return ACCESS_READ;
    case 'write':
      return ACCESS_WRITE;
    case 'read-write':
      return ACCESS_READ | ACCESS_WRITE;
    default:
      throw new InvalidArgumentError(`access must be 'read', 'write' or 'read-write', not ${show(access)}`);
  }
}

function flagsToAccess(flags: number): RemoteKeyAccess | undefined {
  switch (flags) {
    case ACCESS_READ:
      return 'read';
    case ACCESS_WRITE:
      return 'write';
    case ACCESS_READ | ACCESS_WRITE:
      return 'read-write';
    default:
      return undefined;
  }
}

function hex(value: bigint): string {
  return `0x${value.toString(16).padStart(16, '0')}`;
}

function fail(message: string): never {
  throw new RemoteKeyFormatError(`serialized remote key: ${message}`);
}

export interface SerializedRemoteKeyFields {
  readonly packedRkey: Uint8Array;
  readonly baseAddress: bigint;
  readonly size: bigint;
  /** Written as an ucxx-ts trailer when given; omitted: plain ucxx format (decodes as 'read-write'). */
  readonly access?: RemoteKeyAccess;
}

export interface DecodedSerializedRemoteKey {
  /** A copy of the packed rkey bytes. */
  readonly packedRkey: Uint8Array;
  readonly baseAddress: bigint;
  readonly size: bigint;
  /** From the ucxx-ts trailer; 'read-write' when the key has none (keys from ucxx C++). */
  readonly access: RemoteKeyAccess;
  /** Whether the key carried an ucxx-ts access trailer. */
  readonly hasAccessTrailer: boolean;
  /** The structure of the packed rkey, as parsePackedRkey found it. */
  readonly packedRkeyInfo: ParsedPackedRkey;
}

function checkRegion(baseAddress: bigint, size: bigint, what: (m: string) => never): void {
  if (size === 0n) what('the region size is 0');
  if (baseAddress + size > TWO_POW_64) {
    what(`the region at ${hex(baseAddress)} of size ${hex(size)} runs past the end of the 64-bit address space`);
  }
}

/**
 * Serialize a remote key in ucxx's format (plus the ucxx-ts access trailer when `access` is given).
 * The packed rkey must pass parsePackedRkey; the region must be non-empty and fit in 64 bits.
 */
export function encodeSerializedRemoteKey(
  fields: SerializedRemoteKeyFields,
  packedRkeyOptions?: ParsePackedRkeyOptions,
): Uint8Array {
  const { packedRkey, baseAddress, size, access } = fields;
  if (!(packedRkey instanceof Uint8Array)) throw new InvalidArgumentError('packedRkey must be a Uint8Array');
  if (typeof baseAddress !== 'bigint') throw new InvalidArgumentError('baseAddress must be a bigint');
  if (typeof size !== 'bigint') throw new InvalidArgumentError('size must be a bigint');
  if (baseAddress < 0n || baseAddress >= TWO_POW_64) {
    throw new ArgumentOutOfRangeError(`baseAddress ${baseAddress} is not an unsigned 64-bit value`);
  }
  if (size < 0n || size >= TWO_POW_64) throw new ArgumentOutOfRangeError(`size ${size} is not an unsigned 64-bit value`);
  checkRegion(baseAddress, size, (m) => {
    throw new ArgumentOutOfRangeError(m);
  });
  const flags = access === undefined ? undefined : accessToFlags(access);
  const n = packedRkey.length;
  if (n === 0 || n > MAX_PACKED_RKEY_SIZE) {
    throw new ArgumentOutOfRangeError(`packedRkey is ${n} bytes; it must be 1 to ${MAX_PACKED_RKEY_SIZE} bytes`);
  }
  parsePackedRkey(packedRkey, packedRkeyOptions);

  const total = SERIALIZED_REMOTE_KEY_FIXED_SIZE + n + (flags === undefined ? 0 : ACCESS_TRAILER_SIZE);
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  view.setBigUint64(8, BigInt(n), true);
  out.set(packedRkey, 16);
  view.setBigUint64(16 + n, baseAddress, true);
  view.setBigUint64(24 + n, size, true);
  if (flags !== undefined) {
    const t = SERIALIZED_REMOTE_KEY_FIXED_SIZE + n;
    out.set(TRAILER_MAGIC, t);
    out[t + 6] = TRAILER_VERSION;
    out[t + 7] = 0;
    out[t + 8] = flags;
  }
  // Checksum over [8, end), trailer included: exactly what ucxx's deserialize() verifies.
  view.setBigUint64(0, stdHashBytes(out.subarray(8)), true);
  return out;
}

function toBytes(input: unknown): Uint8Array {
  if (input instanceof Uint8Array) return input;
  if (ArrayBuffer.isView(input)) return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  if (input instanceof ArrayBuffer) return new Uint8Array(input);
  if (typeof SharedArrayBuffer !== 'undefined' && input instanceof SharedArrayBuffer) return new Uint8Array(input);
  throw new InvalidArgumentError(
    `a serialized remote key must be a Uint8Array, Buffer, ArrayBuffer view or ArrayBuffer, not ${
      input === null ? 'null' : typeof input
    }`,
  );
}

/**
 * Decode and validate a serialized remote key. Throws TypeError for an input that is not bytes, and
 * RemoteKeyFormatError for anything malformed (the packed rkey is validated with parsePackedRkey).
 */
export function decodeSerializedRemoteKey(
  input: Uint8Array | ArrayBufferView | ArrayBuffer,
  packedRkeyOptions?: ParsePackedRkeyOptions,
): DecodedSerializedRemoteKey {
  const view0 = toBytes(input);
  const length = view0.length;
  if (length < SERIALIZED_REMOTE_KEY_FIXED_SIZE) {
    fail(`${length} bytes is shorter than its ${SERIALIZED_REMOTE_KEY_FIXED_SIZE} bytes of fixed fields`);
  }
  // One snapshot, so that what is checked is what is returned (the input may be shared memory).
  const limit = SERIALIZED_REMOTE_KEY_FIXED_SIZE + MAX_PACKED_RKEY_SIZE + ACCESS_TRAILER_SIZE;
  if (length > limit) {
    fail(`${length} bytes is longer than the largest valid key (${limit} bytes)`);
  }
  // A fresh, unshared ArrayBuffer: not view0.slice(), which for a Node Buffer is a view into the
  // shared 8 KiB pool (Buffer#slice does not copy, and small Buffers share one ArrayBuffer).
  const bytes = new Uint8Array(length);
  bytes.set(view0);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);

  const n64 = view.getBigUint64(8, true);
  if (n64 === 0n) fail('the packed rkey length is 0');
  if (n64 > BigInt(length - SERIALIZED_REMOTE_KEY_FIXED_SIZE)) {
    fail(
      `the packed rkey length ${n64} exceeds the ${length - SERIALIZED_REMOTE_KEY_FIXED_SIZE} bytes ` +
        `that the ${length}-byte input has beyond its fixed fields`,
    );
  }
  const n = Number(n64);
  if (n > MAX_PACKED_RKEY_SIZE) fail(`the packed rkey length ${n} exceeds the maximum of ${MAX_PACKED_RKEY_SIZE}`);

  const end = SERIALIZED_REMOTE_KEY_FIXED_SIZE + n;
  const extra = length - end;
  let hasTrailer = false;
  if (extra > 0) {
    let magic = extra >= TRAILER_MAGIC.length;
    for (let i = 0; magic && i < TRAILER_MAGIC.length; i++) magic = bytes[end + i] === TRAILER_MAGIC[i];
    if (!magic) fail(`${extra} unrecognised bytes follow the ucxx fields at offset ${end}`);
    if (extra !== ACCESS_TRAILER_SIZE) {
      fail(`the ucxx-ts trailer at offset ${end} is ${extra} bytes, not ${ACCESS_TRAILER_SIZE}`);
    }
    hasTrailer = true;
  }

  const stored = view.getBigUint64(0, true);
  const computed = stdHashBytes(bytes.subarray(8));
  if (stored !== computed) {
    fail(`checksum mismatch: the key says ${hex(stored)}, its bytes [8, ${length}) hash to ${hex(computed)}`);
  }

  let access: RemoteKeyAccess = 'read-write';
  if (hasTrailer) {
    const version = bytes[end + 6] as number;
    if (version !== TRAILER_VERSION) {
      fail(`the ucxx-ts trailer has version ${version}; this ucxx-ts reads version ${TRAILER_VERSION}`);
    }
    const reserved = bytes[end + 7] as number;
    if (reserved !== 0) fail(`the reserved byte of the ucxx-ts trailer is ${reserved}, not 0`);
    const flags = bytes[end + 8] as number;
    const decoded = flagsToAccess(flags);
    if (decoded === undefined) {
      fail(`the access flags of the ucxx-ts trailer are 0x${flags.toString(16)}; valid: 0x1, 0x2, 0x3`);
    }
    access = decoded;
  }

  const baseAddress = view.getBigUint64(16 + n, true);
  const size = view.getBigUint64(24 + n, true);
  checkRegion(baseAddress, size, fail);

  const packedRkey = bytes.slice(16, 16 + n);
  let packedRkeyInfo: ParsedPackedRkey;
  try {
    packedRkeyInfo = parsePackedRkey(packedRkey, packedRkeyOptions);
  } catch (error) {
    if (error instanceof RemoteKeyFormatError) {
      throw new RemoteKeyFormatError(`serialized remote key: ${error.message}`, { cause: error });
    }
    throw error;
  }

  return { packedRkey, baseAddress, size, access, hasAccessTrailer: hasTrailer, packedRkeyInfo };
}
