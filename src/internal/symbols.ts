/**
 * Module symbols for what the public classes share among themselves and with nothing else (as undici's
 * lib/core/symbols.js): a property under one of these is not part of the API, does not show in
 * completion, and is stripped from the emitted typings. A key that only one module uses is declared in
 * that module instead.
 */

/** `worker[kRequests]`: the worker's RequestEngine (parameter blocks, posting, operations in flight). */
export const kRequests: unique symbol = Symbol('ucxx-ts.requests');

// Worker's members for Endpoint, Listener, the AM dispatcher and the ucxx protocols.
/** `worker[kLive](what)`: the ucp_worker_h for a new operation, or ClosedError once closing. */
export const kLive: unique symbol = Symbol('ucxx-ts.live');
/** `worker[kHandle]`: the ucp_worker_h while it exists (also during close), for teardown paths. */
export const kHandle: unique symbol = Symbol('ucxx-ts.handle');
/** `worker[kAborted](what, signal)`: the Request of an operation whose signal had aborted before it was posted. */
export const kAborted: unique symbol = Symbol('ucxx-ts.aborted');
/** `worker[kDefer](fn)`: runs fn after the current progress call (never inside a UCX callback). */
export const kDefer: unique symbol = Symbol('ucxx-ts.defer');
/** `worker[kUpdateBusy]()`: the busy state (keeps the process alive, makes 'polling' spin) changed. */
export const kUpdateBusy: unique symbol = Symbol('ucxx-ts.updateBusy');
/** `worker[kEndpointRef](delta)`: an open endpoint starts (+1) or stops (-1) keeping the process alive. */
export const kEndpointRef: unique symbol = Symbol('ucxx-ts.endpointRef');
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
export const kKeyUnpacked: unique symbol = Symbol('ucxx-ts.keyUnpacked');
export const kKeyClosed: unique symbol = Symbol('ucxx-ts.keyClosed');
export const kUnpack: unique symbol = Symbol('ucxx-ts.unpack');
export const kReadStreamAhead: unique symbol = Symbol('ucxx-ts.readStreamAhead');
/** Worker: an endpoint's stream receiver stashed bytes (streamReadyEndpoints reports it). */
export const kStreamStashed: unique symbol = Symbol('ucxx-ts.streamStashed');
/** Endpoint: its stream receiver (the Duplex reads through it). */
export const kStreamReceiver: unique symbol = Symbol('ucxx-ts.streamReceiver');
export const kWireupFlush: unique symbol = Symbol('ucxx-ts.wireupFlush');
/** On an EndpointTimeoutError: raised by ucxx-ts's failure watchdog (no answer within failureTimeout), not by UCX. */
export const kByWatchdog: unique symbol = Symbol('ucxx-ts.byWatchdog');

/** `endpoint[kConnecting](flush)`: a connect's wireup flush while it waits (null once it settled). */
export const kConnecting: unique symbol = Symbol('ucxx-ts.connecting');
export const kForceCloseAtExit: unique symbol = Symbol('ucxx-ts.forceCloseAtExit');
export const kCloseWithin: unique symbol = Symbol('ucxx-ts.closeWithin');
export const kSettle: unique symbol = Symbol('ucxx-ts.settle');
export const kPackedRkey: unique symbol = Symbol('ucxx-ts.packedRkey');
export const kHandleFor: unique symbol = Symbol('ucxx-ts.handleFor');
export const kRemoteAddress: unique symbol = Symbol('ucxx-ts.remoteAddress');

// Request's members for the request engine, the completions and the classes that post.
/** `request[kSlotId]`: the slot id carried in user_data; 0 when none. */
export const kSlotId: unique symbol = Symbol('ucxx-ts.slotId');
/** `request[kHost]`: the RequestEngine it belongs to until it settles. */
export const kHost: unique symbol = Symbol('ucxx-ts.host');
export const kTracked: unique symbol = Symbol('ucxx-ts.tracked');
export const kBackground: unique symbol = Symbol('ucxx-ts.background');
export const kReleased: unique symbol = Symbol('ucxx-ts.released');
/** `request[kUcxRequest]`: the UCX request handle while in flight. */
export const kUcxRequest: unique symbol = Symbol('ucxx-ts.ucxRequest');
export const kGroup: unique symbol = Symbol('ucxx-ts.group');
/** `request[kGroupPrev]`, `request[kGroupNext]`: its neighbours in its RequestGroup's list. */
export const kGroupPrev: unique symbol = Symbol('ucxx-ts.groupPrev');
export const kGroupNext: unique symbol = Symbol('ucxx-ts.groupNext');
export const kReply: unique symbol = Symbol('ucxx-ts.reply');
export const kCancelFallback: unique symbol = Symbol('ucxx-ts.cancelFallback');
/** `request[kUcxDone]`: runs once UCX has completed the request (its callback), whatever its status. */
export const kUcxDone: unique symbol = Symbol('ucxx-ts.ucxDone');
/** `request[kForget]()`: lets go of what a detached request held, for a request UCX will never complete. */
export const kForget: unique symbol = Symbol('ucxx-ts.forget');
/** `owner[kHeldByUcx](request)`: an operation of the owner was rejected while UCX still holds it. */
export const kHeldByUcx: unique symbol = Symbol('ucxx-ts.heldByUcx');
export const kOnSettle: unique symbol = Symbol('ucxx-ts.onSettle');
export const kOwner: unique symbol = Symbol('ucxx-ts.owner');
export const kWatched: unique symbol = Symbol('ucxx-ts.watched');
export const kDetachable: unique symbol = Symbol('ucxx-ts.detachable');
export const kDetached: unique symbol = Symbol('ucxx-ts.detached');
export const kFailDetached: unique symbol = Symbol('ucxx-ts.failDetached');
/** `request[kComplete](status, length, tag)`: UCX completed the operation. */
export const kComplete: unique symbol = Symbol('ucxx-ts.complete');
export const kFail: unique symbol = Symbol('ucxx-ts.fail');
export const kAbandon: unique symbol = Symbol('ucxx-ts.abandon');
export const kBindSignal: unique symbol = Symbol('ucxx-ts.bindSignal');
/** `owner[kOpSettled](watched, completed, status)`: an operation of the endpoint settled. */
export const kOpSettled: unique symbol = Symbol('ucxx-ts.opSettled');

