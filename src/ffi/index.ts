/**
 * The FFI layer's one entry point. The object model reaches libucp only through what this module exports:
 * the declared functions, callback registration, struct layouts, constants, status decoding and the few
 * koffi memory primitives (addresses, views of C memory, fd polling on Node's loop).
 */
import koffi from 'koffi';
import { isMainThread } from 'node:worker_threads';
import { RelayWatch, type FdWatch } from './fd-relay.js';
import { callbackTypes, declareFunctions, type Address, type CallbackKind, type UcxFunctions } from './functions.js';

export { UcxLibraryNotFoundError, UCX_ENVIRONMENT_DEFAULTS, mappedLibraryPath } from './library.js';
export { UnsupportedUcxVersionError, SUPPORTED_UCX, UCX_PROFILES, sameWireRange, type UcxProfile, type UcxFormat } from './ucx-versions.js';
import { loadedProfile, type UcxProfile } from './ucx-versions.js';
export type { Address, Ptr, PtrArg, UcxFunctions, CallbackKind } from './functions.js';
export * as layouts from './layouts.js';
export type { Layout } from './layouts.js';
export { CONSTANTS, UCP_API_MAJOR, UCP_API_MINOR, c, type ConstantName } from './constants.js';
export * from './status.js';
export { StructBuffer, OutCell } from './struct-buffer.js';
export { addressOf, viewOfMemory } from './memory.js';
import { addressOf } from './memory.js';

let functions: UcxFunctions | undefined;

/** The loaded libucp/libucs functions (loaded on first use). Throws UcxLibraryNotFoundError. */
export function ucx(): UcxFunctions {
  functions ??= declareFunctions();
  return functions;
}

/**
 * Runs `fn` with UCX's log level at 'fatal', then restores it: for a call whose UCX error logs are
 * expected and say nothing to the user.
 */
export function withUcxLogsQuiet<T>(fn: () => T): T {
  const api = ucx();
  const saved = Buffer.alloc(32);
  if (api.ucs_global_opts_get_value('LOG_LEVEL', saved, saved.length) !== 0) return fn();
  const previous = saved.toString('latin1', 0, Math.max(0, saved.indexOf(0)));
  if (api.ucs_global_opts_set_value('LOG_LEVEL', 'fatal') !== 0) return fn();
  try {
    return fn();
  } finally {
    api.ucs_global_opts_set_value('LOG_LEVEL', previous);
  }
}

/**
 * What ucxx-ts does differently on the loaded UCX version (src/ffi/ucx-versions.ts); loads libucp on
 * first use. Modules ask this instead of comparing versions.
 */
export function ucxProfile(): UcxProfile {
  ucx();
  return loadedProfile() as UcxProfile;
}

/** The installed libucp version as [major, minor, release]. */
export function ucpVersion(): [number, number, number] {
  const cells = [Buffer.alloc(4), Buffer.alloc(4), Buffer.alloc(4)] as const;
  ucx().ucp_get_version(cells[0], cells[1], cells[2]);
  return [cells[0].readUInt32LE(0), cells[1].readUInt32LE(0), cells[2].readUInt32LE(0)];
}

/**
 * Registers a JS function as a C callback of the given kind and returns its address. koffi has 8192
 * callback slots for the whole process: register one per kind at start-up, never one per request.
 */
export function registerCallback(kind: CallbackKind, fn: (...args: never[]) => unknown): bigint {
  return koffi.register(fn, callbackTypes[kind]) as bigint;
}


/** Copies `length` bytes of C memory at `address` into `destination` (which must hold them). */
export function copyIntoMemory(destination: Uint8Array, address: Address, length: number): void {
  if (length > destination.byteLength) throw new RangeError(`copy of ${length} bytes into ${destination.byteLength}`);
  if (length > 0) ucx().memcpy(addressOf(destination), address, length);
}

