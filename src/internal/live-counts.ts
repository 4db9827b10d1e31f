/**
 * Counters of live UCX-backed objects that no table already tracks, for `getDiagnostics()` (leak checks
 * in the soak and the tests). Plain increments on create/release paths: nothing on an operation's path.
 */
export const liveCounts = {
  /** Remote keys unpacked on an endpoint and not yet destroyed (ucp_ep_rkey_unpack / ucp_rkey_destroy). */
  remoteKeys: 0,
  /** Memory mappings not yet unmapped (ucp_mem_map / ucp_mem_unmap), closed handles with live views included. */
  mappings: 0,
  /** Handles ucxx-ts maps for operations itself (src/engine/own-memh.ts): kept or in flight. */
  operationMappings: 0,
  /** Failure-detector workers (worker/detector.ts) not yet destroyed. */
  detectors: 0,
};
