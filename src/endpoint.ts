/**
 * A connection to a remote worker: RMA (`memPut`/`memGet`), tag messages and flush. Created by
 * `worker.connect()`, `worker.connectToAddress()` or a Listener.
 *
 * When the peer fails (and UCX sees it: see ErrorHandlingMode) the endpoint emits 'error' (only if
 * somebody listens for it: the failure also reaches every pending operation, `failure` and the cause
 * of later ClosedErrors) and 'close', its in-flight requests reject with a UcxError such as
 * ConnectionResetError, and every later operation fails with ClosedError. A peer that closes its side is
 * a close unless an operation of this endpoint fails with it: 'close' alone, with `closedByPeer`.
 *
 * ```ts
 * const ep = await worker.connect('127.0.0.1', port);
 * const key = createRemoteKeyFromSerialized(ep, serializedKey);
 * await ep.memPut(Buffer.from('hello'), key, 128);
 * await ep.flush();
 * await ep.close();
 * ```
 */
import type { SocketAddress } from './internal/sockaddr.js';
import { debug } from './internal/debug-log.js';
import { EventEmitter } from 'node:events';
import {
  CONSTANTS, OutCell, StructBuffer, UCS_ERR_CANCELED, UCS_ERR_CONNECTION_RESET, UCS_ERR_ENDPOINT_TIMEOUT, UCS_ERR_INVALID_PARAM, UCS_ERR_UNREACHABLE,
  addressOf, captureStream, layouts, registerCallback, statusOfPtr, ucx, withUcxLogsQuiet, type Ptr,
} from './ffi/index.js';
import { CanceledError, ClosedError, EndpointTimeoutError, UcxError, check, errorFromStatus } from './errors/index.js';
import { COMPLETED, Request, ResultKind, type AnyRequest, type TagRecvInfo } from './request.js';
import { SlotTable } from './internal/slot-table.js';
import { asBytes, byteLengthOf, ffiMemory, optionsObject, toTag, toU64, type BufferSource, show, FULL_MASK } from './internal/bytes.js';
import { buildIov } from './internal/iov.js';
import { requestOperation } from './engine/operations.js';
import { inflight } from './engine/completions.js';
import type { ParamBlock } from './engine/param-blocks.js';
import { OWN_MEMH_MIN } from './engine/own-memh.js';
import { RequestGroup } from './engine/request-group.js';
import {
  kAbandon, kAborted, kBindSignal, kByWatchdog, kCreate, kDefer, kDetachable, kDetached, kEndpointClosed,
  kEndpointOpened, kEndpointRef, kFailDetached, kForceCloseAtExit, kHandle, kHandleFor, kKeyClosed,
  kKeyUnpacked, kLive, kMaxAmHeader, kParkIfHeld, kOnSettle, kOpSettled, kOwner, kProgressUntil,
  kReadStreamAhead, kRemoteAddress, kRequests, kStreamReceiver, kStreamStashed, kTagRecv, kUnpack,
  kWatched, kWireupFlush,
} from './internal/symbols.js';
import { StreamReceiver } from './endpoint/stream-receiver.js';
import { shutDownConnectSocket } from './endpoint/connect-abort.js';
import { kConnecting, kHeldByUcx, kUcxDone } from './internal/symbols.js';
import { COPY_MIN, COPY_THREAD_SENDS, copyForSend } from './internal/thread-send-copy.js';
import {
  ATOMIC_LABEL, ATOMIC_OPS, fetchBitwiseByCompareAndSwap, isFetchBitwiseBroken, postAtomic, toWord,
  atomicWidth,
} from './endpoint/atomics.js';
import { featureMismatchHint } from './internal/hints.js';
import { parseEndpointInfo, type EndpointTransport } from './internal/endpoint-info.js';
import { checkAmId } from './active-message.js';
import {
  kAdoptLane, kDrainLane, kDropLane, kGiveUpLane, kLaneStreamWait, kPullStream, kStreamReady, kLaneCall, kLaneMapped, kLaneWait, kOpenLane, kReservedAmId, kRetireLane,
} from './internal/symbols.js';
import { lanePoolOf } from './endpoint/lane-pool.js';
import { LANE_RELEASE_WAIT_MS, closeLaneBoth, releaseLane } from './endpoint/fast-lane.js';
import { AM_ID_FAST_LANE } from './am-ids.js';
import type { ReceiveOptions } from './worker.js';
import { RemoteKey } from './remote-key.js';
import type { Worker } from './worker.js';
import { tagMultiRecv, tagMultiSend, type TagMultiRecvOptions } from './ucxx/tag-multi.js';
import { FailureWatchdog } from './endpoint/failure-watchdog.js';
import { ucxxAmProbe, ucxxAmRecv, ucxxAmSend, type UcxxAmMessage, type UcxxAmSendOptions } from './ucxx/am.js';
import {
  InvalidArgumentError, ArgumentOutOfRangeError, INTERNAL, checkConstructorToken,
} from './errors/misuse.js';
import type { EndpointServices } from './worker/services.js';

// Keys of this module's own members (no other module uses them).
/** `endpoint[kOnPeerError](status)`: UCX reported the peer failed (called from inside progress). */
const kOnPeerError: unique symbol = Symbol('ucxx-ts.onPeerError');

export type { EndpointTransport, LaneUsage } from './internal/endpoint-info.js';
export type { BufferSource } from './internal/bytes.js';

/**
 * Options of `endpoint.streamRecv()`.
 *
 * @example
 * ```ts
 * const header = new Uint8Array(16);
 * await ep.streamRecv(header, { waitAll: true, signal: AbortSignal.timeout(1000) }); // all 16 bytes
 * ```
 */
export interface StreamRecvOptions extends ReceiveOptions {
  /** Complete only when the buffer is full. Default false: complete with whatever arrived. */
  waitAll?: boolean;
}

/** Options every operation takes. */
export interface OperationOptions {
  /**
   * Aborting settles the operation at once with CanceledError (see `Request.cancel()`: UCX 1.13 cannot
   * withdraw a send, RMA or flush, so it may still take effect, and its buffer stays referenced until
   * UCX is done). Costs nothing when absent.
   */
  signal?: AbortSignal;
}

/**
 * Options of the plain-UCP form of `endpoint.amSend(id, header, data, options)`.
 *
 * @example
 * ```ts
 * await ep.amSend(1, header, data, { protocol: 'rendezvous', reply: true });
 * ```
 */
export interface AmSendOptions extends OperationOptions {
  /** 'eager', 'rendezvous', or 'auto' (default: UCX decides by size). */
  protocol?: 'auto' | 'eager' | 'rendezvous';
  /** Let the receiver answer on `msg.replyEndpoint`. */
  reply?: boolean;
}

/** The remote atomic operations: `add`, `and`, `or`, `xor`, `swap` and compare-and-swap (`cswap`). */
export type AtomicOp = 'add' | 'and' | 'or' | 'xor' | 'swap' | 'cswap';
/** Each operation's name in errors (constants: no string built per operation). */
export interface AtomicOptions extends OperationOptions {
  /** Operand width: 64 for a bigint value, 32 for a number; when given, it must agree with the value. */
  width?: 32 | 64;
  /** Resolve with the previous value (always on for 'swap' and 'cswap'). */
  fetch?: boolean;
  /** For 'cswap': the value the word must have for `value` to be stored (of `value`'s type). */
  compare?: number | bigint;
}

/**
 * UCP's error-handling mode for an endpoint this process creates (the client side of a connection
 * decides it for both sides):
 * - 'peer' (UCP_ERR_HANDLING_MODE_PEER): UCX detects a failed peer (keepalive, transport errors) and
 *   fails what is pending. Shared memory refuses this mode (with UCX's defaults, which ucxx-ts keeps), so
 *   peers on one host talk over TCP, and RMA then needs the owner's progress.
 * - 'none' (UCP_ERR_HANDLING_MODE_NONE, UCX's own default): every transport, shared memory included,
 *   on every version. A closed connection is still reported on client-server endpoints (their
 *   connection manager sees the socket close), but a peer that stops responding is not detected.
 * - 'auto' (the default): the loaded UCX version's choice (`getDefaultErrorHandling()`). From 1.19 on
 *   'peer', the mode ucxx C++ and Python servers accept. On 1.13 'none' when the peer is on this host (a connect to an address of
 *   this machine other than this process's own listener, or a worker address whose shared-memory
 *   device is this host's), else 'peer'.
 * `true` and `false` mean 'peer' and 'none'. A server that accepts in a given mode refuses a client in
 * the other (the error names the option that reaches it); a ucxx-ts listener takes each client's mode.
 * docs/interoperability.md has the measurements.
 */
export type ErrorHandlingMode = 'auto' | 'peer' | 'none';

/** A peer's IP address and port (`endpoint.remoteAddress`, a listener's `ConnectionRequest`). */
export interface PeerAddress {
  /** The IP address, IPv4 dotted or IPv6 text. */
  readonly host: string;
  /** The TCP port. */
  readonly port: number;
}

/** Options of `worker.connect()`, `worker.connectToAddress()` and a listener's endpoints. */
export interface EndpointOptions {
  /** Peer failure detection: see ErrorHandlingMode. Default 'auto'; accepted endpoints take the client's. */
  errorHandling?: ErrorHandlingMode | boolean;
  /**
   * How long `close()` waits for UCX to finish closing, in ms (then leaves it to the worker). Default
   * 5000; at most 100 for an endpoint whose peer is gone, whose graceful close UCX ends only by its timers.
   */
  closeTimeout?: number;
  /**
   * `connect()` only: takes a fast lane when the listener is a ucxx-ts one on this host that offers it
   * (the default) and the connection is in PEER mode (the default from UCX 1.19 on): the data moves
   * over shared memory while the PEER-mode connection keeps detecting a failed peer
   * (`endpoint.fastLane`; docs/interoperability.md). Any other server sees an ordinary connection.
   * Default true; false turns it off.
   */
  fastLane?: boolean;
}

const K = CONSTANTS;

const endpoints = new SlotTable<Endpoint>();

/** @internal For getDiagnostics(): endpoints of this thread not yet closed. */
export function liveEndpointCount(): number {
  return endpoints.size;
}
let errorCallback: bigint | undefined;

function errorCallbackAddress(): bigint {
  errorCallback ??= registerCallback('epError', (id: number, _ep: bigint | null, status: number) => {
    endpoints.get(id)?.[kOnPeerError](status);
  });
  return errorCallback;
}

type State = 'open' | 'failed' | 'closing' | 'closed';

/**
 * What an endpoint whose peer released its lane still does (kLive): receives (served from what the lane
 * brought) and looking at it; nothing goes out.
 */
