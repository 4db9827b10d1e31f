/**
 * Module symbols for what the public classes share among themselves and with nothing else (as undici's
 * lib/core/symbols.js): a property under one of these is not part of the API, does not show in
 * completion, and is stripped from the emitted typings.
 */

/** `worker[kRequests]`: the worker's RequestEngine (parameter blocks, posting, operations in flight). */
export const kRequests: unique symbol = Symbol('ucxx-ts.requests');

// Worker's members for Endpoint, Listener, the AM dispatcher and the ucxx protocols.
/** `worker[kLive](what)`: the ucp_worker_h for a new operation, or ClosedError once closing. */
export const kLive: unique symbol = Symbol('ucxx-ts.live');
/** `worker[kHandle]`: the ucp_worker_h while it exists (also during close), for teardown paths. */
export const kHandle: unique symbol = Symbol('ucxx-ts.handle');
/** `worker[kAborted](what)`: the Request of an operation whose signal had aborted before it was posted. */
export const kAborted: unique symbol = Symbol('ucxx-ts.aborted');
/** `worker[kDefer](fn)`: runs fn after the current progress call (never inside a UCX callback). */
export const kDefer: unique symbol = Symbol('ucxx-ts.defer');
/** `worker[kUpdateBusy]()`: the busy state (keeps the process alive, makes 'polling' spin) changed. */
export const kUpdateBusy: unique symbol = Symbol('ucxx-ts.updateBusy');
/** `worker[kHold](delta)`: a wait that is no UCX request but must keep the worker awake. */
export const kHold: unique symbol = Symbol('ucxx-ts.hold');
/** `worker[kProgressUntil](done, ms)`: progress until done() or the deadline, in every mode. */
export const kProgressUntil: unique symbol = Symbol('ucxx-ts.progressUntil');
/** `worker[kTagRecv](...)`: a tag receive, optionally grouped with an endpoint's receives. */
export const kTagRecv: unique symbol = Symbol('ucxx-ts.tagRecv');
/** `worker[kMaxAmHeader]()`: the largest active-message header this worker's UCX accepts. */
export const kMaxAmHeader: unique symbol = Symbol('ucxx-ts.maxAmHeader');
/** Endpoint and listener bookkeeping of a worker. */
export const kEndpointOpened: unique symbol = Symbol('ucxx-ts.endpointOpened');
export const kEndpointClosed: unique symbol = Symbol('ucxx-ts.endpointClosed');
export const kEndpointByHandle: unique symbol = Symbol('ucxx-ts.endpointByHandle');
export const kListenerClosed: unique symbol = Symbol('ucxx-ts.listenerClosed');
/** `x[kTeardownAtExit]()`: the synchronous teardown of the process 'exit' event. */
export const kTeardownAtExit: unique symbol = Symbol('ucxx-ts.teardownAtExit');

// Context's, Endpoint's, Listener's, MemoryHandle's and RemoteKey's members for the other classes.
/** `context[kLiveHandle]()`: the ucp_context_h, or ClosedError once closing. */
export const kLiveHandle: unique symbol = Symbol('ucxx-ts.liveHandle');
export const kWorkerClosed: unique symbol = Symbol('ucxx-ts.workerClosed');
export const kMemoryHandleClosed: unique symbol = Symbol('ucxx-ts.memoryHandleClosed');
export const kUnmap: unique symbol = Symbol('ucxx-ts.unmap');
export const kPackedRkeyReference: unique symbol = Symbol('ucxx-ts.packedRkeyReference');
/** `endpoint[kOnPeerError](status)`: UCX reported the peer failed (called from inside progress). */
export const kOnPeerError: unique symbol = Symbol('ucxx-ts.onPeerError');
export const kKeyUnpacked: unique symbol = Symbol('ucxx-ts.keyUnpacked');
export const kKeyClosed: unique symbol = Symbol('ucxx-ts.keyClosed');
export const kUnpack: unique symbol = Symbol('ucxx-ts.unpack');
export const kReadStreamAhead: unique symbol = Symbol('ucxx-ts.readStreamAhead');
export const kWireupFlush: unique symbol = Symbol('ucxx-ts.wireupFlush');
export const kForceCloseAtExit: unique symbol = Symbol('ucxx-ts.forceCloseAtExit');
export const kCloseWithin: unique symbol = Symbol('ucxx-ts.closeWithin');
export const kOnConnRequest: unique symbol = Symbol('ucxx-ts.onConnRequest');
export const kSettle: unique symbol = Symbol('ucxx-ts.settle');
export const kPackedRkey: unique symbol = Symbol('ucxx-ts.packedRkey');
export const kHandleFor: unique symbol = Symbol('ucxx-ts.handleFor');
export const kRemoteAddress: unique symbol = Symbol('ucxx-ts.remoteAddress');
export const kAddressOf: unique symbol = Symbol('ucxx-ts.addressOf');
