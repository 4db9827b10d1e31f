/**
 * ucxx's active-message header (`AmHeader` in cpp/src/request_am.cpp): what ucxx passes as the UCP AM
 * header of every message it sends on AM id 0. Fields written back to back, no padding, native byte
 * order (little-endian on every platform ucxx runs on):
 *
 * | width | field                                                                       |
 * |-------|-----------------------------------------------------------------------------|
 * | 4     | `memoryType`: the sender's `ucs_memory_type_t` (0 = host)                   |
 * | 1     | `hasReceiverCallback`: 0 or 1                                               |
 * | 64    | only if 1: the receiver-callback owner, a NUL-padded name of <= 63 bytes    |
 * | 8     | only if 1: the receiver-callback id (u64)                                   |
 * | 1     | `memoryTypePolicy`: 0 = fall back to host, 1 = error on unsupported         |
 * | 8     | `userHeaderSize` (u64)                                                      |
 * | n     | the user header                                                             |
 *
 * The last three fields came with ucxx's user-header support; before it the record ended after the
 * receiver-callback fields, and ucxx still reads such a header (policy: fall back to host, no user
 * header). This decoder does the same. Pure code, no FFI.
 */
import { UcxxHeaderFormatError } from '../errors/ucxx-header.js';
import { InvalidArgumentError, ArgumentOutOfRangeError } from '../errors/misuse.js';
import { show, optionsObject } from '../internal/bytes.js';

/** What the receiver does with a rendezvous message in a memory type it has no allocator for. */
export type AmMemoryTypePolicy = 'fallbackToHost' | 'errorOnUnsupported';

/** Names a receiver callback registered with `worker.registerAmReceiverCallback`. */
export interface AmReceiverCallbackInfo {
  /** The owner name: at most 63 bytes of UTF-8, no NUL. ucxx reserves 'ucxx'. */
  readonly owner: string;
  /** The callback id (u64). */
  readonly id: bigint | number;
}

/** A decoded ucxx AM header. */
export interface UcxxAmHeader {
  /** The sender's memory type (`ucs_memory_type_t`: 0 is host; other numbers vary between UCX releases). */
  readonly memoryType: number;
  /** What the receiver does with memory of a type it cannot allocate. */
  readonly memoryTypePolicy: AmMemoryTypePolicy;
  /** The receiver callback the sender named, or null. */
  readonly receiverCallbackInfo: {
    /** The owner name. */
    readonly owner: string;
    /** The callback id. */
    readonly id: bigint;
  } | null;
  /** The user header (a copy; empty when none). */
  readonly userHeader: Uint8Array;
}

/** ucxx's `AmReceiverCallbackOwnerStorageSize`: the owner always takes 64 bytes on the wire. */
export const AM_OWNER_STORAGE_SIZE = 64;
/** The longest owner name, in bytes. */
export const AM_OWNER_MAX_LENGTH = AM_OWNER_STORAGE_SIZE - 1;
/**
 * The largest memory type accepted from a peer. UCX keeps sets of memory types as 64-bit masks, so
 * every `ucs_memory_type_t` of every release is below 64; a larger value is a corrupt header.
 */
export const AM_MEMORY_TYPE_MAX = 63;
const U64_MAX = (1n << 64n) - 1n;
const POLICY_CODES: Record<AmMemoryTypePolicy, number> = { fallbackToHost: 0, errorOnUnsupported: 1 };
const POLICIES: readonly AmMemoryTypePolicy[] = ['fallbackToHost', 'errorOnUnsupported'];
const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

function fail(message: string): never {
  throw new UcxxHeaderFormatError('am', message);
}

