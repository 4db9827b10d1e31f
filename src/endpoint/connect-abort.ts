/**
 * Ends a client-server connection whose wireup never completed by shutting down its connection
 * manager's socket, as a peer that went away would. UCX 1.13 keeps a NONE-mode endpoint's
 * operations (the connect's own flush, a graceful close) queued while the server never answers (a
 * stopped process, a blocked event loop), refuses to force-close it, and aborts the process when the
 * endpoint is destroyed with them still queued (`ucp_ep.c:1185 Bug: pending request ... should have
 * been flushed`, docs/ucx-1.13-bugs/connect_never_answered.c). A closed socket is the one failure
 * UCX sees on such an endpoint: it then fails the endpoint and fails what was queued on it.
 */
import { CONSTANTS, StructBuffer, UCS_OK, layouts, ucx } from '../ffi/index.js';
import { connectionFd, peerKey } from '../internal/port-sockets.js';

const SHUT_RDWR = 2;

/** Shuts down the endpoint's connection socket; false when it cannot be found (then nothing was done). */
export function shutDownConnectSocket(ep: bigint): boolean {
  const attr = new StructBuffer(layouts.ucp_ep_attr_t);
  attr.setU64('field_mask', CONSTANTS.UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR | CONSTANTS.UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR);
  if (ucx().ucp_ep_query(ep, attr.buffer) !== UCS_OK) return false;
  const local = peerKey(attr.buffer, attr.offset('local_sockaddr'));
  const remote = peerKey(attr.buffer, attr.offset('remote_sockaddr'));
  if (local === null || remote === null) return false;
  const fd = connectionFd(local, remote);
  // Shut down, not closed: the descriptor stays UCX's, so no other file can take its number.
  return fd !== null && ucx().shutdown(fd, SHUT_RDWR) === 0;
}