const PASSIVE = new Set(['tagRecv', 'streamRecv', 'streamRecvAvailable', 'getTransports']);

/**
 * How long operations in flight toward a peer that closed the connection may still complete (UCX can
 * report their completion after the close) before they reject with its failure (ms).
 */
const PEER_CLOSE_SETTLE_MS = 50;
/** How long a graceful close of a failed endpoint is progressed before it is left to UCX (ms). */
const FAILED_CLOSE_WAIT_MS = 100;
/** How long a close progresses for UCX to fail a never-answered connect whose socket it shut down (ms). */
const CONNECT_ABORT_WAIT_MS = 1000;
/** How long after a failed endpoint's close its operations UCX still holds are let go of (ms). */
const ORPHAN_AFTER_MS = 2000;


/** The events of an Endpoint. */
export interface EndpointEvents {
  /**
   * The peer failed while an operation of this endpoint waited on it; `close` follows. Not thrown
   * when nobody listens (unlike EventEmitter's 'error'): the operations reject with it anyway.
   */
  error: [error: UcxError];
  /** The endpoint is closed: by `close()`, by its peer (`closedByPeer`), or after a failure. */
  close: [];
}

/**
 * A connection to a remote worker: RMA, atomics, tag, stream and active messages, flush and close.
 * Made by `worker.connect()`, `worker.connectToAddress()` or a Listener.
 *
 * @example
 * ```ts
 * const ep = await worker.connect('127.0.0.1', port);
 * await ep.memPut(data, remoteKey, 0);
 * await ep.flush();
 * ```
 */
export class Endpoint extends EventEmitter<EndpointEvents> {
  /** The worker, as what an Endpoint may use of it (worker/services.ts). */
  readonly #worker: EndpointServices;
  /** The same worker, for the public `worker` getter. */
  readonly #owner: Worker;
  #handle: bigint | null;
  readonly #id: number;
  /**
   * Whether the endpoint is in UCP's PEER error mode, which a forced close needs; null for an accepted
   * endpoint, whose mode the client chose (a forced close is then tried and falls back).
   */
  readonly #peerMode: boolean | null;
  readonly #closeTimeout: number;
  readonly #peer: string;
  #state: State = 'open';
  #failure: UcxError | undefined;
  #closing: Promise<void> | undefined;
  /** Remote keys unpacked on this endpoint: destroyed before the endpoint. */
  readonly #keys = new Set<RemoteKey>();
  /** Their live `ucp_rkey_h` handles: the only ones the raw RMA form accepts. */
  readonly #rkeyHandles = new Set<bigint>();
  /** Receives posted through this endpoint (they are worker-wide in UCP): cancelled when it closes. */
  readonly #receives = new RequestGroup();
  /** The stream's receives, and the bytes that arrived with nobody waiting. */
  readonly #stream: StreamReceiver;
  /** The context's failureTimeout (ms; Infinity: no watchdog). */
  readonly #failureTimeout: number;
  /** What is in flight, and the failure watchdog over it (src/endpoint/failure-watchdog.ts). */
  readonly #watchdog: FailureWatchdog;
  /** The connect's wireup flush while the server has not answered it (worker.connect). */
  #connecting: AnyRequest | null = null;
  /**
   * The fast lane (src/endpoint/fast-lane.ts): a NONE-mode ucp_ep to the peer's worker that carries
   * every operation while #handle, in PEER mode, only detects the peer's failure; null without one.
   */
  #lane: bigint | null = null;
  /**
   * Whether #handle lives on the worker's failure detector (worker/detector.ts): a fast-lane connection
   * whose PEER endpoint only detects failures. Nothing but the lane's setup ever goes over it.
   */
  readonly #onDetector: boolean;
  /** The peer released the lane of an endpoint on the detector: it is closing, nothing more goes out. */
  #laneReleased = false;

  /** @internal (IllegalConstructorError from outside: use worker.connect(), connectToAddress() or a Listener) */
  static [kCreate](
    token: typeof INTERNAL, worker: Worker, workerHandle: bigint, options: EndpointOptions,
    errorMode: 'peer' | 'none' | null,
    fill: (params: StructBuffer<keyof typeof layouts.ucp_ep_params_t.offsets>) => void, peer: string,
    remote: SocketAddress | null = null,
  ): Endpoint {
    return new Endpoint(token, worker, workerHandle, options, errorMode, fill, peer, remote);
  }