/** The 64 wire bytes of an owner name (RangeError/TypeError for a name ucxx cannot carry). */
export function encodeAmOwner(owner: string): Uint8Array {
  if (typeof owner !== 'string') throw new InvalidArgumentError(`the receiver-callback owner must be a string, got ${typeof owner}`);
  const bytes = utf8.encode(owner);
  if (bytes.byteLength > AM_OWNER_MAX_LENGTH) {
    throw new ArgumentOutOfRangeError(`the receiver-callback owner takes ${bytes.byteLength} bytes of UTF-8, at most ${AM_OWNER_MAX_LENGTH}`);
  }
  if (bytes.includes(0)) throw new ArgumentOutOfRangeError('the receiver-callback owner must not contain NUL');
  const out = new Uint8Array(AM_OWNER_STORAGE_SIZE);
  out.set(bytes);
  return out;
}

/** A receiver-callback id as a u64 bigint. */
export function toAmCallbackId(id: unknown): bigint {
  if (typeof id === 'number') {
    if (!Number.isSafeInteger(id) || id < 0) throw new ArgumentOutOfRangeError(`the receiver-callback id must be a non-negative integer, got ${show(id)}`);
    return BigInt(id);
  }
  if (typeof id === 'bigint') {
    if (id < 0n || id > U64_MAX) throw new ArgumentOutOfRangeError(`the receiver-callback id must fit in 64 bits, got ${show(id)}`);
    return id;
  }
  throw new InvalidArgumentError(`the receiver-callback id must be a number or a bigint, got ${typeof id}`);
}

/** What `encodeUcxxAmHeader()` writes besides the memory type. */
export interface EncodeAmHeaderOptions {
  /** Default 0 (host). */
  memoryType?: number;
  /** Default 'fallbackToHost'. */
  memoryTypePolicy?: AmMemoryTypePolicy;
  /** The receiver callback the message names (ucxx's `AmReceiverCallbackInfo`), or none. */
  receiverCallbackInfo?: AmReceiverCallbackInfo | null;
  /** Bytes the receiver gets as the message's user header. */
  userHeader?: Uint8Array | null;
}

/**
 * The header bytes ucxx's `AmHeader::serialize` produces for these fields (the current format).
 *
 * @example
 * ```ts
 * const header = encodeUcxxAmHeader({ receiverCallbackInfo: { owner: 'app', id: 1n }, userHeader: Buffer.from('meta') });
 * // what ep.amSend(data, { receiverCallbackInfo, userHeader }) puts on the wire:
 * await ep.amSend(UCXX_AM_ID, header, data, { reply: true });
 * ```
 */
export function encodeUcxxAmHeader(options: EncodeAmHeaderOptions = {}): Uint8Array {
  options = optionsObject(options, 'encodeUcxxAmHeader options');
  const memoryType = options.memoryType ?? 0;
  if (!Number.isInteger(memoryType) || memoryType < 0 || memoryType > AM_MEMORY_TYPE_MAX) {
    throw new ArgumentOutOfRangeError(`memoryType must be a ucs_memory_type_t in [0, ${AM_MEMORY_TYPE_MAX}], got ${show(memoryType)}`);
  }
  const policy = POLICY_CODES[options.memoryTypePolicy ?? 'fallbackToHost'];
  if (policy === undefined) {
    throw new InvalidArgumentError(`memoryTypePolicy must be 'fallbackToHost' or 'errorOnUnsupported', got ${show(options.memoryTypePolicy)}`);
  }
  const info = options.receiverCallbackInfo ?? null;
  const owner = info === null ? null : encodeAmOwner(info.owner);
  const id = info === null ? 0n : toAmCallbackId(info.id);
  const user = options.userHeader ?? new Uint8Array(0);
  const total = 4 + 1 + (owner === null ? 0 : AM_OWNER_STORAGE_SIZE + 8) + 1 + 8 + user.byteLength;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let at = 0;
  view.setUint32(at, memoryType, true);
  at += 4;
  out[at++] = owner === null ? 0 : 1;
  if (owner !== null) {
    out.set(owner, at);
    at += AM_OWNER_STORAGE_SIZE;
    view.setBigUint64(at, id, true);
    at += 8;
  }
  out[at++] = policy;
  view.setBigUint64(at, BigInt(user.byteLength), true);
  at += 8;
  out.set(user, at);
  return out;
}

