/** Normalising the memory arguments users pass (ArrayBuffer, SharedArrayBuffer, any view). */
import { ArgumentOutOfRangeError, InvalidArgumentError } from '../errors/misuse.js';

/** Bytes ucxx-ts reads or writes: any typed array or DataView, an ArrayBuffer or a SharedArrayBuffer. */
export type BufferSource = ArrayBufferView | ArrayBuffer | SharedArrayBuffer;

/** True for what ucxx-ts accepts as memory. */
export function isBufferSource(value: unknown): value is BufferSource {
  return ArrayBuffer.isView(value) || value instanceof ArrayBuffer ||
    (typeof SharedArrayBuffer !== 'undefined' && value instanceof SharedArrayBuffer);
}

/**
 * True for an ArrayBuffer that was transferred away (structuredClone/postMessage with `transfer`):
 * it reads as 0 bytes, and sending it as such would silently send nothing. Node 20 has no
 * `ArrayBuffer.prototype.detached`; a view over a detached buffer cannot be made.
 */
function isDetached(buffer: ArrayBufferLike): boolean {
  if (buffer.byteLength !== 0 || !(buffer instanceof ArrayBuffer)) return false;
  try {
    new Uint8Array(buffer);
    return false;
  } catch {
    return true;
  }
}

function detachedError(what: string): InvalidArgumentError {
  return new InvalidArgumentError(`${what} is a detached ArrayBuffer (or a view of one): it was transferred away`);
}

/** A Uint8Array over exactly the bytes of `memory` (no copy). InvalidArgumentError for anything else. */
export function asBytes(memory: unknown, what: string): Uint8Array {
  if (memory instanceof Uint8Array) {
    if (memory.byteLength === 0 && isDetached(memory.buffer)) throw detachedError(what);
    return memory;
  }
  if (ArrayBuffer.isView(memory)) {
    // A DataView over a detached buffer throws on byteLength itself.
    if (isDetached(memory.buffer)) throw detachedError(what);
    return new Uint8Array(memory.buffer, memory.byteOffset, memory.byteLength);
  }
  if (memory instanceof ArrayBuffer) {
    if (isDetached(memory)) throw detachedError(what);
    return new Uint8Array(memory);
  }
  if (typeof SharedArrayBuffer !== 'undefined' && memory instanceof SharedArrayBuffer) {
    return new Uint8Array(memory);
  }
  throw notMemory(memory, what);
}

/** The byte length of a BufferSource without creating a view (hot paths: a detached check only at 0 bytes). */
export function byteLengthOf(memory: unknown, what: string): number {
  if (ArrayBuffer.isView(memory)) {
    let length: number;
    try {
      length = memory.byteLength; // a DataView over a detached buffer throws here
    } catch {
      throw detachedError(what);
    }
    if (length === 0 && isDetached(memory.buffer)) throw detachedError(what);
    return length;
  }
  if (memory instanceof ArrayBuffer) {
    const length = memory.byteLength;
    if (length === 0 && isDetached(memory)) throw detachedError(what);
    return length;
  }
  if (typeof SharedArrayBuffer !== 'undefined' && memory instanceof SharedArrayBuffer) return memory.byteLength;
  throw notMemory(memory, what);
}

/**
 * `memory` as koffi takes it for a pointer: a SharedArrayBuffer becomes a Uint8Array over it (koffi
 * refuses the SharedArrayBuffer itself, and takes an ArrayBuffer or any view as is).
 */
export function ffiMemory<T>(memory: T): T | Uint8Array {
  return typeof SharedArrayBuffer !== 'undefined' && memory instanceof SharedArrayBuffer ? new Uint8Array(memory) : memory;
}

function notMemory(memory: unknown, what: string): InvalidArgumentError {
  return new InvalidArgumentError(
    `${what} must be an ArrayBuffer, SharedArrayBuffer, TypedArray, DataView or Buffer, got ${describe(memory)}`,
  );
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') {
    try {
      return (value as object).constructor?.name ?? 'object';
    } catch {
      return 'object';
    }
  }
  return typeof value;
}

const U64_MAX = (1n << 64n) - 1n;

/** A non-negative integer (number or bigint) as bigint; ArgumentOutOfRangeError/InvalidArgumentError otherwise. */
export function toU64(value: unknown, what: string): bigint {
  if (typeof value === 'bigint') {
    if (value < 0n || value > U64_MAX) throw new ArgumentOutOfRangeError(`${what} must be in [0, 2^64), got ${value}`);
    return value;
  }
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new ArgumentOutOfRangeError(`${what} must be a non-negative safe integer or a bigint, got ${value}`);
    }
    return BigInt(value);
  }
  throw new InvalidArgumentError(`${what} must be a number or a bigint, got ${describe(value)}`);
}

/** The tag mask that matches every bit: a receive of exactly one tag. */
export const FULL_MASK = (1n << 64n) - 1n;

/** A 64-bit tag or mask: a bigint in [0, 2^64) or a non-negative safe integer. */
export function toTag(value: unknown, what = 'tag'): bigint {
  return toU64(value, what);
}

/**
 * An options argument: undefined (-> `{}`) or an object (not null, not an array, not a function).
 * Reading properties of a string or a number would silently ignore every option.
 */
export function optionsObject<T extends object>(value: T | undefined, what: string): T {
  if (value === undefined) return {} as T;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidArgumentError(`${what} must be an object, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`);
  }
  return value;
}

/** A value for an error message; never throws (a Symbol, a null-prototype object, a detached view...). */
export function show(value: unknown): string {
  try {
    if (typeof value === 'string') return value.length > 64 ? `${JSON.stringify(value.slice(0, 64))}...` : JSON.stringify(value);
    if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean' || value === undefined) {
      return String(value);
    }
    if (typeof value === 'symbol') return value.toString();
    if (typeof value === 'function') return 'a function';
    return describe(value);
  } catch {
    return typeof value;
  }
}