  private constructor(
    token: typeof INTERNAL, worker: Worker, workerHandle: bigint, options: EndpointOptions,
    errorMode: 'peer' | 'none' | null,
    fill: (params: StructBuffer<keyof typeof layouts.ucp_ep_params_t.offsets>) => void, peer: string,
    remote: SocketAddress | null,
  ) {
    checkConstructorToken(token, 'Endpoint', 'worker.connect(), worker.connectToAddress() or a Listener');
    super();
    this.#worker = worker;
    this.#owner = worker;
    this.#onDetector = workerHandle !== worker[kHandle];
    this.#stream = new StreamReceiver({
      worker,
      openHandle: () => (this.#state === 'open' && !this.#onDetector ? this.#handle : null),
      stashed: () => worker[kStreamStashed](this),
      laneHandle: () => this.#lane,
      laneWaiting: (waiting) => worker[kLaneStreamWait](this, waiting),
    });
    this.#peer = peer;
    this.#remote = remote === null ? undefined : Object.freeze({ host: remote.host, port: remote.port });
    this.#peerMode = errorMode === null ? null : errorMode === 'peer';
    const closeTimeout = options.closeTimeout ?? 5000;
    if (typeof closeTimeout !== 'number' || !(closeTimeout >= 0)) {
      throw new ArgumentOutOfRangeError(`closeTimeout must be a non-negative number of ms, got ${show(closeTimeout)}`);
    }
    this.#closeTimeout = closeTimeout;
    this.#failureTimeout = worker.context.failureTimeout;
    this.#watchdog = new FailureWatchdog({
      isOpen: () => this.#state === 'open',
      probe: () => (this.#handle === null || (this.#laneReleased && this.#lane === null) ? null : this.flush()),
      stalled: (stalledMs) => this.#stalled(stalledMs),
    }, this.#failureTimeout);
    this.#id = endpoints.add(this);
    const params = new StructBuffer(layouts.ucp_ep_params_t);
    // The error callback in every mode: UCX reports what it does see (a closed client-server connection)
    // in NONE mode too. An accepted endpoint takes the client's mode, and naming one that differs makes
    // ucp_ep_create fail ("asymmetric endpoint configuration"), so it names none.
    params
      .setU64('field_mask', K.UCP_EP_PARAM_FIELD_ERR_HANDLER)
      .setPtr('err_handler.cb', errorCallbackAddress())
      .setPtr('err_handler.arg', BigInt(this.#id));
    if (errorMode !== null) {
      params
        .setU64('field_mask', K.UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | K.UCP_EP_PARAM_FIELD_ERR_HANDLER)
        .setU32('err_mode', Number(errorMode === 'peer' ? K.UCP_ERR_HANDLING_MODE_PEER : K.UCP_ERR_HANDLING_MODE_NONE));
    }
    fill(params);
    const out = new OutCell();
    const status = ucx().ucp_ep_create(workerHandle, params.buffer, out.reset());
    if (status !== 0) {
      endpoints.delete(this.#id);
      // In PEER mode UCX needs a transport with peer failure handling, which shared memory is not.
      const hint = status === UCS_ERR_UNREACHABLE && errorMode === 'peer'
        ? ": in errorHandling 'peer' no transport shared with the peer detects its failure (shared memory does not; " +
          "TCP and RDMA do): connect with { errorHandling: 'none' }, or give the Context a network transport"
        : '';
      throw errorFromStatus(status, `ucp_ep_create (${peer})${hint}`);
    }
    this.#handle = out.ptr();
    worker[kEndpointOpened](this, this.#handle as bigint);
    this.#syncRef();
    debug('endpoint #%d to %s created (error handling %s)', this.#id, peer, errorMode ?? 'as the client chose');
  }

  /** The worker this endpoint belongs to. */
  get worker(): Worker {
    return this.#owner;
  }

  /** True once the endpoint is closed, closing, or failed. */
  get closed(): boolean {
    return this.#state !== 'open';
  }

  /** False after `unref()`. */
  #refed = true;
  /** Counted by the worker among the endpoints that keep the process alive. */
  #keepsAlive = false;

  #syncRef(): void {
    const keep = this.#refed && this.#state === 'open';
    if (keep === this.#keepsAlive) return;
    this.#keepsAlive = keep;
    this.#worker[kEndpointRef](keep ? 1 : -1);
  }

  /**
   * Lets the open endpoint keep the process alive again after `unref()` (the default, as a socket: an
   * open endpoint keeps its process alive until it is closed, by either side, or fails). Returns the
   * endpoint.
   *
   * @example
   * ```ts
   * ep.unref();   // e.g. while only a background heartbeat uses it
   * ep.ref();
   * ```
   */
  ref(): this {
    this.#refed = true;
    this.#syncRef();
    return this;
  }

  /**
   * The open endpoint no longer keeps the process alive, as `socket.unref()`; an operation in flight on
   * it still does (unless its worker is unref'd). Returns the endpoint.
   *
   * @example
   * ```ts
   * const ep = (await worker.connect(host, port)).unref();
   * ```
   */
  unref(): this {
    this.#refed = false;
    this.#syncRef();
    return this;
  }

  /**
   * Whether the endpoint keeps the process alive while open (false after `unref()`).
   *
   * @example
   * ```ts
   * console.log(ep.hasRef()); // true by default
   * ```
   */
  hasRef(): boolean {
    return this.#refed;
  }

  /**
   * Stream bytes that arrived and wait for the next `streamRecv` (an accepted endpoint reads ahead until
   * its first one), as a socket's `readableLength`.
   *
   * ```ts
   * if (ep.streamBufferedBytes > 0) n = await ep.streamRecv(buffer); // completes at once
   * ```
   */
  get streamBufferedBytes(): number {
    return this.#stream.bufferedBytes;
  }

  /**
   * What the endpoint was made for, as its errors name it: `host:port` for `worker.connect()`,
   * `connection from host:port to listener :port` for an accepted one, `worker address` for
   * `connectToAddress()`.
   */
  get peer(): string {
    return this.#peer;
  }

  /**
   * The peer's socket address: the server's (as resolved) for `worker.connect()`, the client's for an
   * endpoint a listener accepted (from its connection request, `ucp_conn_request_query`: what a ucxx
   * server reads from the `ucp_conn_request_h` it is handed); undefined for `connectToAddress()`, or
   * where UCX could not tell.
   *
   * @example
   * ```ts
   * const listener = worker.listen({ port: 13337 }, (ep) => {
   *   console.log(`a client from ${ep.remoteAddress?.host}:${ep.remoteAddress?.port}`);
   * });
   * ```
   */
  get remoteAddress(): PeerAddress | undefined {
    return this.#remote;
  }

  readonly #remote: { readonly host: string; readonly port: number } | undefined;

  /** The error the peer failed with, if it did (undefined after a clean close: see `closedByPeer`). */
  get failure(): UcxError | undefined {
    return this.#closedByPeer ? undefined : this.#failure;
  }

  /**
   * True when the peer closed the connection and no operation of this endpoint failed with it (a
   * receive waiting is cancelled, not failed): the endpoint then emits 'close' without 'error'. UCX 1.13
   * reports a peer's close and a peer process that ended alike (the connection manager's socket
   * closed); RMA, atomics or a flush waiting for the peer then make it a failure either way.
   *
   * ```ts
   * ep.once('close', () => console.log(ep.closedByPeer ? 'the peer hung up' : 'closed'));
   * ```
   */
  get closedByPeer(): boolean {
    return this.#closedByPeer;
  }

  #closedByPeer = false;

  /**
   * The UCP error-handling mode this process created the endpoint in ('peer' or 'none', after resolving
   * `'auto'`), or undefined for an endpoint a listener accepted (its client chose the mode).
   *
   * @example
   * ```ts
   * const ep = await worker.connect('127.0.0.1', 13337);
   * console.log(ep.errorHandling); // 'peer' on UCX 1.19 and newer: ucxx's default
   * ```
   */
  get errorHandling(): 'peer' | 'none' | undefined {
    return this.#peerMode === null ? undefined : this.#peerMode ? 'peer' : 'none';
  }

  /**
   * Whether this endpoint's data moves over a fast lane: a NONE-mode connection to the peer's worker
   * (shared memory on one host) beside the PEER-mode one that detects the peer's failure. Two ucxx-ts
   * processes on one host set one up for a PEER-mode connection unless either side turns it off
   * (`fastLane: false`; docs/interoperability.md).
   *
   * @example
   * ```ts
   * const ep = await worker.connect('127.0.0.1', port, { errorHandling: 'peer' });
   * console.log(ep.fastLane); // true against a ucxx-ts listener of this host
   * ```
   */
  get fastLane(): boolean {
    return this.#lane !== null;
  }

  /**
   * The `ucp_ep_h` handle, for code that calls libucp itself: the fast lane's when the endpoint has one
   * (the one its data moves on).
   *
   * @example
   * ```ts
   * const handle = ep.getHandle(); // a ucp_ep_h, for code that calls libucp itself
   * ```
   */
  getHandle(): bigint {
    return this[kLive]('use');
  }

  /**
   * The transports this endpoint uses, one entry per lane (from `ucp_ep_print_info`): transport and
   * device, local and remote memory domain, and what the lane carries (`am`, `rma`, `rma_bw` for
   * rendezvous, `amo`, `keepalive`, `wireup`, `cm`, ...). Lanes settle once the connection is fully
   * established (after the first message exchange); an endpoint to another host uses network transports
   * only (`tcp`, or RDMA where there is some), one on the same host can use shared memory (`sysv`,
   * `posix`, `cma`).
   *
   * @example
   * ```ts
   * for (const { transport, device, usage } of ep.getTransports()) console.log(transport, device, usage);
   * // rdmacm  [ 'cm' ]                                    (connect()/listen(): the connection manager)
   * // tcp eth0 [ 'rma_bw', 'am', 'am_bw', 'wireup' ]     (another host)
   * ```
   */
  getTransports(): EndpointTransport[] {
    const ep = this[kLive]('getTransports');  // the fast lane's when there is one
    return [...parseEndpointInfo(captureStream((stream) => ucx().ucp_ep_print_info(ep, stream))).lanes];
  }

  /** @internal Throws ClosedError (with the peer failure as cause) unless the endpoint is usable. */
  [kLive](what: string): bigint {
    if (this.#state !== 'open' || this.#handle === null) {
      const err = new ClosedError(`the Endpoint (${this.#peer})`);
      // A clean close by the peer is a close, as `closedByPeer` says, not a failure.
      if (this.#byPeer()) err.message += ' (by its peer)';
      else if (this.#failure !== undefined) (err as { cause?: unknown }).cause = this.#failure;
      throw Object.assign(err, { operation: what });
    }
    this.#worker[kLive]('Endpoint');
    if (this.#laneReleased && this.#lane === null && !PASSIVE.has(what)) {
      // Over the detector's endpoint a message would reach a worker that serves nothing but the lane.
      throw Object.assign(new ClosedError(`the Endpoint (${this.#peer}) (its peer is closing it)`), { operation: what });
    }
    return this.#lane ?? this.#handle;
  }

  /**
   * @internal The client's side of the fast lane: the idle lane of an earlier connection to the same
   * server worker, or a new NONE-mode ucp_ep to the server's worker `address` (validated by the
   * caller), reporting its errors as this endpoint's.
   */
  [kOpenLane](address: Uint8Array): void {
    const workerHandle = this.#worker[kHandle];
    if (workerHandle === null || this.#state !== 'open' || this.#lane !== null) throw new ClosedError(`the Endpoint (${this.#peer})`);
    const pool = lanePoolOf(this.#worker);
    const idle = pool.take(address);
    if (idle !== null) {
      this[kAdoptLane](idle);
      return;
    }
    const params = new StructBuffer(layouts.ucp_ep_params_t);
    params
      .setU64('field_mask', K.UCP_EP_PARAM_FIELD_ERR_HANDLER | K.UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | K.UCP_EP_PARAM_FIELD_REMOTE_ADDRESS)
      .setPtr('err_handler.cb', errorCallbackAddress())
      .setPtr('err_handler.arg', BigInt(this.#id))
      .setU32('err_mode', Number(K.UCP_ERR_HANDLING_MODE_NONE))
      .setPtr('address', addressOf(address));
    const out = new OutCell();
    const status = ucx().ucp_ep_create(workerHandle, params.buffer, out.reset());
    if (status !== 0) throw errorFromStatus(status, `ucp_ep_create (fast lane to ${this.#peer})`);
    const lane = out.ptr() as bigint;
    pool.opened(lane, address);
    this[kAdoptLane](lane);
  }

  /** @internal The server's side of the fast lane: the ucp_ep UCX made for the client's lane. */
  [kAdoptLane](lane: bigint): void {
    this.#lane = lane;
    this.#worker[kLaneMapped](this, lane, true);
    debug('endpoint #%d to %s: fast lane %s', this.#id, this.#peer, lane.toString(16));
  }

  /** @internal The lane is not taken after all (the server refused it late): idle again, data stays on #handle. */
  [kDropLane](): void {
    const lane = this.#lane;
    if (lane === null) return;
    this.#lane = null;
    this.#worker[kLaneMapped](this, lane, false);
    lanePoolOf(this.#worker).release(lane);
    this.#stream.laneGone();
  }

  /**
   * @internal The peer released the lane: from now on this endpoint's operations go over #handle, or,
   * on the failure detector, nowhere (they throw ClosedError: the peer is closing). Says whether operations of this endpoint are still in flight ('busy'; null: not this endpoint's lane).
   */
  [kGiveUpLane](lane: bigint): 'idle' | 'busy' | null {
    if (this.#lane !== lane) return null;
    // The peer flushed the lane before it said BYE: every byte it sent there is here.
    this.#stream.drain(lane);
    this.#lane = null;
    this.#laneReleased = this.#onDetector;
    this.#stream.laneGone();
    this.#worker[kLaneMapped](this, lane, false);
    // Keys unpacked on the lane are of no use on the PEER endpoint; the peer is closing anyway.
    for (const key of [...this.#keys]) key.close();
    debug('endpoint #%d to %s: the peer released the fast lane', this.#id, this.#peer);
    return this.#watchdog.busy ? 'busy' : 'idle';
  }

  /** @internal Stream bytes UCX holds on `lane` go to the stash: before the lane idles or closes. */
  [kDrainLane](lane: bigint): void {
    this.#stream.drain(lane);
  }

  /** @internal Whether stream bytes wait to be taken (streamReadyEndpoints), the lane's included. */
  [kStreamReady](): boolean {
    return this.#stream.hasBytes();
  }

  /** @internal Takes the stream bytes UCX holds on the lane (the worker's, after progress). */
  [kPullStream](): void {
    this.#stream.pullLane();
  }

  /** @internal A flush (`header` null) or a fast-lane message on `lane`, completed within `ms`. */
  async [kLaneCall](lane: bigint, header: Uint8Array | null, ms: number): Promise<boolean> {
    if (this.#worker[kHandle] === null) return false;
    const requests = this.#worker[kRequests];
    let request: AnyRequest;
    if (header === null) {
      const block = requests.params.send;
      request = requests.void(requests.slot(block), ucx().ucp_ep_flush_nbx(lane, block.address), 'fast lane flush', null);
    } else {
      const block = requests.params.amSend;
      block.setFlags(Number(K.UCP_AM_SEND_FLAG_REPLY | K.UCP_AM_SEND_FLAG_EAGER));
      request = requests.void(requests.slot(block),
        ucx().ucp_am_send_nbx(lane, AM_ID_FAST_LANE, header, header.byteLength, null, 0, block.address), 'fast lane message', header);
    }
    if (!request.completed) await this[kLaneWait](() => request.completed, ms);
    if (!request.completed) {
      request.promise.catch(() => undefined);
      return false;
    }
    return request.status === 0;
  }

  /** @internal Progresses the worker until `done()` or `ms` have passed. */
  async [kLaneWait](done: () => boolean, ms: number): Promise<boolean> {
    if (!done() && this.#worker[kHandle] !== null) await this.#worker[kProgressUntil](done, ms);
    return done();
  }

  /** @internal Closes `lane` in UCX (NONE mode: graceful only, and UCX keeps it until the worker goes). */
  async [kRetireLane](lane: bigint, failed = false): Promise<void> {
    lanePoolOf(this.#worker).retire(lane);
    if (this.#worker[kHandle] === null) return;
    this.#stream.drain(lane);
    const requests = this.#worker[kRequests];
    const block = requests.params.close;
    block.setFlags(0);
    const request = requests.open<void>(block, ResultKind.Void, 'endpoint close', null);
    const ptr = failed ? withUcxLogsQuiet(() => ucx().ucp_ep_close_nbx(lane, block.address)) : ucx().ucp_ep_close_nbx(lane, block.address);
    requests.track(request, block, ptr);
    if (request.completed) return;
    await this.#worker[kProgressUntil](() => request.completed, failed ? Math.min(this.#closeTimeout, FAILED_CLOSE_WAIT_MS) : this.#closeTimeout);
  }

  /**
   * Writes `source` into remote memory.
   *
   * - `memPut(source, remoteKey, offset = 0)`: at `offset` in the key's region; an `offset + length`
   *   outside the region is a RangeError, raised before anything reaches UCX.
   * - `memPut(source, remoteAddress, rkeyHandle)`: ucxx's raw form. `rkeyHandle` must be the
   *   `getHandle()` of a live RemoteKey unpacked on this endpoint (any other value is an
   *   InvalidArgumentError); the address is NOT checked against the key's region, nor the access
   *   rights, as in ucxx: an address outside the region writes or reads wherever it points.
   *
   * Completion is local (the source may be reused); `flush()` makes the data visible at the target.
   *
   * @example
   * ```ts
   * await ep.memPut(new Uint8Array([1, 2, 3]), key, 64);
   * await ep.flush();
   * ```
   */
  memPut(source: BufferSource, remoteKey: RemoteKey, offset?: number | bigint, options?: OperationOptions): Request<void>;
  memPut(source: BufferSource, remoteAddress: bigint, rkeyHandle: bigint, options?: OperationOptions): Request<void>;
  @requestOperation
  memPut(source: BufferSource, target: RemoteKey | bigint, extra?: number | bigint, options?: OperationOptions): Request<void> {
    return this.#rma(true, source, target, extra, options);
  }

  /**
   * Reads remote memory into `destination`; the same forms and checks as `memPut`.
   *
   * @example
   * ```ts
   * const back = new Uint8Array(3);
   * await ep.memGet(back, key, 64);
   * ```
   */
  memGet(destination: BufferSource, remoteKey: RemoteKey, offset?: number | bigint, options?: OperationOptions): Request<void>;
  memGet(destination: BufferSource, remoteAddress: bigint, rkeyHandle: bigint, options?: OperationOptions): Request<void>;
  @requestOperation
  memGet(destination: BufferSource, target: RemoteKey | bigint, extra?: number | bigint, options?: OperationOptions): Request<void> {
    return this.#rma(false, destination, target, extra, options);
  }

  #rma(
    put: boolean, memory: BufferSource, target: RemoteKey | bigint, extra: number | bigint | undefined,
    options: OperationOptions | undefined,
  ): Request<void> {
    const what = put ? 'memPut' : 'memGet';
    const ep = this[kLive](what);
    const length = byteLengthOf(memory, put ? 'memPut source' : 'memGet destination');
    memory = ffiMemory(memory);
    let address: bigint | number;
    let rkey: bigint;
    if (target instanceof RemoteKey) {
      rkey = target[kHandleFor](this, put ? 'write' : 'read');
      address = target[kRemoteAddress](extra ?? 0, length);
    } else if (typeof target === 'bigint') {
      if (typeof extra !== 'bigint') {
        throw new InvalidArgumentError(`${what}(buffer, remoteAddress, rkeyHandle): rkeyHandle must be a bigint handle`);
      }
      // UCX dereferences the handle: only a live key unpacked on this endpoint may reach it.
      if (!this.#rkeyHandles.has(extra)) {
        throw new InvalidArgumentError(
          `${what}(buffer, remoteAddress, rkeyHandle): ${extra} is not the handle of a live RemoteKey unpacked on this endpoint`,
        );
      }
      address = toU64(target, 'remoteAddress');
      rkey = extra;
    } else {
      throw new InvalidArgumentError(`${what}: the target must be a RemoteKey or a bigint remote address`);
    }
    const signal = options?.signal;
    if (signal?.aborted === true) return this.#worker[kAborted](what, signal);
    const requests = this.#worker[kRequests];
    const block = requests.params.send;
    const fn = put ? ucx().ucp_put_nbx : ucx().ucp_get_nbx;
    const request = requests.void(requests.slot(block), fn(ep, memory, length, address, rkey, block.address), what, memory);
    return this.#posted(request, true, signal);
  }

  /**
   * Sends a tag message: plain `ucp_tag_send_nbx`, no framing, so any UCP peer receives exactly these
   * bytes. A list of buffers is sent as one message (UCX iov). Completes when the buffers may be reused.
   *
   * @example
   * ```ts
   * await ep.tagSend(Buffer.from('hi'), 7n);
   * await ep.tagSend([header, body], 8n);
   * ```
   */
  @requestOperation
  tagSend(buffer: BufferSource | readonly BufferSource[], tag: bigint | number, options?: OperationOptions): Request<void> {
    return this.#tagSend(buffer, tag, false, options);
  }

  /**
   * Like `tagSend`, but completes only once the receiver has matched the message with a receive
   * (`ucp_tag_send_sync_nbx`).
   *
   * @example
   * ```ts
   * await ep.tagSendSync(Buffer.from('ready'), 5n); // resolves once the peer's receive has matched it
   * ```
   */
  @requestOperation
  tagSendSync(buffer: BufferSource | readonly BufferSource[], tag: bigint | number, options?: OperationOptions): Request<void> {
    return this.#tagSend(buffer, tag, true, options);
  }

  #tagSend(
    buffer: BufferSource | readonly BufferSource[], tag: bigint | number, sync: boolean, options: OperationOptions | undefined,
  ): Request<void> {
    const what = sync ? 'tagSendSync' : 'tagSend';
    const ep = this[kLive](what);
    const t = toTag(tag, 'tag');
    const worker = this.#worker;
    const requests = worker[kRequests];
    let data: unknown = buffer;
    let count: number;
    let block: ParamBlock;
    if (Array.isArray(buffer)) {
      const iov = buildIov(buffer, sync ? 'tagSendSync buffers' : 'tagSend buffers');
      data = iov.array;
      count = iov.count;
      block = requests.params.sendIov;
      buffer = iov.parts;
    } else {
      // Constant strings: a template literal here would build a string per send.
      count = byteLengthOf(buffer, sync ? 'tagSendSync buffer' : 'tagSend buffer');
      data = ffiMemory(buffer);
      block = requests.params.send;
    }
    const signal = options?.signal;
    if (signal?.aborted === true) return worker[kAborted](what, signal);
    const fn = sync ? ucx().ucp_tag_send_sync_nbx : ucx().ucp_tag_send_nbx;
    if (COPY_THREAD_SENDS) {
      const parts = Array.isArray(buffer) ? buffer as Uint8Array[] : [asBytes(buffer, what)];
      let bytes = 0;
      for (const part of parts) bytes += part.byteLength;
      const contig = requests.params.send;
      if (bytes >= COPY_MIN) return this.#sendFromCopy(parts, bytes, contig, (address, params) => fn(ep, address, bytes, t, params), what, null, signal);
    }
    const keep = data === buffer ? buffer : [buffer, data];
    const own = this.#ownMemhBlock(block, count);
    if (own !== null) {
      const request = this.#sendWithOwnMemh(data as Uint8Array, addressOf(data as Uint8Array), count, own, (address, params) => fn(ep, address, count, t, params), what, keep, signal, null);
      if (request !== null) return request;
    }
    const request = requests.void(requests.slot(block), fn(ep, data as Buffer, count, t, block.address), what, keep);
    return this.#posted(request, false, signal);
  }

  /**
   * Receives a tag message matching `tag` under `tagMask`. UCP matches tags per worker, not per endpoint
   * (as in ucxx): this is `worker.tagRecv` whose request is also cancelled when this endpoint closes.
   *
   * @example
   * ```ts
   * const buffer = new Uint8Array(4096);
   * const { length } = await ep.tagRecv(buffer, 42n, undefined, { signal: AbortSignal.timeout(5000) });
   * const message = buffer.subarray(0, length);
   * ```
   */
  @requestOperation
  tagRecv(
    buffer: BufferSource | readonly BufferSource[], tag: bigint | number, tagMask: bigint | number = FULL_MASK,
    options: ReceiveOptions = {},
  ): Request<TagRecvInfo> {
    options = optionsObject(options, 'tagRecv options');
    // Tag messages live in the worker: one that arrived before the peer closed or failed is still
    // there, and the receive completes with it (or fails as UCX fails its rendezvous). While a peer's
    // close settles, a receive waits with the others for what is still on its way in. Only a receive
    // that nothing can match fails, with ClosedError.
    if (this.#state !== 'open' && this.#failure !== undefined) {
      if (this.#state === 'failed' && this.#peerClosed) {
        return this.#received(this.#worker[kTagRecv](buffer, tag, tagMask, this.#receives, options.signal));
      }
      if (this.#worker.tagProbe(tag, tagMask) !== null) return this.#worker[kTagRecv](buffer, tag, tagMask, null, options.signal);
    }
    this[kLive]('tagRecv');
    return this.#received(this.#worker[kTagRecv](buffer, tag, tagMask, this.#receives, options.signal));
  }

  /**
   * A receive of this endpoint that UCX fails with the connection's reset (a message this peer sent
   * that can no longer arrive whole) makes the peer's close a failure, as a send's does.
   */
  #received(request: Request<TagRecvInfo>): Request<TagRecvInfo> {
    if (request.completed) {
      if (request.status === UCS_ERR_CONNECTION_RESET) this.#opsFailed++;
    } else {
      request[kOnSettle] = this.#receiveSettled;
    }
    return request;
  }

  readonly #receiveSettled = (status: number): void => {
    if (status === UCS_ERR_CONNECTION_RESET) this.#opsFailed++;
  };

  /**
   * Sends bytes on the endpoint's stream (`ucp_stream_send_nbx`): an ordered byte stream with no
   * message boundaries, as TCP. Completes when the buffer may be reused. An empty buffer sends nothing
   * and completes at once.
   *
   * @example
   * ```ts
   * const header = Buffer.alloc(4);
   * header.writeUInt32LE(body.byteLength);
   * ep.streamSend(header);                 // bytes arrive in order: no need to wait in between
   * await ep.streamSend(body);
   * ```
   */
  @requestOperation
  streamSend(buffer: BufferSource, options?: OperationOptions): Request<void> {
    const ep = this[kLive]('streamSend');
    const count = byteLengthOf(buffer, 'streamSend buffer');
    // Nothing to send, and an empty stream message makes a UCX 1.13 receiver assert (stream_recv.c:442;
    // docs/ucx-1.13-bugs/stream_empty_message.c): complete at once.
    if (count === 0) return COMPLETED;
    const worker = this.#worker;
    const signal = options?.signal;
    if (signal?.aborted === true) return worker[kAborted]('streamSend', signal);
    const requests = worker[kRequests];
    const block = requests.params.send;
    const request = requests.void(requests.slot(block), ucx().ucp_stream_send_nbx(ep, ffiMemory(buffer), count, block.address), 'streamSend', buffer);
    return this.#posted(request, false, signal);
  }

  /**
   * Receives stream bytes into `buffer`; resolves with how many arrived (at least 1). With
   * `waitAll: true` it completes only when the buffer is full.
   *
   * @example
   * ```ts
   * const n = await ep.streamRecv(buffer);
   * ```
   */
  @requestOperation
  streamRecv(buffer: BufferSource, options: StreamRecvOptions = {}): Request<number> {
    options = optionsObject(options, 'streamRecv options');
    const bytes = asBytes(buffer, 'streamRecv buffer');
    if (bytes.byteLength === 0) throw new ArgumentOutOfRangeError('streamRecv needs a buffer of at least 1 byte');
    if (this.#state !== 'open') {
      // The peer is gone, but bytes it sent before were read ahead: they are still the stream's.
      const served = this.#stream.recvClosed(bytes);
      if (served !== null) return served;
      // Closing: more may still come out of UCX; the receive is settled when the close completes.
      if (this.#state !== 'closed') return this.#stream.recv(bytes, options.waitAll === true, options.signal);
    }
    this[kLive]('streamRecv');
    if (options.signal?.aborted === true) return this.#worker[kAborted]('streamRecv', options.signal);
    return this.#stream.recv(bytes, options.waitAll === true, options.signal);
  }

  /**
   * Copies into `buffer`, without waiting, the stream bytes that have arrived, up to its length; returns
   * how many (0 when none has). It waits for nothing: what it takes has arrived (read ahead, for an
   * accepted or connecting endpoint, or held by UCX), and a part that does not fit stays for the next
   * receive, in order. With `worker.streamReadyEndpoints()` it serves
   * many endpoints from one loop, as a socket server does with epoll. A `streamRecv` still waiting on
   * this endpoint is an InvalidStateError (the bytes go to it first). After the endpoint closed, it
   * returns what was read ahead before.
   *
   * @example
   * ```ts
   * for (const ep of worker.streamReadyEndpoints()) {
   *   const n = ep.streamRecvAvailable(buffer);
   *   consume(ep, buffer.subarray(0, n));
   * }
   * ```
   */
  streamRecvAvailable(buffer: BufferSource): number {
    const bytes = asBytes(buffer, 'streamRecvAvailable buffer');
    if (bytes.byteLength === 0) throw new ArgumentOutOfRangeError('streamRecvAvailable needs a buffer of at least 1 byte');
    if (this.#state !== 'open') return this.#stream.takeStash(bytes);
    this[kLive]('streamRecvAvailable');
    return this.#stream.takeAvailable(bytes);
  }

  /**
   * @internal Keeps a stream receive posted from now on (accepted and connecting endpoints of a context
   * with the stream feature): see StreamReceiver.
   */
  [kReadStreamAhead](): void {
    this.#stream.readAhead();
  }

  /** @internal The stream receiver, for the Duplex. */
  get [kStreamReceiver](): StreamReceiver {
    return this.#stream;
  }

  /**
   * The incoming stream as an async iterator of chunks (each a new Uint8Array of up to `chunkSize`
   * bytes, default 64 KiB, as they arrived: never copied again, never reused), until the endpoint
   * closes or `signal` aborts. When the peer closes, every byte it sent before is yielded first.
   *
   * @example
   * ```ts
   * for await (const chunk of ep.streamChunks()) process(chunk);
   * ```
   */
  async *streamChunks(options: { chunkSize?: number; signal?: AbortSignal } = {}): AsyncGenerator<Uint8Array, void, undefined> {
    options = optionsObject(options, 'streamChunks options');
    const chunkSize = options.chunkSize ?? 64 * 1024;
    if (!Number.isSafeInteger(chunkSize) || chunkSize < 1) throw new ArgumentOutOfRangeError(`chunkSize must be >= 1, got ${show(chunkSize)}`);
    const { signal } = options;
    const stream = this.#stream;
    while (signal?.aborted !== true) {
      let chunk = stream.takeChunk(chunkSize);
      if (chunk === null) {
        if (stream.ended) return;
        try {
          chunk = await stream.recvChunk(chunkSize, signal).promise;
        } catch (err) {
          if (err instanceof ClosedError || (err as UcxError).status === UCS_ERR_CANCELED) return;
          throw err;
        }
        if (chunk.byteLength === 0) return;
      }
      yield chunk;
    }
  }

  /**
   * Sends an active message, in one of two forms:
   *
   * - `amSend(id, header, data, options?)`: plain UCP (`ucp_am_send_nbx`): `id` selects the receiver's
   *   handler, `header` (may be null) travels with the data and is kept alive until completion (UCX 1.13
   *   reads it late). `protocol` forces 'eager' or 'rendezvous' (default 'auto'); `reply: true` lets the
   *   receiver answer on `msg.replyEndpoint`. With rendezvous the request reports the status the
   *   receiver decided.
   * - `amSend(data, options?)`: ucxx's form (docs/ucxx-protocols.md): AM id 0 with ucxx's header, so a ucxx
   *   peer's `amRecv()` (or the receiver callback named by `receiverCallbackInfo`) gets it.
   *
   * @example
   * ```ts
   * await ep.amSend(1, Buffer.from('get-key'), null, { reply: true });
   * await ep.amSend(data, { userHeader: Buffer.from('meta'), receiverCallbackInfo: { owner: 'app', id: 1n } });
   * ```
   */
  amSend(id: number, header: BufferSource | null, data: BufferSource | readonly BufferSource[] | null, options?: AmSendOptions): Request<void>;
  amSend(data: BufferSource | null, options?: UcxxAmSendOptions): Request<void>;
  @requestOperation
  amSend(
    first: number | BufferSource | null, second?: BufferSource | null | UcxxAmSendOptions,
    data: BufferSource | readonly BufferSource[] | null = null, options: AmSendOptions = {},
  ): Request<void> {
    if (typeof first !== 'number') return ucxxAmSend(this, first, second as UcxxAmSendOptions | undefined);
    const id = first;
    const header = (second ?? null) as BufferSource | null;
    options = optionsObject(options, 'amSend options');
    const ep = this[kLive]('amSend');
    checkAmId(id, (options as { [kReservedAmId]?: boolean })[kReservedAmId] === true);
    const headerLength = header === null ? 0 : byteLengthOf(header, 'amSend header');
    if (headerLength > 0 && headerLength > this.#worker[kMaxAmHeader]()) {
      throw new ArgumentOutOfRangeError(
        `amSend: the header has ${headerLength} bytes; this UCX accepts at most ${this.#worker[kMaxAmHeader]()}`,
      );
    }
    const iov = Array.isArray(data) ? buildIov(data as readonly BufferSource[], 'amSend data buffers') : null;
    const count = iov !== null ? iov.bytes : data === null ? 0 : byteLengthOf(data as BufferSource, 'amSend data');
    let flags = options.reply === true ? Number(K.UCP_AM_SEND_FLAG_REPLY) : 0;
    switch (options.protocol ?? 'auto') {
      case 'auto':
        break;
      case 'eager':
        flags |= Number(K.UCP_AM_SEND_FLAG_EAGER);
        break;
      case 'rendezvous':
        flags |= Number(K.UCP_AM_SEND_FLAG_RNDV);
        break;
      default:
        throw new InvalidArgumentError(`protocol must be 'auto', 'eager' or 'rendezvous', got ${show(options.protocol)}`);
    }
    const worker = this.#worker;
    const signal = options.signal;
    if (signal?.aborted === true) return worker[kAborted]('amSend', signal);
    const requests = worker[kRequests];
    const block = requests.params.amSend;
    block.setFlags(flags);
    if (iov !== null) {
      // A list of buffers (UCP_DATATYPE_IOV): the receiver gets them as one message. Copied first where a
      // contiguous send would be (a thread's send, a handle of ucxx-ts's own on UCX 1.20 in PEER mode).
      if ((COPY_THREAD_SENDS && count >= COPY_MIN) || this.#ownMemhBlock(block, count) !== null) {
        return this.#sendFromCopy(iov.parts as Uint8Array[], count, block,
          (address, params) => ucx().ucp_am_send_nbx(ep, id, ffiMemory(header), headerLength, address, count, params), 'amSend', header, signal);
      }
      const iovBlock = requests.params.amSendIov;
      iovBlock.setFlags(flags);
      const request = requests.void(requests.slot(iovBlock),
        ucx().ucp_am_send_nbx(ep, id, ffiMemory(header), headerLength, iov.array, iov.count, iovBlock.address), 'amSend', [header, iov.parts, iov.array]);
      return this.#posted(request, false, signal);
    }
    if (COPY_THREAD_SENDS && data !== null && (count >= COPY_MIN || (flags & Number(K.UCP_AM_SEND_FLAG_RNDV)) !== 0)) {
      return this.#sendFromCopy([asBytes(data as BufferSource, 'amSend data')], count, block,
        (address, params) => ucx().ucp_am_send_nbx(ep, id, header, headerLength, address, count, params), 'amSend', header, signal);
    }
    const contiguous = data as BufferSource | null;
    const keep = header === null ? contiguous : [header, contiguous];
    const own = contiguous === null ? null : this.#ownMemhBlock(block, count);
    if (own !== null) {
      own.setFlags(flags);
      const memory = ffiMemory(contiguous) as Uint8Array;
      const request = this.#sendWithOwnMemh(memory, addressOf(memory), count, own,
        (address, params) => ucx().ucp_am_send_nbx(ep, id, ffiMemory(header), headerLength, address, count, params), 'amSend', keep, signal, null);
      if (request !== null) return request;
    }
    const request = requests.void(requests.slot(block), ucx().ucp_am_send_nbx(ep, id, ffiMemory(header), headerLength, ffiMemory(contiguous), count, block.address), 'amSend', keep);
    return this.#posted(request, false, signal);
  }

  /**
   * The parameter block with a memory handle that a contiguous send of `count` bytes with `block` takes
   * on this endpoint, or null: where the profile's `peerRendezvousOwnMemh` applies (UCX 1.20), a send
   * that may go by rendezvous on an endpoint that may be in PEER mode (an accepted one's mode is not
   * known here) gets a handle of ucxx-ts's own (src/engine/own-memh.ts). Not a send on a fast lane: a
   * NONE-mode ucp_ep, which UCX 1.20.1 purges without the crash, and where the handle cost bulk sends
   * about a tenth of their speed (docs/interoperability.md).
   */
  #ownMemhBlock(block: ParamBlock, count: number): ParamBlock | null {
    const requests = this.#worker[kRequests];
    if (requests.ownMemh === null || this.#peerMode === false || this.#lane !== null || count < OWN_MEMH_MIN) return null;
    const params = requests.params;
    return block === params.send ? params.sendOwnMemh : block === params.amSend ? params.amSendOwnMemh : null;
  }

  /**
   * Posts a send of `count` bytes at `address` (the first byte of `memory`, an application buffer, or
   * of native memory when null) with `block` (one of the OwnMemh blocks, flags written) and a handle for
   * it: the application buffer's kept one (OwnMemh.acquire), or one mapped for this send and unmapped
   * (then `after` run) once UCX is done. Null where UCX refused the mapping (the caller posts it without).
   */
  #sendWithOwnMemh(
    memory: Uint8Array | null, address: bigint, count: number, block: ParamBlock, post: (address: bigint, params: bigint) => Ptr,
    what: string, keep: unknown, signal: AbortSignal | undefined, after: (() => void) | null,
  ): Request<void> | null {
    const requests = this.#worker[kRequests];
    const own = requests.ownMemh as NonNullable<typeof requests.ownMemh>;
    const handle = memory !== null ? own.acquire(memory, address, count) : own.mapOnce(address, count);
    if (handle === null) return null;
    block.setMemh(handle.memh);
    const done = after === null ? handle.done : (): void => {
      handle.done();
      after();
    };
    const request = requests.void(requests.slot(block), post(address, block.address), what, keep);
    if (request.completed) {
      done(); // UCX holds nothing: done at once, or failed, or completed inside the call
      return request;
    }
    request[kUcxDone] = done;
    return this.#inFlight(request, false, signal);
  }

  /**
   * A send of a `worker_threads` thread, posted from a copy that outlives the thread and that UCX's
   * completion frees (src/internal/thread-send-copy.ts).
   */
  #sendFromCopy(
    parts: readonly Uint8Array[], bytes: number, block: ParamBlock, post: (address: bigint, params: bigint) => Ptr, what: string,
    keep: unknown, signal: AbortSignal | undefined,
  ): Request<void> {
    const requests = this.#worker[kRequests];
    const copy = copyForSend(parts, bytes);
    const own = this.#ownMemhBlock(block, bytes);
    if (own !== null) {
      own.setFlags(block === requests.params.amSend ? block.struct.getU32('flags') : 0);
      const sent = this.#sendWithOwnMemh(null, copy.address, bytes, own, post, what, keep, signal, copy.free);
      if (sent !== null) return sent;
    }
    const request = requests.void(requests.slot(block), post(copy.address, block.address), what, keep);
    if (request.completed) {
      copy.free(); // UCX holds nothing: done at once, or failed, or completed inside the call
      return request;
    }
    request[kUcxDone] = copy.free;
    return this.#inFlight(request, false, signal);
  }

  /**
   * The next ucxx active message from this endpoint (sent with ucxx's `amSend`, or the ucxx form of
   * `amSend` above): messages are kept per endpoint, in arrival order, until taken. A Request, as ucxx's
   * `amRecv`: it fails with the receive's error (as ucxx's request status), or with CanceledError on
   * `cancel()`, when `signal` aborts or when the endpoint closes; a message that arrives after a
   * cancelled receive waits for the next one.
   *
   * @example
   * ```ts
   * const { data, userHeader } = await ep.amRecv();
   * const pending = ep.amRecv();
   * pending.cancel(); // CanceledError
   * ```
   */
  @requestOperation
  amRecv(options?: { signal?: AbortSignal }): Request<UcxxAmMessage> {
    return ucxxAmRecv(this, options);
  }
  /**
   * Whether a ucxx active message from this endpoint has arrived and waits for `amRecv` (ucxx's
   * `amProbe`); progresses the worker once first. A rendezvous message's data may still be on its way:
   * `amRecv` resolves when it is here.
   *
   * @example
   * ```ts
   * if (ep.amProbe()) handle(await ep.amRecv());
   * ```
   */
  amProbe(): boolean {
    return ucxxAmProbe(this);
  }


  /**
   * Sends `buffers` as one ucxx tagMulti message (ucxx's framing: see docs/ucxx-protocols.md): header(s)
   * announcing the frame count and sizes, then each buffer, all on `tag`. A ucxx peer's `tagMultiRecv`
   * (or ours) receives them without knowing either in advance. At least one buffer. Completes when all
   * are sent.
   *
   * @example
   * ```ts
   * await ep.tagMultiSend([meta, body, Buffer.alloc(0)], 7n);
   * ```
   */
  @requestOperation
  tagMultiSend(buffers: readonly BufferSource[], tag: bigint | number): Request<void> {
    return tagMultiSend(this, buffers, tag);
  }

  /**
   * Receives one ucxx tagMulti message matching `tag` under `tagMask` (tags match per worker, as in
   * ucxx; the receives are cancelled when this endpoint closes). A Request like every operation's
   * (`completed`, `value`, `cancel()`, `{ signal }`); resolves with the frames; a malformed header or
   * frame is a UcxxHeaderFormatError.
   *
   * @example
   * ```ts
   * const [meta, body] = await ep.tagMultiRecv(7n);
   * const pending = ep.tagMultiRecv(8n);          // manual progress: poll it
   * while (!pending.completed) worker.progress();
   * ```
   */
  @requestOperation
  tagMultiRecv(tag: bigint | number, tagMask?: bigint | number, options?: TagMultiRecvOptions): Request<Uint8Array[]> {
    return tagMultiRecv(this.#owner, this, tag, tagMask, options);
  }

  /**
   * A remote atomic operation on the 32- or 64-bit word at `offset` in the key's region (beyond ucxx).
   * `op`: 'add', 'and', 'or', 'xor', 'swap' or 'cswap'. The value's type is the word's width: a bigint
   * works on a 64-bit word, a number on a 32-bit one (so `1` adds to a 32-bit word: a 64-bit counter
   * takes `1n`). `options.width`, when given, must agree (an InvalidArgumentError otherwise), and so
   * must `options.compare`. With `fetch: true` (always for 'swap'/'cswap') it resolves with the previous
   * value, of the value's type; without, with nothing. 'cswap' stores `value` when the word equals
   * `options.compare`. A misaligned offset, or one outside the region, is a RangeError.
   *
   * @example
   * ```ts
   * const before: bigint = await ep.atomic('add', key, 0, 1n, { fetch: true }); // 64-bit word
   * await ep.atomic('or', key, 8, 0b100);                                         // 32-bit, no result
   * ```
   */
  atomic(op: 'swap' | 'cswap', remoteKey: RemoteKey, offset: number | bigint, value: bigint, options?: AtomicOptions): Request<bigint>;
  /** 'swap' and 'cswap' on a 32-bit word: resolve with the previous value, a number. */
  atomic(op: 'swap' | 'cswap', remoteKey: RemoteKey, offset: number | bigint, value: number, options?: AtomicOptions): Request<number>;
  /** A fetching operation on a 64-bit word: resolves with the previous value, a bigint. */
  atomic(op: AtomicOp, remoteKey: RemoteKey, offset: number | bigint, value: bigint, options: AtomicOptions & { fetch: true }): Request<bigint>;
  /** A fetching operation on a 32-bit word: resolves with the previous value, a number. */
  atomic(op: AtomicOp, remoteKey: RemoteKey, offset: number | bigint, value: number, options: AtomicOptions & { fetch: true }): Request<number>;
  /** A non-fetching 'add', 'and', 'or' or 'xor': resolves with nothing. */
  atomic(op: 'add' | 'and' | 'or' | 'xor', remoteKey: RemoteKey, offset: number | bigint, value: number | bigint, options?: AtomicOptions & { fetch?: false }): Request<void>;
  /** Any operation, when the types are known only at run time. */
  atomic(op: AtomicOp, remoteKey: RemoteKey, offset: number | bigint, value: number | bigint, options?: AtomicOptions): Request<number | bigint | undefined>;
  // The implementation's result is each overload's: Request<T> is invariant in T, hence `any` here only.
  @requestOperation
  atomic(op: AtomicOp, remoteKey: RemoteKey, offset: number | bigint, value: number | bigint, options: AtomicOptions = {}): Request<any> {
    const ep = this[kLive]('atomic');
    if (!(remoteKey instanceof RemoteKey)) throw new InvalidArgumentError('atomic: remoteKey must be a RemoteKey');
    if (typeof op !== 'string' || !Object.hasOwn(ATOMIC_OPS, op)) throw new InvalidArgumentError(`atomic op must be one of ${Object.keys(ATOMIC_OPS).join(', ')}, got ${show(op)}`);
    const width = atomicWidth(value, options.width, op === 'cswap' ? options.compare : undefined);
    const bytes = width / 8;
    const fetch = op === 'swap' || op === 'cswap' || options.fetch === true;
    const rkey = remoteKey[kHandleFor](this, 'write');
    if (fetch) remoteKey[kHandleFor](this, 'read');
    const address = remoteKey[kRemoteAddress](offset, bytes);
    if (typeof address === 'number' ? address % bytes !== 0 : address % BigInt(bytes) !== 0n) {
      throw new ArgumentOutOfRangeError(`atomic: the ${width}-bit word at offset ${offset} is not ${bytes}-byte aligned`);
    }
    const operand = toWord(value, width, 'value');
    const signal = options.signal;
    if (signal?.aborted === true) return this.#worker[kAborted](ATOMIC_LABEL[op], signal);
    if (fetch && (op === 'and' || op === 'or' || op === 'xor') && isFetchBitwiseBroken()) {
      return fetchBitwiseByCompareAndSwap(this, op, remoteKey, offset, operand, width, signal);
    }
    const request = postAtomic(this.#worker[kRequests], ep, op, width, fetch, address, rkey, operand, options.compare);
    return this.#posted(request, true, signal);
  }

  /**
   * Atomically adds `value` and resolves with the previous value, of `value`'s type: a bigint adds to
   * a 64-bit word, a number to a 32-bit one (`fetchAdd(key, 0, 1)` on a 64-bit counter would add to its
   * low half only: pass `1n`). A `width` that disagrees with the type is an InvalidArgumentError.
   *
   * @example
   * ```ts
   * const ticket: bigint = await ep.fetchAdd(key, 0, 1n); // a 64-bit counter at offset 0
   * const hits: number = await ep.fetchAdd(key, 8, 1);    // a 32-bit one at offset 8
   * ```
   */
  fetchAdd(remoteKey: RemoteKey, offset: number | bigint, value: bigint, options?: { width?: 64; signal?: AbortSignal }): Request<bigint>;
  /** On a 32-bit word: resolves with the previous value, a number. */
  fetchAdd(remoteKey: RemoteKey, offset: number | bigint, value: number, options?: { width?: 32; signal?: AbortSignal }): Request<number>;
  /** When the value's type is known only at run time. */
  fetchAdd(remoteKey: RemoteKey, offset: number | bigint, value: number | bigint, options?: { width?: 32 | 64; signal?: AbortSignal }): Request<number | bigint>;
  @requestOperation
  fetchAdd(remoteKey: RemoteKey, offset: number | bigint, value: number | bigint, options: { width?: 32 | 64; signal?: AbortSignal } = {}): Request<any> {
    return this.atomic('add', remoteKey, offset, value, { ...optionsObject(options, 'fetchAdd options'), fetch: true });
  }

  /**
   * Atomically stores `desired` if the word equals `expected`; resolves with the previous value. Both
   * are bigints (a 64-bit word) or both numbers (32-bit); a mix is an InvalidArgumentError.
   *
   * @example
   * ```ts
   * const previous = await ep.compareAndSwap(key, 0, 0n, 1n); // take a lock word: 0 -> 1
   * if (previous === 0n) console.log('locked');
   * ```
   */
  compareAndSwap(remoteKey: RemoteKey, offset: number | bigint, expected: bigint, desired: bigint, options?: { width?: 64; signal?: AbortSignal }): Request<bigint>;
  /** On a 32-bit word: resolves with the previous value, a number. */
  compareAndSwap(remoteKey: RemoteKey, offset: number | bigint, expected: number, desired: number, options?: { width?: 32; signal?: AbortSignal }): Request<number>;
  /** When the values' types are known only at run time (they must still agree). */
  compareAndSwap(remoteKey: RemoteKey, offset: number | bigint, expected: number | bigint, desired: number | bigint, options?: { width?: 32 | 64; signal?: AbortSignal }): Request<number | bigint>;
  @requestOperation
  compareAndSwap(remoteKey: RemoteKey, offset: number | bigint, expected: number | bigint, desired: number | bigint, options: { width?: 32 | 64; signal?: AbortSignal } = {}): Request<any> {
    return this.atomic('cswap', remoteKey, offset, desired, { ...optionsObject(options, 'compareAndSwap options'), compare: expected });
  }

  /**
   * Orders RMA and atomics: those issued before the fence complete at their targets before those issued
   * after it. UCP 1.13 fences per worker, so this fences every endpoint of this worker.
   *
   * @example
   * ```ts
   * ep.memPut(payload, key, 64);
   * ep.fence();                            // the payload lands before the flag
   * ep.memPut(new Uint8Array([1]), key, 0);
   * await ep.flush();
   * ```
   */
  fence(): void {
    this[kLive]('fence');
    this.#worker.fence();
  }

  /**
   * Completes every outstanding operation on this endpoint, remotely too: after it, puts are visible
   * at the target and gets have their data.
   *
   * @example
   * ```ts
   * ep.memPut(data, key, 0);                               // completes locally
   * await ep.flush({ signal: AbortSignal.timeout(5000) }); // now visible at the owner
   * ```
   */
  @requestOperation
  flush(options?: OperationOptions): Request<void> {
    const ep = this[kLive]('flush');
    const worker = this.#worker;
    const signal = options?.signal;
    if (signal?.aborted === true) return worker[kAborted]('endpoint flush', signal);
    const requests = worker[kRequests];
    const block = requests.params.send;
    const request = requests.void(requests.slot(block), ucx().ucp_ep_flush_nbx(ep, block.address), 'endpoint flush', null);
    return this.#posted(request, true, signal);
  }

  /**
   * @internal The flush a Listener posts to learn that an accepted endpoint's wireup is complete. Not an
   * operation of the application's: it arms no watchdog, and a peer that closes meanwhile has closed,
   * not failed. UCX completes it (with an error, if the endpoint fails or closes first).
   */
  [kWireupFlush](): Request<void> {
    const ep = this[kLive]('flush');
    const requests = this.#worker[kRequests];
    const block = requests.params.send;
    const request = requests.void(requests.slot(block), ucx().ucp_ep_flush_nbx(ep, block.address), 'wireup flush', null);
    if (!request.completed) {
      request[kDetachable] = true;
      this.#wireup = request;
    }
    return request;
  }

  /** @internal worker.connect's wireup flush while it waits; null once it settled. */
  [kConnecting](flush: AnyRequest | null): void {
    // Kept while UCX still holds it (the failure watchdog rejected it): a close must still end the
    // connection (#abortUnansweredConnect).
    if (flush === null && this.#connecting?.[kDetached] === true) return;
    this.#connecting = flush;
  }

  /**
   * A connect the server never answered leaves UCX operations queued that UCX 1.13 neither fails nor
   * lets a NONE-mode endpoint force out, and destroying it with them aborts the process: end the
   * connection as a gone server would (src/endpoint/connect-abort.ts). Returns the flush to wait for.
   */
  #abortUnansweredConnect(handle: bigint): AnyRequest | null {
    const connecting = this.#connecting;
    if (connecting === null || (connecting.completed && !connecting[kDetached]) || this.#peerMode === true) return null;
    if (!shutDownConnectSocket(handle)) return null;
    debug('endpoint #%d to %s: the connect was never answered; its connection is shut down', this.#id, this.#peer);
    return connecting;
  }

  /** The listener's wireup flush while UCX holds it: settled when the endpoint fails, before 'close'. */
  #wireup: Request<void> | null = null;

  /**
   * An operation of this endpoint that UCX did not complete at once: its owner is this endpoint (failed
   * with it), `watched` ones (only the peer's UCX has to answer them: RMA, atomics, flush) arm the
   * failure watchdog, and it is cancelled when `signal` aborts. Sends are not watched: a live peer may
   * hold a rendezvous or synchronous send, or an unread stream, for as long as it likes.
   */
  #inFlight<T>(request: Request<T>, watched: boolean, signal: AbortSignal | undefined): Request<T> {
    request[kOwner] = this;
    request[kDetachable] = true;
    if (watched) request[kWatched] = true;
    this.#watchdog.started(watched);
    if (signal !== undefined) request[kBindSignal](signal);
    return request;
  }

  /**
   * A posted operation: in flight (see #inFlight), or done at once. One that failed at once with the
   * connection's reset (UCX knew of the peer's close before it told this endpoint) makes that close a
   * failure, as one that fails later does.
   */
  #posted<T>(request: Request<T>, watched: boolean, signal: AbortSignal | undefined): Request<T> {
    if (!request.completed) return this.#inFlight(request, watched, signal);
    if (request.status === UCS_ERR_CONNECTION_RESET) this.#opsFailed++;
    return request;
  }

  /** @internal An operation of this endpoint settled (Request.#finish). */
  [kOpSettled](watched: boolean, completed: boolean, status: number): void {
    // UCX fails what the reset connection held before it reports the reset to this endpoint.
    // In PEER mode UCX fails RMA toward a killed peer with ENDPOINT_TIMEOUT before it reports the reset.
    if (status === UCS_ERR_CONNECTION_RESET || status === UCS_ERR_ENDPOINT_TIMEOUT ||
      (status < 0 && status !== UCS_ERR_CANCELED && this.#state !== 'open')) {
      this.#opsFailed++;
    }
    this.#watchdog.settled(watched, completed);
  }

  /** The watchdog found no answer from the peer for `stalledMs` with a watched operation in flight. */
  #stalled(stalledMs: number): void {
    this.#state = 'failed';
    this.#syncRef();
    this.#failure = Object.assign(new EndpointTimeoutError(
      `endpoint to ${this.#peer}: no answer from the peer for ${stalledMs} ms (failureTimeout ${this.#failureTimeout} ms)`,
    ), { [kByWatchdog]: true });
    debug('endpoint #%d to %s failed: %s', this.#id, this.#peer, this.#failure.message);
    void this.#failed();
  }

  /**
   * After a failure: everything of this endpoint still in flight rejects with it, then 'error' and
   * close. When the peer closed the connection (UCX 1.13 reports a peer's close and its process's end
   * alike, as the kernel does to a socket) with only sends in flight, UCX may report their completion
   * in the next progress calls: they get PEER_CLOSE_SETTLE_MS first, and the close is a failure only if
   * one of them, or any other operation of this endpoint, rejects with it. RMA, atomics or a flush
   * waiting for the peer's answer at its close make it a failure. A receive waiting then is not (a
   * socket read at its end): the close cancels it.
   */
  async #failed(): Promise<void> {
    const failure = this.#failure as UcxError;
    // The listener hands the endpoint out when its wireup flush settles: before 'close', always.
    this.#wireup?.[kFailDetached](failure);
    this.#wireup = null;
    // Receives waiting get the same time: a message the peer sent before it closed may still be on its
    // way in (over TCP the close comes on another socket than the data).
    if (this.#peerClosed && (this.#watchdog.sending > 0 || this.#receives.size > 0)) {
      await this.#worker[kProgressUntil](() => this.#watchdog.sending <= 0 && this.#receives.size === 0, PEER_CLOSE_SETTLE_MS);
      // Closed meanwhile (by close(), or its worker's): that close settled everything and said 'close'.
      if (this.#state !== 'failed') return;
    }
    const clean = this.#peerClosed && this.#watchdog.sending <= 0 && this.#opsFailed === 0;
    for (const request of inflight.values()) {
      if (request[kOwner] === this) request[kFailDetached](failure);
    }
    this.#closedByPeer = clean;
    debug('endpoint #%d to %s %s: %s', this.#id, this.#peer, this.#closedByPeer ? 'closed by the peer' : 'failed', failure.message);
    if (!this.#closedByPeer && this.listenerCount('error') > 0) this.emit('error', failure);
    void this.close();
  }

  /** The peer closed the connection (CONNECTION_RESET from UCX); `closedByPeer` unless an operation failed. */
  #peerClosed = false;

  /** Closed, or closing, because the peer closed: what `closedByPeer` says once the close is done. */
  #byPeer(): boolean {
    return this.#closedByPeer || (this.#state !== 'open' && this.#peerClosed && this.#opsFailed === 0);
  }
  /**
   * Operations of this endpoint that rejected with the connection's reset, or with an error other than
   * a cancellation once it left 'open'.
   */
  #opsFailed = 0;

  /**
   * Cancels every operation of this endpoint still in flight, as ucxx's `cancelInflightRequests`: each
   * rejects with CanceledError now (what UCX cannot cancel, sends and RMA on UCX 1.13, it finishes or
   * drops in the background, as `Request.cancel()` says). The endpoint stays open. Returns how many were
   * cancelled.
   *
   * @example
   * ```ts
   * const pending = endpoint.tagRecv(buffer, 5n);
   * console.log(endpoint.cancelInflightRequests()); // 1: `pending` rejects with CanceledError
   * ```
   */
  cancelInflightRequests(): number {
    let cancelled = 0;
    const mine: AnyRequest[] = this.#receives.toArray();
    for (const request of inflight.values()) {
      if (request[kOwner] === this) mine.push(request);
    }
    for (const request of mine) {
      if (request.completed) continue;
      request.cancel();
      if (request.completed) cancelled++;
    }
    return cancelled;
  }

  /**
   * Closes the endpoint: destroys the remote keys unpacked on it, cancels its receives, then closes
   * gracefully (flushing) or, when the peer is gone or operations are still in flight, forced (PEER mode;
   * UCX refuses to force a NONE-mode endpoint). Operations still in flight then reject with
   * CanceledError. Waits at most `closeTimeout`. Idempotent.
   *
   * @example
   * ```ts
   * await endpoint.close();
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
    const failed = this.#state === 'failed';
    this.#state = 'closing';
    this.#syncRef();
    this.#watchdog.stop();
    for (const key of [...this.#keys]) key.close();
    for (const request of this.#receives.toArray()) request.cancel();
    const handle = this.#handle;
    const workerHandle = this.#worker[kHandle];
    if (handle !== null && workerHandle !== null) {
      // Let cancellations and the flush inside a graceful close run.
      await this.#worker[kProgressUntil](() => this.#receives.size === 0, 1000);
      const connecting = this.#abortUnansweredConnect(handle);
      if (connecting !== null) {
        await this.#worker[kProgressUntil](() => connecting.completed && !connecting[kDetached], CONNECT_ABORT_WAIT_MS);
      }
      // One ucp_ep_close_nbx per endpoint: a second one on an endpoint whose first close is still
      // flushing makes UCX 1.13 abort later (ucp_ep.c:437). So a close that would wait on operations in
      // flight (a send nobody receives, RMA to a stopped peer) is forced from the start where UCX allows
      // it (PEER mode); a graceful one that does not finish in closeTimeout is left to the worker.
      const busy = this.#watchdog.busy;
      // Stream bytes still on their way in (after a peer's close) reach the posted receive in one more
      // progress; what UCX holds beyond it is taken before ucp_ep_close_nbx drops it.
      let rounds = 0;
      await this.#worker[kProgressUntil](() => rounds++ > 0, 50);
      this.#stream.drain(handle);
      // The fast lane first, released to both sides' pools (the peer stops using it); one that failed
      // or that the peer does not release in time is closed in UCX instead.
      const lane = this.#lane;
      if (lane !== null) {
        this.#lane = null;
        this.#worker[kLaneMapped](this, lane, false);
        this.#stream.laneGone();
        // Operations still in flight (a rendezvous send nobody received) keep protocol state on the lane
        // that only closing it fails, should the peer's worker go: such a lane is not reused.
        const wait = Math.min(this.#closeTimeout, LANE_RELEASE_WAIT_MS);
        if (failed) await this[kRetireLane](lane, true);
        else if (busy) await closeLaneBoth(this, lane, wait);
        else if (!await releaseLane(this, lane, wait)) await this[kRetireLane](lane);
      }
      // A failed endpoint not known to be in PEER mode (whose ids UCX looks up safely) may have sent
      // rendezvous messages the worker still holds: the worker keeps its ucp_ep while they last.
      const parked = failed && this.#peerMode !== true && this.#worker[kParkIfHeld](() => this.#closeWith(handle, true));
      if (!parked) await this.#closeWith(handle, (failed || busy) && this.#peerMode !== false);
    }
    // What UCX did not complete by now settles here; its buffers stay referenced until UCX lets go.
    const closed = new CanceledError(`the endpoint to ${this.#peer} was closed`);
    for (const request of inflight.values()) {
      if (request[kOwner] === this) request[kFailDetached](closed);
    }
    for (const request of this.#receives.toArray()) request[kAbandon]('the endpoint was closed');
    // Stream receives still waiting take what was stashed, then end or fail.
    this.#stream.closed(this.#failure ?? closed);
    this.#handle = null;
    this.#state = 'closed';
    this.#syncRef();
    endpoints.delete(this.#id);
    this.#worker[kEndpointClosed](this, handle);
    this.#orphanDetached(failed);
    debug('endpoint #%d to %s closed%s', this.#id, this.#peer,
      this.#closedByPeer ? ' (by the peer)' : failed ? ' after its failure' : '');
    this.emit('close');
  }

  /** The ucp_ep_close_nbx of this endpoint, progressed for up to closeTimeout. */
  async #closeWith(handle: bigint, force: boolean): Promise<void> {
    const { request, forced } = this.#postClose(handle, force);
    if (request.completed) return;
    // One that does not finish in time is left to UCX: the worker's destruction releases it. A
    // graceful close of an endpoint whose peer failed (NONE mode, where UCX refuses to force) flushes
    // toward a peer that is gone and ends only by UCX's own timers, so it is not waited for.
    const wait = !forced && this.#failure !== undefined ? Math.min(this.#closeTimeout, FAILED_CLOSE_WAIT_MS) : this.#closeTimeout;
    await this.#worker[kProgressUntil](() => request.completed, wait);
  }

  /**
   * Posts ucp_ep_close_nbx. FORCE needs PEER mode: UCX refuses it on a NONE-mode endpoint with
   * INVALID_PARAM and does nothing else, so an accepted endpoint of unknown mode falls back to a
   * graceful close.
   */
  #postClose(handle: bigint, force: boolean): { request: AnyRequest; forced: boolean } {
    const requests = this.#worker[kRequests];
    const block = requests.params.close;
    let forced = force && this.#peerMode !== false;
    for (;;) {
      block.setFlags(forced ? Number(K.UCP_EP_CLOSE_FLAG_FORCE) : 0);
      const request = requests.open<void>(block, ResultKind.Void, 'endpoint close', null);
      // A graceful close flushes; on an endpoint whose peer is gone, in NONE mode, UCX logs every lane's
      // flush failure as an error (it logs nothing in PEER mode, and nothing is lost either way).
      const ptr = !forced && this.#failure !== undefined
        ? withUcxLogsQuiet(() => ucx().ucp_ep_close_nbx(handle, block.address))
        : ucx().ucp_ep_close_nbx(handle, block.address);
      requests.track(request, block, ptr);
      if (forced && statusOfPtr(ptr) === UCS_ERR_INVALID_PARAM) {
        forced = false;
        continue;
      }
      this.#closePosted = request;
      return { request, forced };
    }
  }

  /**
   * The ucp_ep_close_nbx posted for this endpoint, if any: UCX may free the ucp_ep as soon as it
   * completes, so it is never posted twice.
   */
  #closePosted: AnyRequest | null = null;

  /** @internal Process exit: keys, then a forced close; returns the close request (null when done). */
  [kForceCloseAtExit](): AnyRequest | null {
    const handle = this.#handle;
    if (handle === null || this.#state === 'closed') return null;
    for (const key of [...this.#keys]) key.close();
    const lane = this.#lane;
    if (lane !== null) {
      // Left to the worker's teardown, which progresses it.
      this.#lane = null;
      const block = this.#worker[kRequests].params.close;
      block.setFlags(0);
      const requests = this.#worker[kRequests];
      const request = requests.open<void>(block, ResultKind.Void, 'endpoint close', null);
      requests.track(request, block, ucx().ucp_ep_close_nbx(lane, block.address));
    }
    this.#state = 'closed';
    this.#syncRef();
    this.#handle = null;
    endpoints.delete(this.#id);
    // A close already under way (a peer's close being handled when the process exits): that one
    // finishes, progressed by the worker's teardown; a second ucp_ep_close_nbx on its ucp_ep is a use
    // after free (UCX 1.13 asserted in ucp_ep_close_nbx, 1.20 segfaulted).
    const posted = this.#closePosted;
    if (posted !== null) return posted.completed ? null : posted;
    this.#abortUnansweredConnect(handle); // the worker's teardown progresses while UCX fails it
    const { request } = this.#postClose(handle, true);
    return request.completed ? null : request;
  }

  /** @internal Called (from inside progress) when UCX reports the peer failed. */
  [kOnPeerError](status: number): void {
    if (this.#state !== 'open') return;
    this.#state = 'failed';
    this.#syncRef();
    // UNREACHABLE here is a wireup that could not complete: in UCX 1.13, contexts of different features.
    const hint = status === UCS_ERR_UNREACHABLE ? featureMismatchHint(this.#worker.context.features) : '';
    this.#failure = errorFromStatus(status, `endpoint to ${this.#peer} failed${hint}`);
    // The connection closed: a close, as a socket's end is, unless something of ours fails with it (#failed).
    // RMA, atomics or a flush waiting for the peer's answer make it a failure whatever UCX says of them later.
    this.#peerClosed = status === UCS_ERR_CONNECTION_RESET && this.#watchdog.armed <= 0;
    this.#worker[kDefer](() => void this.#failed());
  }

  /** Operations of this endpoint rejected while UCX still held them (Request's kFailDetached). */
  #detachedSends: AnyRequest[] = [];

  /** @internal An operation of this endpoint was rejected while UCX still holds it. */
  [kHeldByUcx](request: AnyRequest): void {
    this.#detachedSends.push(request);
  }

  /**
   * In NONE mode UCX 1.13 never completes a send whose peer is gone (it waits for an answer that
   * cannot come): once the close had time to purge what UCX does purge, the worker lets go of them.
   */
  #orphanDetached(failed: boolean): void {
    const orphans = this.#detachedSends;
    this.#detachedSends = [];
    if (!failed || this.#peerMode === true || orphans.length === 0) return;
    const requests = this.#worker[kRequests];
    setTimeout(() => requests.orphan(orphans), ORPHAN_AFTER_MS).unref();
  }

  /** @internal */
  [kKeyUnpacked](key: RemoteKey, rkey: bigint): void {
    this.#keys.add(key);
    this.#rkeyHandles.add(rkey);
  }

  /** @internal Called before the key's handle is destroyed. */
  [kKeyClosed](key: RemoteKey, rkey: bigint | null): void {
    this.#keys.delete(key);
    if (rkey !== null) this.#rkeyHandles.delete(rkey);
  }

  /** @internal Unpacks a packed rkey on this endpoint. */
  [kUnpack](packed: Uint8Array): bigint {
    const ep = this[kLive]('createRemoteKeyFromSerialized');
    const out = new OutCell();
    check(ucx().ucp_ep_rkey_unpack(ep, packed, out.reset()), 'ucp_ep_rkey_unpack');
    return out.ptr() as bigint;
  }
}
