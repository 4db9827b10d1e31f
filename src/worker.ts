/**
 * A UCP worker: the progress engine and the owner of endpoints, listeners and requests. Created with
 * `context.createWorker()`.
 *
 * ```ts
 * const worker = context.createWorker({ progressMode: 'event' });
 * const listener = worker.listen({ port: 0 }, (ep) => console.log('connected'));
 * const ep = await worker.connect('127.0.0.1', listener.port);
 * await worker.close();
 * ```
 */
import { debug } from './internal/debug-log.js';
import {
  CONSTANTS, OutCell, StructBuffer, UCS_ERR_INVALID_PARAM, UCS_ERR_NOT_CONNECTED, UCS_ERR_NO_MEMORY, UCS_ERR_REJECTED,
  UCS_ERR_TIMED_OUT, addressOf, captureStream, copyFromMemory, layouts, ucpVersion, ucx, ucxProfile,
} from './ffi/index.js';
import { OwnMemh } from './engine/own-memh.js';
import { OwnRequests } from './engine/own-request.js';
import { CanceledError, ClosedError, InvalidAddressError, check, errorFromStatus } from './errors/index.js';
import { Request, ResultKind, type AnyRequest, type TagRecvInfo } from './request.js';
import { ProgressEngine, type ProgressMode } from './engine/progress-engine.js';
import { RequestEngine } from './engine/request-engine.js';
import { failedRequest, requestOperation } from './engine/operations.js';
import type { ParamBlock } from './engine/param-blocks.js';
import {
  kAbandon, kAborted, kBindSignal, kCloseWithin, kFail, kCreate, kDefer, kDetachable, kEndpointByHandle, kEndpointRef,
  kEndpointClosed, kEndpointOpened, kLaneMapped, kLaneStreamWait, kPullStream, kStreamReady, kForceCloseAtExit, kHandle, kHold, kListenerClosed, kLive,
  kMaxAmHeader, kParkIfHeld, kProgressUntil, kReadStreamAhead, kReleased, kRequests, kSettle, kStreamStashed, kTagRecv,
  kTeardownAtExit, kUcxRequest, kUpdateBusy, kWorkerClosed, kDetector, kServeFastLane,
} from './internal/symbols.js';
import { Detector } from './worker/detector.js';
import { asBytes, byteLengthOf, ffiMemory, optionsObject, toTag, type BufferSource, show, FULL_MASK } from './internal/bytes.js';
import { buildIov } from './internal/iov.js';
import { AmDispatcher, type AmMessage } from './active-message.js';
import { resolveSockaddr } from './internal/sockaddr.js';
import { kConnecting } from './internal/symbols.js';
import { validateWorkerAddress } from './internal/worker-address.js';
import { abortError } from './internal/abort-error.js';
import type { Context } from './context.js';
import { Endpoint, type EndpointOptions } from './endpoint.js';
import { isLocalIp, sharesHost } from './internal/peer-locality.js';
import { HINT_WAIT_MS, expectOffer, hintPresent, takeLane } from './endpoint/fast-lane.js';
import { Listener, isOwnListenerPort, type ListenerOptions } from './listener.js';
import { listeningOnPortRecently } from './internal/port-sockets.js';
import { installUcxxAm, registerAmAllocator, registerAmReceiverCallback, type AmReceiverCallback } from './ucxx/am.js';
import type { AmReceiverCallbackInfo } from './ucxx/am-header.js';
import { tagMultiRecv, type TagMultiRecvOptions } from './ucxx/tag-multi.js';
import { ProbeWaits } from './engine/probe-waits.js';
import { RequestGroup } from './engine/request-group.js';
import { handshakeNamed } from './worker/handshakes.js';
import { newClientId } from './internal/client-id.js';
import { explainConnectFailure, resolveErrorMode } from './worker/connect.js';
import {
  InvalidArgumentError, ArgumentOutOfRangeError, InvalidStateError, INTERNAL, checkConstructorToken,
} from './errors/misuse.js';

export type { ProgressMode } from './engine/progress-engine.js';

/** Options of every receive. */
export interface ReceiveOptions {
  /** Aborting cancels the receive: it rejects with CanceledError. */
  signal?: AbortSignal;
}

/** What `worker.tagProbe()` found. */
export interface TagProbeResult {
  /** The message's length in bytes. */
  readonly length: number;
  /** The sender's tag. */
  readonly senderTag: bigint;
  /**
   * With `remove: true`: receives the message (exactly once); null otherwise. Aborting `signal` rejects
   * it at once with CanceledError, and the message is dropped (UCX may still write into `buffer`).
   */
  readonly receive: ((buffer: BufferSource, options?: ReceiveOptions) => Request<TagRecvInfo>) | null;
}

/** Options of `context.createWorker()`. */
export interface WorkerOptions {
  /** How the worker is progressed. Default 'event'. */
  progressMode?: ProgressMode;
  /** A name shown in UCX logs. */
  name?: string;
  /**
   * 'event' and 'polling': how long to keep polling after the last activity (an operation posted or
   * completed, a message received) before sleeping until the worker's fd signals. An answer that comes
   * within it costs no wake-up (a wake-up is several syscalls). Default 50 for 'event', 1000 for
   * 'polling' (which also polls for as long as operations are in flight). 0 sleeps at once.
   */
  busyPollUs?: number;
}

/** What `worker.queryAttributes()` returns. */
export interface WorkerAttributes {
  /** UCX's thread mode of the worker ('single': ucxx-ts uses one worker per thread). */
  readonly threadMode: 'single' | 'serialized' | 'multi';
  /** The largest active-message header this worker's UCX accepts, in bytes. */
  readonly maxAmHeader: number;
  /** The worker's name (UCX names a worker by its memory address, such as '0x2fe13a20'). */
  readonly name: string;
}

const K = CONSTANTS;

/** How long worker.close() lets a closed listener drain (Listener#drain) before destroying it. */
const LISTENER_DRAIN_LIMIT_MS = 1000;
/** How long a closing worker progresses for UCX to fail the operations its forced endpoint closes left queued. */
const CLOSE_PURGE_WAIT_MS = 500;

/** How often a worker with parked endpoints (Worker[kParkIfHeld]) looks whether it can destroy them. */
const PARKED_CHECK_MS = 250;
/** The longest a fast-lane connect waits for the server's answer to its HELLO (ms; failureTimeout if shorter). */
const LANE_ANSWER_WAIT_MAX_MS = 30_000;

/** Where a connect goes, as its endpoint and its error messages need it. */
interface ConnectTarget {
  readonly host: string;
  readonly port: number;
  readonly ip: string;
  readonly sockaddr: Buffer;
  readonly mode: 'peer' | 'none';
  /** A listener was seen on the port (this host) before connecting. */
  readonly listenedBefore: boolean;
}


/**
 * A UCP worker: the progress engine and communication context of one thread, the owner of its
 * listeners and endpoints, and where tag messages and active messages are matched.
 *
 * @example
 * ```ts
 * const worker = context.createWorker({ progressMode: 'polling' });
 * const ep = await worker.connect('127.0.0.1', 13337);
 * const { length } = await worker.tagRecv(buffer, 7n);
 * ```
 */
