/**
 * ucxx-ts: UCX for TypeScript. The object model follows ucxx (RAPIDS): Context -> Worker -> Listener /
 * Endpoint, MemoryHandle -> RemoteKey, and a Request for every non-blocking operation.
 */
export {
  Context, DEFAULT_FEATURES, DEFAULT_FAILURE_TIMEOUT, type ContextOptions, type Feature, type TransportResource,
} from './context.js';
export {
  Worker, type WorkerOptions, type WorkerAttributes, type ProgressMode, type ReceiveOptions, type TagProbeResult,
} from './worker.js';
export { Listener, type ListenerOptions, type ListenerEvents, type ConnectionRequest } from './listener.js';
export {
  Endpoint, type EndpointOptions, type EndpointEvents, type ErrorHandlingMode, type StreamRecvOptions, type AmSendOptions, type AtomicOp,
  type AtomicOptions, type OperationOptions, type PeerAddress, type EndpointTransport, type LaneUsage, type BufferSource,
} from './endpoint.js';
export { AmMessage, AM_IDS_HELD, type AmHandler } from './active-message.js';
export { AM_ID_FAST_LANE, AM_ID_MAX, AM_ID_STREAM_END } from './am-ids.js';
export { UcxxAmMessage, UCXX_AM_ID, type UcxxAmSendOptions, type AmReceiverCallback } from './ucxx/am.js';
export { type TagMultiRecvOptions } from './ucxx/tag-multi.js';
export {
  encodeTagMultiHeaders, decodeTagMultiHeader, TAG_MULTI_HEADER_SIZE, TAG_MULTI_HEADER_FRAMES, type TagMultiHeader,
} from './ucxx/tag-multi-header.js';
export {
  encodeUcxxAmHeader, decodeUcxxAmHeader, type UcxxAmHeader, type AmMemoryTypePolicy, type AmReceiverCallbackInfo,
  type EncodeAmHeaderOptions,
} from './ucxx/am-header.js';
export { createEndpointDuplex, type EndpointDuplexOptions } from './endpoint-stream.js';
export { MemoryHandle, type MemoryHandleOptions, type MemoryAccess } from './memory-handle.js';
export { RemoteKey, type RemoteKeyAccess } from './remote-key.js';
export { createRemoteKeyFromMemoryHandle, createRemoteKeyFromSerialized } from './create-remote-key.js';
export { Request, type TagRecvInfo } from './request.js';
export {
  UcxxPythonEndpoint, UcxxPythonListener, UCXX_PYTHON_FEATURES, hash64bits, type PyValue, type UcxxPythonConnectOptions,
  type UcxxPythonListenerOptions, type UcxxPythonListenerEvents, type UcxxPythonTagOptions, type UcxxPythonRecvOptions,
  type UcxxPythonAllocatingRecvOptions, type UcxxPythonRecvObjOptions, type UcxxPythonProbeOptions,
} from './ucxx-python/index.js';
export * from './errors/index.js';
export { UCX_ENVIRONMENT_DEFAULTS } from './ffi/index.js';
export { getDiagnostics, type UcxxDiagnostics } from './diagnostics.js';

import { mappedLibraryPath, ucpVersion, ucx, ucxProfile } from './ffi/index.js';
import { FULL_MASK as TAG_MASK_FULL } from './internal/bytes.js';

/**
 * The version of the libucp that was loaded, e.g. [1, 13, 1].
 *
 * @example
 * ```ts
 * const [major, minor] = getUcxVersion();
 * console.log(`UCX ${getUcxVersion().join('.')}`); // e.g. 'UCX 1.13.1'
 * ```
 */
export function getUcxVersion(): [number, number, number] {
  return ucpVersion();
}

/** What `getUcxLibrary()` reports. */
export interface UcxLibraryInfo {
  /** The libucp file this process mapped (the soname when /proc does not show it). */
  path: string;
  /** Why that one: `UCXX_TS_UCX_LIBDIR` when it is set, else the system's library search path. */
  from: 'UCXX_TS_UCX_LIBDIR' | 'system';
}

/**
 * Where the libucp in use came from: the file this process mapped (loading UCX if it is not loaded yet),
 * and why that one: `UCXX_TS_UCX_LIBDIR` when it is set, else the system's library search path.
 *
 * @example
 * ```ts
 * const { path, from } = getUcxLibrary();
 * console.log(`UCX ${getUcxVersion().join('.')} from ${path} (${from})`);
 * // e.g. 'UCX 1.20.1 from /app/.venv/lib/python3.11/site-packages/libucx/lib/libucp.so.0 (UCXX_TS_UCX_LIBDIR)'
 * ```
 */
export function getUcxLibrary(): UcxLibraryInfo {
  ucx();
  const dir = process.env['UCXX_TS_UCX_LIBDIR'];
  return { path: mappedLibraryPath('libucp.so') ?? 'libucp.so.0', from: dir !== undefined && dir !== '' ? 'UCXX_TS_UCX_LIBDIR' : 'system' };
}

/**
 * What `errorHandling: 'auto'` (the default of `worker.connect()` and `worker.connectToAddress()`) means
 * on the loaded UCX: `'peer'` from UCX 1.19 on (what ucxx C++ and Python servers accept; on one host
 * that is TCP), `'none-on-this-host'` on 1.13 (NONE mode, shared memory, for a peer on this host; PEER
 * for a remote one). docs/interoperability.md has the measurements behind each choice.
 *
 * @example
 * ```ts
 * if (getDefaultErrorHandling() === 'peer') console.log('a plain connect() reaches ucxx servers');
 * ```
 */
export function getDefaultErrorHandling(): 'peer' | 'none-on-this-host' {
  ucx();
  return ucxProfile().defaultErrorMode;
}

/**
 * The tag mask that matches every bit (ucxx's `TagMaskFull`): a receive of exactly one tag, and the
 * default `tagMask` of every receive and probe.
 *
 * @example
 * ```ts
 * await worker.tagRecv(buffer, 7n, FULL_MASK);        // the same as worker.tagRecv(buffer, 7n)
 * await worker.tagRecv(buffer, 7n << 32n, (FULL_MASK << 32n) & FULL_MASK); // upper 32 bits 7, any lower
 * ```
 */
export const FULL_MASK: bigint = TAG_MASK_FULL;