// AmMessage's and the AM dispatcher's, Context's, Endpoint's and RemoteKey's factories.
/** `context[kMdComponents]()`: md index -> transport component name. */
export const kMdComponents: unique symbol = Symbol('ucxx-ts.mdComponents');
/** `Endpoint[kCreate](...)`: a new endpoint, for Worker and Listener. */
export const kCreate: unique symbol = Symbol('ucxx-ts.create');
export const kFromMemoryHandle: unique symbol = Symbol('ucxx-ts.fromMemoryHandle');
export const kFromSerialized: unique symbol = Symbol('ucxx-ts.fromSerialized');
/** `worker[kParkIfHeld](destroy)`: keeps a failed endpoint's ucp_ep while UCX may hold its rendezvous messages. */
export const kParkIfHeld: unique symbol = Symbol('ucxx-ts.parkIfHeld');
/** `{ [kReservedAmId]: true }` in amSend's options: ucxx-ts's own send on a reserved AM id (the Duplex's end marker, the fast lane). */
export const kReservedAmId: unique symbol = Symbol('ucxx-ts.reservedAmId');
/** `endpoint[kOpenLane](address)`: the client opens its fast lane to the server's worker (endpoint/fast-lane.ts). */
export const kOpenLane: unique symbol = Symbol('ucxx-ts.openLane');
/** `endpoint[kAdoptLane](ep)`: the server takes the ucp_ep UCX made for the client's fast lane. */
export const kAdoptLane: unique symbol = Symbol('ucxx-ts.adoptLane');
/** `endpoint[kDropLane]()`: a lane the server refused after all is closed; data stays on the PEER endpoint. */
export const kDropLane: unique symbol = Symbol('ucxx-ts.dropLane');
/** `endpoint[kLaneCall](lane, header, ms)`: a flush (header null) or a lane message on the raw ucp_ep `lane`, whatever the endpoint's state; resolves with whether it completed in time. */
export const kLaneCall: unique symbol = Symbol('ucxx-ts.laneCall');
/** `endpoint[kLaneWait](done, ms)`: progresses the worker until `done()` or `ms`; resolves with `done()`. */
export const kLaneWait: unique symbol = Symbol('ucxx-ts.laneWait');
/** `endpoint[kGiveUpLane](lane)`: the peer released the fast lane `lane`: the endpoint stops using it (true if it had it). */
export const kGiveUpLane: unique symbol = Symbol('ucxx-ts.giveUpLane');
/** `endpoint[kRetireLane](lane)`: closes the fast lane `lane` in UCX (no reuse), progressed for up to closeTimeout. */
export const kRetireLane: unique symbol = Symbol('ucxx-ts.retireLane');
/** `message[kReplyHandle]`: the raw ucp_ep_h UCX named as an active message's reply endpoint (0n: none). */
export const kReplyHandle: unique symbol = Symbol('ucxx-ts.replyHandle');
/** `endpoint[kDrainLane](lane)`: stream bytes UCX holds on the fast lane go to the endpoint's stash (before the lane idles or closes). */
export const kDrainLane: unique symbol = Symbol('ucxx-ts.drainLane');
/** `endpoint[kPullStream]()`: takes the stream bytes UCX holds on the endpoint's fast lane. */
export const kPullStream: unique symbol = Symbol('ucxx-ts.pullStream');
/** `endpoint[kStreamReady]()`: whether stream bytes wait to be taken, its fast lane's included. */
export const kStreamReady: unique symbol = Symbol('ucxx-ts.streamReady');
/** `worker[kLaneStreamWait](endpoint, on)`: stream receives of the endpoint wait on its fast lane (or no more). */
export const kLaneStreamWait: unique symbol = Symbol('ucxx-ts.laneStreamWait');
/** `worker[kLaneMapped](endpoint, ep, on)`: a fast lane's ucp_ep names its Endpoint as reply endpoint (or no more). */
export const kLaneMapped: unique symbol = Symbol('ucxx-ts.laneMapped');
/** `worker[kDetector]()`: the worker's failure detector (worker/detector.ts), made on first use; null where it cannot be. */
export const kDetector: unique symbol = Symbol('ucxx-ts.detector');
/** `dispatcher[kServeFastLane](handle)`: the fast lane's AM id is this dispatcher's on another ucp_worker too (its detector). */
export const kServeFastLane: unique symbol = Symbol('ucxx-ts.serveFastLane');