export class Worker {
  readonly #context: Context;
  #handle: bigint | null;
  readonly #engine: ProgressEngine;
  /** @internal Parameter blocks, posting and the operations in flight: for Endpoint and the AM code. */
  readonly [kRequests]: RequestEngine;
  readonly #endpoints = new Set<Endpoint>();
  readonly #listeners = new Set<Listener>();
  readonly #deferred: (() => void)[] = [];
  readonly #am: AmDispatcher;
  /** Endpoints by their ucp_ep_h, to hand active-message handlers their reply endpoint. */
  readonly #endpointsByHandle = new Map<bigint, Endpoint>();
  #closing: Promise<void> | undefined;
  /** Failed endpoints whose ucp_ep is kept while UCX may hold their rendezvous messages: their destroyers. */
  readonly #parked = new Set<() => Promise<void>>();
  #parkedTimer: NodeJS.Timeout | null = null;
  /** Waits that are no UCX request but must keep the worker awake (ucxx `amRecv`). */
  #holds = 0;
  /** Waiting `tagProbeWait` calls, checked after each progress pass. */
  readonly #probes = new ProbeWaits<TagProbeResult>((delta) => this[kHold](delta));
  /** Open endpoints that keep the process alive (not unref'd). */
  #refEndpoints = 0;
  /** False after `unref()`: nothing of this worker keeps the process alive. */
  #refed = true;
  /** The failure detector of this worker's fast-lane connections (worker/detector.ts), once one is made. */
  #detector: Detector | null = null;
  /** What making the detector needs: the context's handle, and whether it has 'wakeup'. */
  readonly #contextHandle: bigint;
  readonly #wakeup: boolean;