/**
 * Decodes and validates a ucxx AM header: `hasReceiverCallback` and the policy 0 or 1, a memory type
 * below 64, an owner that is NUL-terminated, zero-padded UTF-8, and either nothing after the
 * receiver-callback fields (the older format) or the policy, the user-header size and exactly that many
 * bytes. Anything else (short, trailing bytes, sizes that do not add up) is a UcxxHeaderFormatError.
 *
 * @example
 * ```ts
 * worker.setAmHandler(UCXX_AM_ID, (msg) => {
 *   const { receiverCallbackInfo, userHeader } = decodeUcxxAmHeader(msg.header); // UcxxHeaderFormatError if malformed
 *   console.log(receiverCallbackInfo?.owner, userHeader.byteLength);
 * });
 * ```
 */
export function decodeUcxxAmHeader(bytes: Uint8Array): UcxxAmHeader {
  if (!(bytes instanceof Uint8Array)) throw new InvalidArgumentError('a ucxx AM header must be a Uint8Array');
  const length = bytes.byteLength;
  if (length < 5) fail(`${length} bytes, at least 5 expected`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, length);
  const memoryType = view.getUint32(0, true);
  if (memoryType > AM_MEMORY_TYPE_MAX) fail(`memory type ${memoryType} (no UCX release has one above ${AM_MEMORY_TYPE_MAX})`);
  const has = view.getUint8(4);
  if (has > 1) fail(`the receiver-callback flag is ${has}, not 0 or 1`);
  let at = 5;
  let receiverCallbackInfo: UcxxAmHeader['receiverCallbackInfo'] = null;
  if (has === 1) {
    if (length < at + AM_OWNER_STORAGE_SIZE + 8) {
      fail(`${length} bytes: too short for the receiver-callback owner and id (${at + AM_OWNER_STORAGE_SIZE + 8})`);
    }
    const ownerBytes = bytes.subarray(at, at + AM_OWNER_STORAGE_SIZE);
    const end = ownerBytes.indexOf(0);
    if (end < 0) fail(`the receiver-callback owner is not NUL-terminated within ${AM_OWNER_STORAGE_SIZE} bytes`);
    for (let i = end + 1; i < AM_OWNER_STORAGE_SIZE; i++) {
      if (ownerBytes[i] !== 0) fail(`the receiver-callback owner has byte 0x${(ownerBytes[i] ?? 0).toString(16)} after its NUL (offset ${i})`);
    }
    let owner: string;
    try {
      owner = strictUtf8.decode(ownerBytes.subarray(0, end));
    } catch {
      fail('the receiver-callback owner is not valid UTF-8');
    }
    at += AM_OWNER_STORAGE_SIZE;
    receiverCallbackInfo = { owner, id: view.getBigUint64(at, true) };
    at += 8;
  }
  const rest = length - at;
  if (rest === 0) {
    return { memoryType, memoryTypePolicy: 'fallbackToHost', receiverCallbackInfo, userHeader: new Uint8Array(0) };
  }
  if (rest < 9) fail(`${rest} bytes after the receiver-callback fields: neither none (older format) nor policy + user-header size (9+)`);
  const policyCode = view.getUint8(at);
  const memoryTypePolicy = POLICIES[policyCode];
  if (memoryTypePolicy === undefined) fail(`memory-type policy ${policyCode}, not 0 or 1`);
  const userHeaderSize = view.getBigUint64(at + 1, true);
  at += 9;
  if (userHeaderSize !== BigInt(length - at)) {
    fail(`the user header is announced as ${userHeaderSize} bytes, ${length - at} follow`);
  }
  return { memoryType, memoryTypePolicy, receiverCallbackInfo, userHeader: bytes.slice(at) };
}
