/**
 * Counts of the live UCX-backed objects of the calling thread (every `worker_threads` thread has its own
 * ucxx-ts), for leak checks: after everything is closed, every count is back to zero.
 *
 * ```ts
 * await context.close();
 * assert.deepEqual(Object.values(getDiagnostics()).filter((n) => n !== 0), []);
 * ```
 */
import { liveContextCount } from './context.js';
import { liveEndpointCount } from './endpoint.js';
import { liveListenerCount } from './listener.js';
import { heldAmMessageCount, liveWorkerCount } from './active-message.js';
import { inflight } from './engine/completions.js';
import { orphanedRequestCount } from './engine/request-engine.js';
import { liveCounts } from './internal/live-counts.js';
import { liveRelayThreads } from './ffi/index.js';

/** What `getDiagnostics()` counts in the calling thread. */
export interface UcxxDiagnostics {
  /** Contexts not yet cleaned up (ucp_cleanup waits for memory handles whose views are still reachable). */
  contexts: number;
  /** Workers not yet closed. */
  workers: number;
  /**
   * Failure detectors not yet destroyed: the second worker a worker makes for the PEER-mode endpoints
   * of its fast-lane connections (at most one per worker, made at its first such connection, destroyed
   * with it; docs/interoperability.md).
   */
  detectors: number;
  /** Endpoints not yet closed (accepted ones included). */
  endpoints: number;
  /** Listeners not yet closed. */
  listeners: number;
  /** Memory mappings not yet unmapped (a closed handle stays mapped while views of it are reachable). */
  memoryMappings: number;
  /**
   * Memory handles ucxx-ts maps for operations on UCX versions that need one (1.20: sends and receives
   * of >= 1 KiB), kept for the next operation on the same buffer range: at most 256 per worker, none
   * once the worker is closed. Not in `memoryMappings`, which counts the application's.
   */
  operationMappings: number;
  /** Remote keys unpacked on an endpoint and not yet destroyed. */
  remoteKeys: number;
  /** Operations in flight (requests UCX has not completed), all workers together. */
  requestsInFlight: number;
  /** Wake relay threads (one per event/polling worker in a `worker_threads` thread; 0 on the main thread). */
  relayThreads: number;
  /**
   * Active messages that arrived for an id without a handler and wait for the next `setAmHandler` /
   * `amMessages` of that id (ids below `AM_IDS_HELD`, or any id that had a handler once).
   */
  amMessagesHeld: number;
}

/**
 * The calling thread's live object counts.
 *
 * @example
 * ```ts
 * await context.close();
 * const leaks = Object.entries(getDiagnostics()).filter(([, count]) => count !== 0);
 * assert.deepEqual(leaks, []); // e.g. [['endpoints', 1]] for an endpoint still open
 * ```
 */
export function getDiagnostics(): UcxxDiagnostics {
  return {
    contexts: liveContextCount(),
    workers: liveWorkerCount(),
    detectors: liveCounts.detectors,
    endpoints: liveEndpointCount(),
    listeners: liveListenerCount(),
    memoryMappings: liveCounts.mappings,
    operationMappings: liveCounts.operationMappings,
    remoteKeys: liveCounts.remoteKeys,
    requestsInFlight: inflight.size - orphanedRequestCount(),
    relayThreads: liveRelayThreads(),
    amMessagesHeld: heldAmMessageCount(),
  };
}
