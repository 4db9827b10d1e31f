/**
 * ucxx's two free functions that make a RemoteKey: from a local memory handle, and from the bytes a
 * peer sent. They check their arguments' classes, so they live apart from RemoteKey, which Endpoint and
 * MemoryHandle themselves use (no import cycle between the three).
 */
import { Endpoint } from './endpoint.js';
import { MemoryHandle } from './memory-handle.js';
import { RemoteKey } from './remote-key.js';
import { kFromSerialized } from './internal/symbols.js';
import { InvalidArgumentError } from './errors/misuse.js';

/**
 * Packs a remote key for a memory handle (ucxx's name; the same as `memoryHandle.createRemoteKey()`).
 *
 * @example
 * ```ts
 * const bytes = createRemoteKeyFromMemoryHandle(region).serialize();
 * ```
 */
export function createRemoteKeyFromMemoryHandle(memoryHandle: MemoryHandle): RemoteKey {
  if (!(memoryHandle instanceof MemoryHandle)) throw new InvalidArgumentError('memoryHandle must be a MemoryHandle');
  return memoryHandle.createRemoteKey();
}

/**
 * Rebuilds a serialized remote key on an endpoint to the memory's owner. Rejects malformed input with
 * RemoteKeyFormatError (and a non-buffer with TypeError) before anything reaches UCX.
 *
 * @example
 * ```ts
 * const key = createRemoteKeyFromSerialized(endpoint, bytesFromPeer);
 * ```
 */
export function createRemoteKeyFromSerialized(endpoint: Endpoint, serialized: Uint8Array | ArrayBufferView | ArrayBuffer): RemoteKey {
  if (!(endpoint instanceof Endpoint)) throw new InvalidArgumentError('createRemoteKeyFromSerialized: endpoint must be an Endpoint');
  return RemoteKey[kFromSerialized](endpoint, serialized);
}
