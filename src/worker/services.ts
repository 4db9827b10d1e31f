/**
 * What each child of a Worker may use of it, declared: the compiler holds every child to its list, and
 * a reader sees at a glance how far an Endpoint, a Listener or the AM dispatcher reaches into its worker.
 * Worker gives these through module symbols (internal/symbols.ts); none of them is public API.
 */
import type { Worker } from '../worker.js';
import type {
  kAborted, kDefer, kDetector, kEndpointByHandle, kEndpointClosed, kEndpointRef, kHandle, kHold, kLaneMapped, kListenerClosed, kLive,
  kMaxAmHeader, kParkIfHeld, kProgressUntil, kRequests, kTagRecv, kUpdateBusy,
} from '../internal/symbols.js';

/**
 * An Endpoint's: posting (the request engine, the live handle, a pre-aborted operation's Request), tag
 * receives and probes (tag messages live in the worker), progress while it closes, its count in the
 * worker's busy state and keep-alive, and the place to park a failed ucp_ep UCX may still need.
 */
export type EndpointServices = Pick<Worker,
  typeof kRequests | typeof kLive | typeof kHandle | typeof kAborted | typeof kTagRecv | typeof kProgressUntil |
  typeof kDefer | typeof kEndpointClosed | typeof kEndpointRef | typeof kMaxAmHeader | typeof kParkIfHeld |
  typeof kLaneMapped | 'context' | 'fence' | 'tagProbe'>;

/** A Listener's: the worker handle to listen on, its failure detector (for fast-lane clients), deferral out of UCX callbacks, and its busy state. */
export type ListenerServices = Pick<Worker,
  typeof kHandle | typeof kDetector | typeof kDefer | typeof kListenerClosed | typeof kUpdateBusy | 'closed' | 'context'>;

/** The AM dispatcher's: the request engine (rendezvous receives), reply endpoints by handle, busy state. */
export type AmServices = Pick<Worker, typeof kRequests | typeof kEndpointByHandle | typeof kUpdateBusy>;

/** ucxx's active messages': the live handle, the largest AM header, and holding the worker awake. */
export type UcxxAmServices = Pick<Worker, typeof kLive | typeof kMaxAmHeader | typeof kHold>;

/** The stream receiver's: the request engine only. */
export type StreamServices = Pick<Worker, typeof kRequests>;