  /** @internal Use `context.createWorker()` (IllegalConstructorError otherwise). */
  constructor(token: typeof INTERNAL, context: Context, contextHandle: bigint, options: WorkerOptions, wakeup: boolean) {
    checkConstructorToken(token, 'Worker', 'context.createWorker()');
    options = optionsObject(options, 'createWorker options');
    if (options.name !== undefined && typeof options.name !== 'string') {
      throw new InvalidArgumentError(`the worker name must be a string, got ${typeof options.name}`);
    }
    const mode = options.progressMode ?? 'event';
    if (mode !== 'event' && mode !== 'polling' && mode !== 'manual') {
      throw new InvalidArgumentError(`progressMode must be 'event', 'polling' or 'manual', got ${show(mode)}`);
    }
    const busyPollUs = options.busyPollUs;
    if (busyPollUs !== undefined && !(typeof busyPollUs === 'number' && busyPollUs >= 0 && busyPollUs <= 1e7)) {
      throw new ArgumentOutOfRangeError(`busyPollUs must be a number of microseconds in [0, 1e7], got ${show(busyPollUs)}`);
    }
    this.#context = context;
    this.#contextHandle = contextHandle;
    this.#wakeup = wakeup;
    const params = new StructBuffer(layouts.ucp_worker_params_t);
    // The client id marks this worker's connection requests as ucxx-ts's (src/internal/client-id.ts).
    params.setU64('field_mask', K.UCP_WORKER_PARAM_FIELD_THREAD_MODE | K.UCP_WORKER_PARAM_FIELD_CLIENT_ID)
      .setU32('thread_mode', 0).setU64('client_id', newClientId(ucpVersion(), context.features.includes('am')));
    let name: Buffer | undefined;
    if (options.name !== undefined) {
      name = Buffer.from(`${options.name}\0`);
      params.setU64('field_mask', params.getU64('field_mask') | K.UCP_WORKER_PARAM_FIELD_NAME);
      params.setPtr('name', addressOf(name));
    }
    const out = new OutCell();
    check(ucx().ucp_worker_create(contextHandle, params.buffer, out.reset()), 'ucp_worker_create');
    this.#handle = out.ptr();
    const requests = new RequestEngine({
      workerHandle: () => this.#handle,
      busyChanged: () => this[kUpdateBusy](),
    });
    this[kRequests] = requests;
    if (ucxProfile().workarounds.peerRendezvousOwnMemh) requests.ownMemh = new OwnMemh(contextHandle);
    if (ucxProfile().workarounds.zeroedFetchAtomicRequests) requests.ownRequests = new OwnRequests(contextHandle);
    try {
      this.#engine = new ProgressEngine(
        this.#handle as bigint, mode, wakeup, () => {
          this.#runDeferred();
          if (this.#probes.size !== 0) this.#probes.check();
          if (this.#laneStreams.size !== 0) for (const endpoint of this.#laneStreams) endpoint[kPullStream]();
        }, () => requests.inflightCount > 0,
        busyPollUs,
      );
      requests.attach(this.#engine);
    } catch (err) {
      ucx().ucp_worker_destroy(this.#handle);
      this.#handle = null;
      throw err;
    }
    this.#am = new AmDispatcher(this, this.#handle as bigint, context.features.includes('am'));
    if (context.features.includes('am')) installUcxxAm(this); // ucxx's AM id 0, as ucxx does
    debug('worker created (progress %s)', mode);
  }

  /** The context this worker belongs to. */
  get context(): Context {
    return this.#context;
  }

  /** The progress mode chosen at creation. */
  get progressMode(): ProgressMode {
    return this.#engine.mode;
  }

  /**
   * How many progress passes this worker has run, by itself or through `progress()` (each pass is one or
   * more `ucp_worker_progress` calls). A diagnostic: an idle 'event' worker runs none, a 'polling' one
   * with operations in flight runs them back to back.
   */
  get progressCount(): number {
    return this.#engine.passes;
  }

  /** True once `close()` has been called. */
  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /**
   * Lets this worker keep the process alive again after `unref()` (the default): as a socket does, it
   * does so while it has an open endpoint or listener of its own that is not unref'd, an operation in
   * flight or an `amMessages()` iteration waiting. Returns the worker.
   *
   * @example
   * ```ts
   * worker.unref();   // a background service: the process may exit while it is open
   * worker.ref();     // back to the default
   * ```
   */
  ref(): this {
    this.#refed = true;
    this[kUpdateBusy]();
    return this;
  }

  /**
   * Nothing of this worker keeps the process alive any more (its endpoints, listeners and operations
   * still work while the process runs for other reasons), as `socket.unref()`. Returns the worker.
   *
   * @example
   * ```ts
   * const worker = context.createWorker().unref();
   * ```
   */
  unref(): this {
    this.#refed = false;
    this[kUpdateBusy]();
    return this;
  }

  /**
   * Whether the worker may keep the process alive (false after `unref()`), as `timeout.hasRef()`.
   *
   * @example
   * ```ts
   * if (!worker.hasRef()) console.log('the process may exit while this worker is open');
   * ```
   */
  hasRef(): boolean {
    return this.#refed;
  }

  /**
   * The `ucp_worker_h` handle, for code that calls libucp itself.
   *
   * @example
   * ```ts
   * const handle = worker.getHandle(); // a ucp_worker_h, for code that calls libucp itself
   * ```
   */
  getHandle(): bigint {
    return this[kLive]('Worker');
  }

  /**
   * Progresses the worker until UCX has nothing more to do right now; returns the number of events
   * processed. Required in 'manual' mode, harmless in the others.
   *
   * @example
   * ```ts
   * const worker = context.createWorker({ progressMode: 'manual' });
   * const request = worker.tagRecv(buffer, 1n);
   * while (!request.completed) worker.progress();
   * ```
   */
  progress(): number {
    this[kLive]('Worker');
    // The failure detector of the fast lanes too, at a sixteenth of the rate: its TCP poll is a system
    // call, and a loop that calls this may not let the event loop (which wakes it) turn.
    if (this.#detector !== null && (++this.#progressCalls & 15) === 0 && !this.#engine.inProgress) this.#detector.progress();
    return this.#engine.progress();
  }

  /** `progress()` calls, for the detector's share. */
  #progressCalls = 0;

  /**
   * Progresses synchronously until `request` completes, blocking the event loop meanwhile: the lowest
   * latency there is (no event-loop round trip per operation), for code that owns its thread, such as a
   * benchmark or a compute loop. Throws TimedOutError after `timeoutMs` (default: no limit).
   *
   * @example
   * ```ts
   * const req = endpoint.memPut(data, key);
   * if (!req.completed) worker.progressUntil(req);
   * ```
   */
  progressUntil(request: { readonly completed: boolean }, timeoutMs = Infinity): void {
    this[kLive]('Worker');
    if (request === null || typeof request !== 'object' || typeof request.completed !== 'boolean') {
      throw new InvalidArgumentError('progressUntil: request must be a Request (an object with a boolean `completed`)');
    }
    if (typeof timeoutMs !== 'number') {
      throw new InvalidArgumentError(`progressUntil: timeoutMs must be a number of ms, got ${typeof timeoutMs}`);
    }
    if (!(timeoutMs >= 0)) {
      throw new ArgumentOutOfRangeError(`progressUntil: timeoutMs must be a non-negative number of ms (or Infinity), got ${show(timeoutMs)}`);
    }
    if (request.completed) return;
    const engine = this.#engine;
    if (engine.inProgress) {
      // UCX forbids progress from inside its callbacks, so nothing could complete the request: say so
      // rather than spin forever.
      throw new InvalidStateError('progressUntil was called from inside a UCX callback (an active-message handler?): await the request instead');
    }
    const deadline = timeoutMs === Infinity ? Infinity : performance.now() + timeoutMs;
    let spins = 0;
    while (!request.completed) {
      engine.progressOne();
      if ((++spins & 1023) === 0) {
        // The event loop, which wakes the detector, does not turn while this spins.
        this.#detector?.progress();
        if (performance.now() > deadline) {
          throw errorFromStatus(UCS_ERR_TIMED_OUT, `progressUntil: not completed after ${timeoutMs} ms`);
        }
      }
    }
  }

  /**
   * The worker's address: the bytes a peer passes to `connectToAddress()`.
   *
   * @example
   * ```ts
   * const address = worker.getAddress(); // send it to the peer by any means
   * ```
   */
  getAddress(): Uint8Array {
    const handle = this[kLive]('Worker');
    const attr = new StructBuffer(layouts.ucp_worker_attr_t);
    attr.setU64('field_mask', K.UCP_WORKER_ATTR_FIELD_ADDRESS);
    check(ucx().ucp_worker_query(handle, attr.buffer), 'ucp_worker_query');
    const address = attr.getPtr('address');
    const length = Number(attr.getU64('address_length'));
    if (address === null) throw errorFromStatus(UCS_ERR_NO_MEMORY, 'ucp_worker_query returned no address');
    const bytes = new Uint8Array(copyFromMemory(address, length));
    ucx().ucp_worker_release_address(handle, address);
    return bytes;
  }

  /**
   * Completes every outstanding operation of this worker, remotely too (RMA becomes visible at targets).
   *
   * @example
   * ```ts
   * endpoint.memPut(data, key);
   * await worker.flush();
   * ```
   */
  @requestOperation
  flush(): Request<void> {
    const handle = this[kLive]('Worker');
    const requests = this[kRequests];
    const block = requests.params.send;
    const request = requests.void(requests.slot(block), ucx().ucp_worker_flush_nbx(handle, block.address), 'worker flush', null);
    if (!request.completed) {
      request[kDetachable] = true;
      this.#userRequests.add(request);
    }
    return request;
  }

  /**
   * Orders all RMA/atomic operations issued before it before those issued after, on every endpoint.
   *
   * @example
   * ```ts
   * endpoint.memPut(payload, key, 64);
   * worker.fence();                            // the payload lands before the flag
   * endpoint.memPut(new Uint8Array([1]), key, 0);
   * await worker.flush();
   * ```
   */
  fence(): void {
    check(ucx().ucp_worker_fence(this[kLive]('Worker')), 'ucp_worker_fence');
  }

  /**
   * Receives a tag message from any endpoint of this worker whose tag matches `tag` under `tagMask`
   * (default: all 64 bits). Resolves with the received length and the sender's tag. A message longer than
   * the buffer rejects with MessageTruncatedError and is consumed. A list of buffers receives into them in
   * order (UCX iov). `signal` cancels the receive (CanceledError).
   *
   * @example
   * ```ts
   * const { length, senderTag } = await worker.tagRecv(buffer, 42n);
   * const parts = await worker.tagRecv([header, body], 43n, undefined, { signal: AbortSignal.timeout(1000) });
   * ```
   */
  @requestOperation
  tagRecv(
    buffer: BufferSource | readonly BufferSource[], tag: bigint | number, tagMask: bigint | number = FULL_MASK,
    options: ReceiveOptions = {},
  ): Request<TagRecvInfo> {
    options = optionsObject(options, 'tagRecv options');
    return this[kTagRecv](buffer, tag, tagMask, this.#userRequests, options.signal);
  }

  /** @internal */
  [kTagRecv](
    buffer: BufferSource | readonly BufferSource[], tag: bigint | number, tagMask: bigint | number,
    group: RequestGroup | null, signal: AbortSignal | undefined,
  ): Request<TagRecvInfo> {
    const handle = this[kLive]('Worker');
    const t = toTag(tag, 'tag');
    const m = toTag(tagMask, 'tagMask');
    if (signal?.aborted === true) return this[kAborted]('tagRecv', signal);
    const requests = this[kRequests];
    let data: unknown;
    let count: number;
    let block: ParamBlock;
    if (Array.isArray(buffer)) {
      const iov = buildIov(buffer, 'tagRecv buffers');
      data = iov.array;
      count = iov.count;
      block = requests.params.tagRecvIov;
      buffer = iov.parts;
    } else {
      count = byteLengthOf(buffer, 'tagRecv buffer');
      data = ffiMemory(buffer);
      block = requests.params.tagRecv;
    }
    // See src/engine/own-memh.ts (contiguous receives only; a list of buffers is left to UCX).
    const memh = requests.ownMemh === null || block !== requests.params.tagRecv ? null
      : requests.ownMemh.mapReceive(data as ArrayBufferView, count, requests.params.tagRecvOwnMemh);
    if (memh !== null) block = requests.params.tagRecvOwnMemh;
    const request = requests.open<TagRecvInfo>(block, ResultKind.TagInfo, 'tagRecv', buffer);
    requests.track(request, block, ucx().ucp_tag_recv_nbx(handle, data as Buffer, count, t, m, block.address));
    if (memh !== null) requests.ownMemh?.releaseAfter(request, memh);
    if (!request.completed) {
      // A receive that matched a message whose data never comes (its sender gone without failing the
      // connection) cannot be cancelled in UCX: it rejects at once and UCX keeps the buffer until it lets go.
      request[kDetachable] = true;
      group?.add(request);
      request[kBindSignal](signal);
    }
    return request;
  }

  /**
   * Looks for a tag message that has arrived (after progressing once) without receiving it. Returns
   * null when there is none. With `remove: true` the message is taken out of UCX's queue and must be
   * received with the returned `receive(buffer)`: this is how to receive a message whose size you do not
   * know in advance. `tagProbeWait` waits for one to arrive.
   *
   * @example
   * ```ts
   * const probe = worker.tagProbe(7n, undefined, { remove: true });
   * if (probe) {
   *   const buffer = new Uint8Array(probe.length);
   *   await probe.receive(buffer);
   * }
   * ```
   */
  tagProbe(tag: bigint | number, tagMask: bigint | number = FULL_MASK, options: { remove?: boolean } = {}): TagProbeResult | null {
    options = optionsObject(options, 'tagProbe options');
    this[kLive]('Worker');
    const t = toTag(tag, 'tag');
    const m = toTag(tagMask, 'tagMask');
    this.#engine.progress();
    return this.#probeNow(t, m, options.remove === true);
  }

  /**
   * Waits for a tag message matching `tag` under `tagMask` to arrive, without receiving it: resolves
   * with what `tagProbe` returns once there is one (it keeps the process alive meanwhile). This is the
   * pattern for a message of unknown size: probe with `remove: true`, allocate `length` bytes, receive.
   * `signal` rejects it with CanceledError (its `cause` the signal's reason), and so does closing the
   * worker. A 'manual' worker finds the message when `worker.progress()` is called.
   *
   * @example
   * ```ts
   * const probe = await worker.tagProbeWait(7n, undefined, { remove: true, signal: AbortSignal.timeout(5000) });
   * const buffer = new Uint8Array(probe.length);          // exactly the message's size
   * const { senderTag } = await probe.receive!(buffer);
   * ```
   */
  tagProbeWait(
    tag: bigint | number, tagMask: bigint | number = FULL_MASK, options: { remove?: boolean; signal?: AbortSignal } = {},
  ): Promise<TagProbeResult> {
    try {
      options = optionsObject(options, 'tagProbeWait options');
      this[kLive]('Worker');
      const t = toTag(tag, 'tag');
      const m = toTag(tagMask, 'tagMask');
      const signal = options.signal;
      if (signal !== undefined && !(signal instanceof AbortSignal)) throw new InvalidArgumentError('tagProbeWait: signal must be an AbortSignal');
      const remove = options.remove === true;
      this.#engine.progress();
      return this.#probes.wait(() => (this.#handle === null ? null : this.#probeNow(t, m, remove)), signal);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** ucp_tag_probe_nb without progress (which may run from the end of a progress pass). */
  #probeNow(t: bigint, m: bigint, remove: boolean): TagProbeResult | null {
    const handle = this.#handle as bigint;
    const info = this[kRequests].params.probeInfo;
    const message = ucx().ucp_tag_probe_nb(handle, t, m, remove ? 1 : 0, info.buffer);
    if (message === null) return null;
    const length = Number(info.getU64('length'));
    const senderTag = info.getU64('sender_tag');
    if (!remove) return { length, senderTag, receive: null };
    let received = false;
    return {
      length,
      senderTag,
      receive: (buffer: BufferSource, options: ReceiveOptions = {}) => {
        if (received) return failedRequest('tagRecv (probed)', new InvalidStateError('this probed message was already received'));
        try {
          const request = this.#receiveProbed(message, buffer, optionsObject(options, 'tagRecv (probed) options').signal);
          received = true;
          return request;
        } catch (err) {
          return failedRequest('tagRecv (probed)', err);
        }
      },
    };
  }

  #receiveProbed(message: bigint, buffer: BufferSource, signal: AbortSignal | undefined): Request<TagRecvInfo> {
    const handle = this[kLive]('Worker');
    const count = byteLengthOf(buffer, 'tag message buffer');
    const requests = this[kRequests];
    const block = requests.params.tagRecv;
    const request = requests.open<TagRecvInfo>(block, ResultKind.TagInfo, 'tagRecv (probed)', buffer);
    requests.track(request, block, ucx().ucp_tag_msg_recv_nbx(handle, ffiMemory(buffer), count, message, block.address));
    if (!request.completed) {
      // Matched already, so UCX cannot cancel it (see kTagRecv).
      request[kDetachable] = true;
      request[kBindSignal](signal);
    }
    return request;
  }

  /**
   * Handles active messages with this `id` (any endpoint): `handler` gets each message once UCX has
   * it. Replaces a previous handler or `amMessages` iterator; `null` removes it.
   *
   * @example
   * ```ts
   * worker.setAmHandler(1, async (msg) => {
   *   const data = await msg.receive();              // eager: at once; rendezvous: fetched now
   *   msg.replyEndpoint?.amSend(2, msg.header, data);
   * });
   * ```
   */
  setAmHandler(id: number, handler: ((message: AmMessage) => void | Promise<void>) | null): void {
    this[kLive]('Worker');
    this.#am.setHandler(id, handler);
  }

  /**
   * The active messages with this `id`, as an async iterator (instead of a handler). Messages that
   * arrive while nobody is iterating wait in a queue.
   *
   * @example
   * ```ts
   * for await (const msg of worker.amMessages(1)) console.log(msg.header, await msg.receive());
   * ```
   */
  amMessages(id: number, options: { signal?: AbortSignal } = {}): AsyncIterableIterator<AmMessage> {
    options = optionsObject(options, 'amMessages options');
    this[kLive]('Worker');
    return this.#am.iterate(id, options.signal);
  }

  /**
   * Receives one ucxx tagMulti message from any endpoint (ucxx's framing: see docs/ucxx-protocols.md): the
   * frames, as many and as large as the sender's headers announce (within `maxFrames`/`maxBytes`).
   *
   * @example
   * ```ts
   * const frames = await worker.tagMultiRecv(7n);
   * ```
   */
  @requestOperation
  tagMultiRecv(tag: bigint | number, tagMask?: bigint | number, options?: TagMultiRecvOptions): Request<Uint8Array[]> {
    return tagMultiRecv(this, this, tag, tagMask, options);
  }

  /**
   * Routes the ucxx active messages that name `info` (sent with `receiverCallbackInfo`) to `callback`
   * instead of their endpoint's `amRecv()` queue, as ucxx's `registerAmReceiverCallback`. The owner
   * 'ucxx' is reserved; registering an owner/id twice is an AlreadyExistsError.
   *
   * @example
   * ```ts
   * worker.registerAmReceiverCallback({ owner: 'myapp', id: 1n }, (msg) => {
   *   if (msg.error === null) use(msg.userHeader, msg.data);
   * });
   * ```
   */
  registerAmReceiverCallback(info: AmReceiverCallbackInfo, callback: AmReceiverCallback): void {
    registerAmReceiverCallback(this, info, callback);
  }

  /**
   * Receives the data of ucxx active messages into buffers `allocator` returns (ucxx's
   * `registerAmAllocator`): called with each message's length, it returns a Uint8Array of exactly that
   * many bytes (a pool's, a SharedArrayBuffer's view...); eager data is copied into it, rendezvous data
   * lands in it. `null` goes back to a new Uint8Array per message. ucxx-ts has host memory only: a
   * `memoryType` other than 'host' is a RangeError. An allocator that throws, or returns the wrong size,
   * refuses that message (its amRecv fails with NoMemoryError) and a warning says why.
   *
   * @example
   * ```ts
   * const pool = new SharedArrayBuffer(1 << 24);
   * let offset = 0;
   * worker.registerAmAllocator((length) => new Uint8Array(pool, (offset += length) - length, length));
   * ```
   */
  registerAmAllocator(allocator: ((length: number) => Uint8Array) | null, memoryType: 'host' = 'host'): void {
    registerAmAllocator(this, allocator, memoryType);
  }

  /**
   * Starts a listener on a socket address; every incoming connection becomes an Endpoint, handed to
   * `onConnection` and to the listener's async iterator. Port 0 picks a free port (see `listener.port`).
   *
   * @example
   * ```ts
   * const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (ep) => ep.tagSend(hello, 1n));
   * ```
   */
  listen(options?: ListenerOptions, onConnection?: (endpoint: Endpoint) => void): Listener;
  listen(options: ListenerOptions & { handshake?: string } = {}, onConnection?: (endpoint: never) => void): unknown {
    options = optionsObject(options, 'listen options');
    // Opt-in: a plugin's handshake on every accepted connection (ucxx Python's: src/ucxx-python).
    if (options.handshake !== undefined) return handshakeNamed<Worker>(options.handshake).listen(this, options, onConnection);
    const handle = this[kLive]('Worker');
    const listener = new Listener(INTERNAL, this, handle, options, onConnection as (endpoint: Endpoint) => void);
    this.#listeners.add(listener);
    this[kUpdateBusy]();
    return listener;
  }

  /**
   * Connects to a listener at `host:port`. Resolves once the connection is established; rejects with a
   * UcxError (for example UnreachableError or ConnectionResetError) when it cannot be. A server that
   * sent stream bytes and went away before the connection settled still counts as connected: the
   * endpoint comes back closed, with those bytes readable through `streamRecv`.
   *
   * @example
   * ```ts
   * const ep = await worker.connect('127.0.0.1', 13337);
   * ```
   */
  connect(host: string, port: number, options?: EndpointOptions): Promise<Endpoint>;
  async connect(host: string, port: number, options: EndpointOptions & { handshake?: string } = {}): Promise<unknown> {
    options = optionsObject(options, 'connect options');
    // Opt-in: a plugin's handshake after the connection (ucxx Python's: src/ucxx-python).
    if (options.handshake !== undefined) return handshakeNamed<Worker>(options.handshake).connect(this, host, port, options);
    this[kLive]('Worker');
    const fastLane = options.fastLane ?? true;
    if (typeof fastLane !== 'boolean') throw new InvalidArgumentError(`options.fastLane must be a boolean, got ${show(fastLane)}`);
    const { sockaddr, ip } = await resolveSockaddr(host, port).catch((err: unknown) => {
      // A host name DNS cannot resolve is an address error of this library, naming the host.
      if (err instanceof InvalidArgumentError || err instanceof RangeError || !(err instanceof Error)) throw err;
      throw new InvalidAddressError(`connect: the host ${show(host)} cannot be resolved (${err.message})`, { cause: err });
    });
    // On a version whose default is NONE on this host, a connection to a listener of this process stays
    // in PEER mode: UCX 1.13 mishandles a NONE-mode client-server connection to itself (failed flushes on
    // close, a crash in its async thread when the process exits while connecting).
    const mode = resolveErrorMode(options.errorHandling, () => isLocalIp(ip) && !isOwnListenerPort(port));
    // Whether a listener is there, for the message of a refusal that may be a server refusing this
    // client's error mode (read now as well: a server that refuses may also exit at once).
    const listenedBefore = isLocalIp(ip) && listeningOnPortRecently(port) === true;
    const target: ConnectTarget = { host, port, ip, sockaddr, mode, listenedBefore };
    // A ucxx-ts listener of this host that offers fast lanes says so (endpoint/fast-lane.ts): then the
    // connect waits for its offer.
    const lane = fastLane && mode === 'peer' && isLocalIp(ip) && this.#context.features.includes('am') && hintPresent(port);
    // The connection's PEER endpoint goes on the failure detector, so that this worker never polls TCP
    // for it; it takes the lane or is closed, and the connect is made again without one.
    const detector = lane ? this[kDetector]() : null;
    if (detector !== null) {
      detector.hold(1);
      try {
        const endpoint = await this.#open(detector.handle as bigint, options, target, true);
        if (await this.#takeLane(endpoint)) {
          debug('connect to %s:%d established (error handling peer, fast lane, failure detector)', host, port);
          return endpoint;
        }
        debug('connect to %s:%d: no fast lane over the failure detector; connecting again without one', host, port);
        await endpoint.close();
      } finally {
        detector.hold(-1);
      }
    }
    const waitsForOffer = lane && detector === null;
    const endpoint = await this.#open(this[kLive]('Worker'), options, target, waitsForOffer);
    if (waitsForOffer) await this.#takeLane(endpoint);
    debug('connect to %s:%d established (error handling %s%s)', host, port, mode, endpoint.fastLane ? ', fast lane' : '');
    return endpoint;
  }

  /**
   * Creates a client endpoint on `workerHandle` (this worker's, or its detector's) and waits for its
   * wireup; `expect`: it waits for a fast-lane offer.
   */
  async #open(workerHandle: bigint, options: EndpointOptions, target: ConnectTarget, expect: boolean): Promise<Endpoint> {
    const { host, port, ip, mode, listenedBefore } = target;
    const sockaddr = target.sockaddr;
    const endpoint = Endpoint[kCreate](INTERNAL, this, workerHandle, options, mode, (params) => {
      params
        .setU64('field_mask', params.getU64('field_mask') | K.UCP_EP_PARAM_FIELD_SOCK_ADDR | K.UCP_EP_PARAM_FIELD_FLAGS)
        .setU32('flags', Number(K.UCP_EP_PARAMS_FLAGS_CLIENT_SERVER | K.UCP_EP_PARAMS_FLAGS_SEND_CLIENT_ID))
        .setPtr('sockaddr.addr', addressOf(sockaddr))
        .setU32('sockaddr.addrlen', sockaddr.length);
    }, `${host}:${port}`, { host: ip, port });
    if (expect) expectOffer(endpoint);
    // As on an accepted endpoint: a server that sends and goes away at once leaves its stream bytes
    // here, where UCX would drop them with the endpoint before the application asks for them (a lane
    // taken later moves the reading to it).
    if (this.#context.features.includes('stream')) endpoint[kReadStreamAhead]();
    try {
      const wireup = endpoint.flush();
      endpoint[kConnecting](wireup);
      await wireup.promise.finally(() => endpoint[kConnecting](null));
    } catch (err) {
      const status = (err as { status?: number }).status;
      // The server accepted, sent and went away before the flush came back: the connection was made, so
      // the endpoint is handed out with its bytes readable, and it reports the failure as its close.
      const refusedStatus = status === UCS_ERR_NOT_CONNECTED || status === UCS_ERR_REJECTED || status === UCS_ERR_INVALID_PARAM;
      if (endpoint.streamBufferedBytes > 0 && !refusedStatus) {
        debug('connect to %s:%d: the server sent %d bytes and left; handing the endpoint out', host, port, endpoint.streamBufferedBytes);
        return endpoint;
      }
      await endpoint.close();
      // Closing the worker (or the context, or the process exiting) ended a connect still waiting.
      if (this.#closing !== undefined) {
        throw new CanceledError(`connect to ${host}:${port}: the worker was closed before the server answered`, { cause: err });
      }
      // UCX 1.13's TCP CM reports a refused connection as NOT_CONNECTED on the flush; say what it means
      // (src/worker/connect.ts).
      const explained = explainConnectFailure(err, {
        host, port, ip, mode, listenedBefore, features: this.#context.features, refused: refusedStatus,
      });
      debug(refusedStatus ? 'connect to %s:%d refused: %s' : 'connect to %s:%d failed: %s', host, port, (explained as Error).message);
      throw explained;
    }
    return endpoint;
  }

  /** Waits for the server's fast-lane offer and takes the lane; whether it did. Closes the endpoint when it throws. */
  async #takeLane(endpoint: Endpoint): Promise<boolean> {
    try {
      const answerWaitMs = Math.min(this.#context.failureTimeout, LANE_ANSWER_WAIT_MAX_MS);
      return await takeLane(endpoint, () => this.#ownAddress(), HINT_WAIT_MS, answerWaitMs);
    } catch (err) {
      await endpoint.close();
      throw err;
    }
  }

  /**
   * Creates an endpoint to a worker whose address (from its `getAddress()`) you received.
   *
   * @example
   * ```ts
   * const ep = worker.connectToAddress(peerAddress);
   * ```
   */
  connectToAddress(address: BufferSource, options: EndpointOptions = {}): Endpoint {
    options = optionsObject(options, 'connectToAddress options');
    const handle = this[kLive]('Worker');
    const bytes = asBytes(address, 'worker address');
    if (bytes.byteLength === 0) throw new ArgumentOutOfRangeError('worker address is empty');
    const checked = new Uint8Array(bytes); // UCX trusts it: validate, and pass, a copy nobody can change
    validateWorkerAddress(checked);
    const mode = resolveErrorMode(options.errorHandling, () => sharesHost(this.#ownAddress(), checked));
    return Endpoint[kCreate](INTERNAL, this, handle, options, mode, (params) => {
      params
        .setU64('field_mask', params.getU64('field_mask') | K.UCP_EP_PARAM_FIELD_REMOTE_ADDRESS)
        .setPtr('address', addressOf(checked));
    }, 'worker address');
  }

  #ownAddressCache: Uint8Array | undefined;

  #ownAddress(): Uint8Array {
    this.#ownAddressCache ??= this.getAddress();
    return this.#ownAddressCache;
  }

  /**
   * Cancels every operation in flight on this worker, as ucxx's `Worker::cancelInflightRequests`: those of
   * its endpoints (`endpoint.cancelInflightRequests()`), its own tag receives (`worker.tagRecv`) and
   * flushes. Each rejects with CanceledError now; the worker and its endpoints stay open. Returns how
   * many were cancelled.
   *
   * @example
   * ```ts
   * worker.tagRecv(buffer, 1n).promise.catch(() => {});
   * const n = worker.cancelInflightRequests();  // 1
   * ```
   */
  cancelInflightRequests(): number {
    let cancelled = 0;
    for (const endpoint of this.#endpoints) cancelled += endpoint.cancelInflightRequests();
    for (const request of this.#userRequests.toArray()) {
      if (request.completed) continue;
      request.cancel();
      if (request.completed) cancelled++;
    }
    return cancelled;
  }

  /** The worker's own operations in flight (tag receives, flushes), for `cancelInflightRequests`. */
  readonly #userRequests = new RequestGroup();

  /**
   * Closes the worker: cancels what is in flight (those requests reject with CanceledError), closes its
   * endpoints (and their remote keys) and listeners, then destroys it. Idempotent.
   *
   * @example
   * ```ts
   * const worker = context.createWorker();
   * const pending = worker.tagRecv(buffer, 1n);
   * await worker.close();                      // `pending` rejects with CanceledError
   * ```
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  /** The same as `close()`, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #close(): Promise<void> {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#probes.cancelAll();
    // Rendezvous descriptors first, and progress while UCX tells their senders: UCX 1.13 asserts
    // (ucp_worker.inl:92) in ucp_am_data_release once the endpoint the message came through is closed,
    // and segfaults in ucp_rndv_ats_handler when the answer reaches a sender already cancelled.
    if (this.#am.close() > 0) await this[kProgressUntil](() => false, 50);
    for (const request of this[kRequests].inflightRequests()) {
      if (request[kUcxRequest] !== null) ucx().ucp_request_cancel(handle, request[kUcxRequest]);
    }
    await Promise.all([...this.#endpoints].map((ep) => ep.close()));
    // Parked endpoints stay until ucp_worker_destroy, which destroys them with the messages they sent.
    this.#stopParkedTimer();
    this.#parked.clear();
    // A forced endpoint close returns at once, but UCX fails the endpoint's queued sends, RMA and
    // flushes only in later progress calls; destroying the worker before that segfaults in
    // ucp_worker_destroy (docs/ucx-1.13-bugs/purge_queued_rndv.c). Bounded: a peer may hold them.
    const queued = (): boolean => this[kRequests].inflightRequests().some((r) => r[kDetachable] && r[kUcxRequest] !== null);
    if (queued()) await this[kProgressUntil](() => !queued(), CLOSE_PURGE_WAIT_MS);
    await Promise.all([...this.#listeners].map((listener) => listener[kCloseWithin](LISTENER_DRAIN_LIMIT_MS)));
    this.#engine.progress();
    // Whatever UCX did not complete by now never will once the worker is gone.
    this.#engine.close();
    this.#destroy(handle, 'the worker was closed');
    this.#context[kWorkerClosed](this);
  }

  /**
   * @internal See Context[kTeardownAtExit]: synchronous, for the 'exit' event only. UCX's async thread
   * keeps serving a live worker while the libraries are torn down at exit, and crashes; destroying the
   * worker outright with operations pending makes UCX 1.13 abort ("pending request ... should have been
   * flushed"). So: listeners, then a forced close of every endpoint (which purges its pending requests)
   * progressed for a bounded time, while the closed listeners drain (Listener#drain), then the worker.
   */
  [kTeardownAtExit](): void {
    const handle = this.#handle;
    if (handle === null) return;
    for (const listener of [...this.#listeners]) listener.close();
    const closing = [...this.#endpoints].map((endpoint) => endpoint[kForceCloseAtExit]());
    const deadline = performance.now() + 500;
    const busy = (): boolean => closing.some((request) => request !== null && !request.completed) ||
      [...this.#listeners].some((listener) => !listener[kSettle](false));
    while (busy() && performance.now() < deadline) {
      this.#engine.progress();
      this.#detector?.progress();
    }
    for (const listener of [...this.#listeners]) listener[kSettle](true);
    this.#stopParkedTimer();
    this.#engine.close();
    this.#destroy(handle, 'the process is exiting');
  }

  /**
   * Destroys the worker. Requests still in flight are released to UCX first (ucp_request_free marks
   * them so; UCX 1.13 aborts in ucp_worker_destroy on a request nobody released) and rejected; their
   * ids stay reserved until the worker is gone, so that a completion UCX delivers meanwhile finds them
   * and does not free them twice.
   */
  #destroy(handle: bigint, reason: string): void {
    const abandoned = this[kRequests].inflightRequests();
    for (const request of abandoned) {
      // (One on request memory of ucxx-ts's own is marked released from its post: not UCX's to free.)
      if (request[kUcxRequest] !== null && !request[kReleased]) {
        ucx().ucp_request_free(request[kUcxRequest]);
        request[kReleased] = true;
      }
      request[kAbandon](reason);
    }
    this.#handle = null;
    this.#detector?.destroy();
    ucx().ucp_worker_destroy(handle);
    this[kRequests].ownMemh?.close();
    for (const request of abandoned) this[kRequests].releaseSlot(request);
    this[kRequests].releaseOrphans();
    debug('worker destroyed (%s; %d operations abandoned)', reason, abandoned.length);
  }

  // ---- internals shared with Endpoint and Listener -------------------------------------------------

  /**
   * What UCX says of this worker (`ucp_worker_query`), as ucxx's `Worker::queryAttributes`: its thread
   * mode, the largest active-message header it accepts, and its name.
   *
   * @example
   * ```ts
   * const { threadMode, maxAmHeader, name } = worker.queryAttributes(); // 'single', 8100, '0x2fe13a20'
   * ```
   */
  queryAttributes(): WorkerAttributes {
    const attr = new StructBuffer(layouts.ucp_worker_attr_t);
    attr.setU64('field_mask', K.UCP_WORKER_ATTR_FIELD_THREAD_MODE | K.UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER |
      K.UCP_WORKER_ATTR_FIELD_NAME);
    check(ucx().ucp_worker_query(this[kLive]('Worker'), attr.buffer), 'ucp_worker_query');
    const mode = BigInt(attr.getU32('thread_mode'));
    const nameAt = attr.offset('name');
    const raw = attr.buffer.subarray(nameAt, nameAt + 32);
    const end = raw.indexOf(0);
    return {
      threadMode: mode === K.UCS_THREAD_MODE_MULTI ? 'multi' : mode === K.UCS_THREAD_MODE_SERIALIZED ? 'serialized' : 'single',
      maxAmHeader: Number(attr.getU64('max_am_header')),
      name: raw.toString('latin1', 0, end < 0 ? raw.length : end),
    };
  }

  /**
   * UCX's own description of this worker (`ucp_worker_print_info`: its address, the transports of
   * each interface), as ucxx's `Worker::getInfo` and Python's `get_ucp_worker_info()`.
   *
   * @example
   * ```ts
   * console.log(worker.getInfo()); // '#\n# UCP worker ...'
   * ```
   */
  getInfo(): string {
    const handle = this[kLive]('Worker');
    return captureStream((stream) => ucx().ucp_worker_print_info(handle, stream));
  }

  #maxAmHeader = -1;

  /**
   * @internal The largest active-message header this worker's UCX accepts (ucp_worker_query
   * UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER). UCX 1.13 does not fail a send with a larger one: it aborts
   * the process ("RTS is too big").
   */
  [kMaxAmHeader](): number {
    if (this.#maxAmHeader < 0) {
      const attr = new StructBuffer(layouts.ucp_worker_attr_t);
      attr.setU64('field_mask', K.UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER);
      check(ucx().ucp_worker_query(this[kLive]('Worker'), attr.buffer), 'ucp_worker_query');
      this.#maxAmHeader = Number(attr.getU64('max_am_header'));
    }
    return this.#maxAmHeader;
  }

  /** @internal Returns the handle for a new operation, or throws ClosedError once closing. */
  [kLive](what: string): bigint {
    if (this.#handle === null || this.#closing !== undefined) {
      throw new ClosedError(what === 'Worker' ? 'the Worker' : `the Worker of this ${what}`);
    }
    return this.#handle;
  }

  /** @internal The handle while it exists (also during close), for teardown paths. */
  get [kHandle](): bigint | null {
    return this.#handle;
  }

  /**
   * @internal The failure detector of fast-lane connections (worker/detector.ts), made on first use;
   * null once the worker closes, or where the context lacks 'am' (no lanes).
   */
  [kDetector](): Detector | null {
    if (this.#detector !== null) return this.#detector.handle === null ? null : this.#detector;
    if (!this.#context.features.includes('am') || this.#handle === null || this.#closing !== undefined) return null;
    const detector = new Detector(this.#contextHandle, newClientId(ucpVersion(), true, true), this.#wakeup);
    this.#detector = detector;
    this.#am[kServeFastLane](detector.handle as bigint);
    return detector;
  }

  /** @internal Runs `fn` after the current progress call returns (never from inside a UCX callback). */
  [kDefer](fn: () => void): void {
    this.#deferred.push(fn);
    if (this.#deferred.length === 1) setImmediate(() => this.#runDeferred());
  }

  #runDeferred(): void {
    while (this.#deferred.length > 0) {
      const fn = this.#deferred.shift() as () => void;
      fn();
    }
  }

  /** @internal */
  [kUpdateBusy](): void {
    // Before the AM dispatcher exists (during construction) nothing can be waiting on it.
    const amWaiting = (this.#am?.waiting ?? false) || this.#holds > 0;
    const inflightNow = this[kRequests].inflightCount > 0;
    let listening = false; // a closed listener still draining (Listener#drain) keeps nothing awake
    for (const listener of this.#listeners) listening ||= !listener.closed && listener.hasRef();
    // What keeps the process alive: the fd watch ref'd ('polling' spins on operations in flight only).
    const keepAlive = this.#refed && (inflightNow || listening || amWaiting || this.#refEndpoints > 0);
    this.#engine.setBusy(keepAlive, inflightNow);
  }

  /** @internal An open endpoint starts (+1) or stops (-1) keeping the process alive. */
  [kEndpointRef](delta: 1 | -1): void {
    this.#refEndpoints += delta;
    if (this.#refEndpoints === 0 || (delta === 1 && this.#refEndpoints === 1)) this[kUpdateBusy]();
  }

  /** @internal Counts a wait that must keep the worker awake (+1 when it starts, -1 when it ends). */
  [kHold](delta: number): void {
    this.#holds += delta;
    this[kUpdateBusy]();
  }

  /** @internal Progresses until `done()` or the deadline; used by close paths in every mode. */
  async [kProgressUntil](done: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (this.#handle === null) return done();
      this.#engine.progress();
      this.#detector?.progress();
      if (done()) return true;
      if (Date.now() > deadline) return false;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return true;
  }

  /**
   * @internal Called by a failed endpoint's close instead of destroying its ucp_ep. UCX 1.13 names a
   * NONE-mode endpoint by its address in the rendezvous messages it keeps for the application (an
   * unexpected tag message, an active message a handler kept): matching or releasing one after its
   * endpoint was destroyed aborts the process (ucp_worker.inl:92, docs/ucx-1.13-bugs/rndv_after_ep_destroy.c).
   * While this worker holds such messages (an unexpected tag message of any sender, a kept AM
   * descriptor) the ucp_ep is kept, inert (its peer is gone, so UCX fails what is matched to it), and
   * destroyed once they are gone, or with the worker. Returns false (nothing kept) when none are held.
   */
  [kParkIfHeld](destroy: () => Promise<void>): boolean {
    if (this.#handle === null || this.#closing !== undefined || !this.#holdsRendezvous()) return false;
    this.#parked.add(destroy);
    this.#parkedTimer ??= setInterval(() => this.#releaseParked(), PARKED_CHECK_MS).unref();
    debug('a failed endpoint is kept until its messages are received or released (%d kept)', this.#parked.size);
    return true;
  }

  /** Whether UCX may hold a rendezvous message for the application: unexpected tag messages, kept AM ones. */
  #holdsRendezvous(): boolean {
    if (this.#am.pendingCount > 0) return true;
    if (!this.#context.features.includes('tag') || this.#handle === null) return false;
    const info = this[kRequests].params.probeInfo;
    return ucx().ucp_tag_probe_nb(this.#handle, 0n, 0n, 0, info.buffer) !== null;
  }

  #releaseParked(): void {
    if (this.#handle === null || this.#closing !== undefined || this.#holdsRendezvous()) return;
    const destroyers = [...this.#parked];
    this.#parked.clear();
    this.#stopParkedTimer();
    debug('destroying %d kept endpoints', destroyers.length);
    for (const destroy of destroyers) void destroy().catch(() => {});
  }

  #stopParkedTimer(): void {
    if (this.#parkedTimer === null) return;
    clearInterval(this.#parkedTimer);
    this.#parkedTimer = null;
  }

  /** @internal */
  [kEndpointOpened](endpoint: Endpoint, handle: bigint): void {
    this.#endpoints.add(endpoint);
    this.#endpointsByHandle.set(handle, endpoint);
  }

  /** @internal */
  [kEndpointClosed](endpoint: Endpoint, handle: bigint | null): void {
    this.#endpoints.delete(endpoint);
    if (handle !== null && this.#endpointsByHandle.get(handle) === endpoint) this.#endpointsByHandle.delete(handle);
  }

  /** @internal A fast lane's ucp_ep maps to its Endpoint (`on`), or no longer. */
  [kLaneMapped](endpoint: Endpoint, handle: bigint, on: boolean): void {
    if (on) {
      this.#endpointsByHandle.set(handle, endpoint);
      this.#laneEndpoints.add(endpoint);
    } else {
      if (this.#endpointsByHandle.get(handle) === endpoint) this.#endpointsByHandle.delete(handle);
      this.#laneEndpoints.delete(endpoint);
    }
  }

  /** Endpoints with a fast lane: ucp_stream_worker_poll does not report the ucp_ep UCX made for a peer's lane. */
  readonly #laneEndpoints = new Set<Endpoint>();

  /** @internal The Endpoint object for a ucp_ep_h of this worker, if it is one of ours. */
  [kEndpointByHandle](handle: bigint): Endpoint | undefined {
    return this.#endpointsByHandle.get(handle);
  }

  /** Endpoints whose stream receives wait for bytes of their fast lane: pulled after each progress. */
  readonly #laneStreams = new Set<Endpoint>();

  /** @internal Stream receives of `endpoint` start or stop waiting on its fast lane; the worker stays awake meanwhile. */
  [kLaneStreamWait](endpoint: Endpoint, waiting: boolean): void {
    if (waiting === this.#laneStreams.has(endpoint)) return;
    if (waiting) this.#laneStreams.add(endpoint);
    else this.#laneStreams.delete(endpoint);
    this[kHold](waiting ? 1 : -1);
  }

  /** @internal An endpoint's stream receiver stashed bytes. */
  [kStreamStashed](endpoint: Endpoint): void {
    this.#streamStashed.add(endpoint);
  }

  /** Endpoints whose stash may hold stream bytes (see streamReadyEndpoints). */
  readonly #streamStashed = new Set<Endpoint>();
  /** ucp_stream_worker_poll's output array, grown on demand. */
  #streamPollArray: Buffer | null = null;

  /**
   * The endpoints of this worker that have stream bytes waiting for a receive, after progressing once:
   * those UCX reports (`ucp_stream_worker_poll`: bytes arrived while no receive of theirs was posted),
   * and those holding bytes read ahead or kept from a cancelled receive. UCX reports an endpoint once
   * per arrival: take what it has with `streamRecvAvailable` until that returns less than asked for, or
   * it is reported again only when more arrives. At most `max` UCX-reported endpoints per call (the rest
   * stay for the next).
   *
   * @example
   * ```ts
   * const buffer = new Uint8Array(1 << 20);
   * while (serving) {
   *   for (const ep of worker.streamReadyEndpoints()) {
   *     let n;
   *     while ((n = ep.streamRecvAvailable(buffer)) > 0) consume(ep, buffer.subarray(0, n));
   *   }
   *   await new Promise(setImmediate); // let the event loop (and the worker's progress) run
   * }
   * ```
   */
  streamReadyEndpoints(max = 64): Endpoint[] {
    const handle = this[kLive]('Worker');
    if (!Number.isSafeInteger(max) || max < 1 || max > 65536) {
      throw new ArgumentOutOfRangeError(`max must be an integer in [1, 65536], got ${show(max)}`);
    }
    this.#engine.progress();
    const layout = layouts.ucp_stream_poll_ep_t;
    const bytes = layout.size * max;
    if (this.#streamPollArray === null || this.#streamPollArray.byteLength < bytes) {
      this.#streamPollArray = Buffer.alloc(Math.max(bytes, layout.size * 64));
    }
    const out = this.#streamPollArray;
    const count = Number(ucx().ucp_stream_worker_poll(handle, out, max, 0));
    if (count < 0) check(count, 'ucp_stream_worker_poll');
    const ready: Endpoint[] = [];
    for (let i = 0; i < count; i++) {
      const endpoint = this.#endpointsByHandle.get(out.readBigUInt64LE(i * layout.size + layout.offsets.ep));
      if (endpoint !== undefined) ready.push(endpoint);
    }
    for (const endpoint of this.#streamStashed) {
      if (!endpoint[kStreamReady]()) this.#streamStashed.delete(endpoint);
      else if (!ready.includes(endpoint)) ready.push(endpoint);
    }
    // UCX keeps the lane's bytes, and its poll leaves out the ucp_ep it made for a peer's lane.
    for (const endpoint of this.#laneEndpoints) {
      if (!ready.includes(endpoint) && endpoint[kStreamReady]()) ready.push(endpoint);
    }
    return ready;
  }

  /** @internal A request that failed before reaching UCX because its signal had already aborted. */
  [kAborted]<T>(what: string, signal?: AbortSignal): Request<T> {
    const request = new Request<T>(INTERNAL, null, ResultKind.Void, what, null);
    request[kFail](abortError(what, signal?.reason));
    return request;
  }

  /** @internal */
  [kListenerClosed](listener: Listener): void {
    this.#listeners.delete(listener);
    this[kUpdateBusy]();
  }
}