/**
 * Copies `length` bytes of C memory at `address` to `offset` in a region of `regionLength` bytes at
 * `regionAddress` (a JS buffer whose address its owner took once and keeps reachable).
 */
export function copyIntoRegion(regionAddress: number, regionLength: number, offset: number, address: Address, length: number): void {
  if (offset < 0 || length < 0 || offset + length > regionLength) {
    throw new RangeError(`copy of ${length} bytes at ${offset} into ${regionLength}`);
  }
  if (length > 0) ucx().memcpy(regionAddress + offset, address, length);
}

/**
 * Copies `length` bytes of C memory into a new Buffer. Buffer.allocUnsafe takes small buffers from Node's
 * pooled slab, which is already outside V8's heap: a fresh small Uint8Array handed to C would first be
 * moved off-heap (~1.4 us), and a koffi view costs an external ArrayBuffer per call (~3 us together).
 */
export function copyFromMemory(address: Address, length: number): Buffer {
  if (length === 0) return Buffer.alloc(0);
  const out = Buffer.allocUnsafe(length);
  copyIntoMemory(out, address, length);
  return out;
}

export type { FdWatch } from './fd-relay.js';
export { liveRelayThreads } from './fd-relay.js';

/**
 * Watches a file descriptor for readability. On the main thread: a libuv poll on Node's own event loop
 * (koffi). In a `worker_threads` thread: a relay thread (see fd-relay.ts), because a koffi poll handle
 * still open when the thread is terminated aborts the whole process. `UCXX_TS_FD_WATCH=relay` uses the
 * relay on the main thread too (for measurements).
 */
export function pollReadable(fd: number, onReadable: () => void): FdWatch {
  if (!isMainThread || process.env['UCXX_TS_FD_WATCH'] === 'relay') return new RelayWatch(fd, onReadable);
  const poll = koffi.node.poll(fd, { readable: true }, onReadable);
  return {
    ref: () => poll.ref(),
    unref: () => poll.unref(),
    armed: () => undefined, // level-triggered: libuv reports the fd for as long as it is readable
    close: () => poll.close(),
  };
}

/**
 * Where `readStruct` copies small C structs: off V8's heap from the start (a small on-heap Uint8Array
 * would be moved the first time its address is taken).
 */
const structScratch = Buffer.allocUnsafeSlow(64).fill(0);
let structScratchAddress: number | undefined;

/**
 * Copies the `length` (at most 64) bytes of a C struct at `address` into a shared scratch Buffer and
 * returns it, valid until the next call: one memcpy, then plain Buffer reads. (`koffi.decode` with a
 * type name parses the name on every call and costs about as much per field as this does per struct.)
 */
export function readStruct(address: Address, length: number): Buffer {
  if (length > structScratch.length) throw new RangeError(`readStruct: ${length} bytes is over ${structScratch.length}`);
  structScratchAddress ??= Number(addressOf(structScratch));
  ucx().memcpy(structScratchAddress, address, length);
  return structScratch;
}

/** Reads a little-endian size_t at `offset` in a Buffer, as a number (sizes stay below 2^53). */
export function sizeAt(bytes: Buffer, offset: number): number {
  return bytes.readUInt32LE(offset) + bytes.readUInt32LE(offset + 4) * 0x1_0000_0000;
}

/** Runs `print(stream)` with a C `FILE *` that writes to memory and returns what was written. */
export function captureStream(print: (stream: bigint) => void): string {
  const api = ucx();
  const bufferOut = Buffer.alloc(8);
  const sizeOut = Buffer.alloc(8);
  const stream = api.open_memstream(bufferOut, sizeOut);
  if (stream === null) throw new Error('open_memstream failed');
  try {
    print(stream);
  } finally {
    api.fclose(stream);
  }
  const address = bufferOut.readBigUInt64LE(0);
  if (address === 0n) return '';
  const text = copyFromMemory(address, Number(sizeOut.readBigUInt64LE(0))).toString('utf8');
  api.free(address);
  return text;
}
