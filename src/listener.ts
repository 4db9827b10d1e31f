/**
 * Accepts connections on a socket address (`worker.listen()`). Each incoming connection becomes an
 * Endpoint, handed to the `onConnection` callback and yielded by the listener's async iterator.
 *
 * ```ts
 * const listener = worker.listen({ host: '127.0.0.1', port: 0 });
 * console.log('listening on', listener.port);
 * for await (const endpoint of listener) {
 *   await endpoint.tagSend(Buffer.from('welcome'), 1n);
 * }
 * ```
 */
import {
  kCloseWithin, kCreate, kDefer, kDetector, kHandle, kListenerClosed, kReadStreamAhead, kSettle, kUpdateBusy,
  kWireupFlush,
} from './internal/symbols.js';
import { debug } from './internal/debug-log.js';
import {
  CONSTANTS, OutCell, StructBuffer, UCS_ERR_BUSY, UCS_ERR_REJECTED, addressOf, layouts, registerCallback, sameWireRange, ucpVersion, ucx,
} from './ffi/index.js';
import { ClosedError, ConnectionAcceptError, check } from './errors/index.js';
import { EventEmitter } from 'node:events';
import { SlotTable } from './internal/slot-table.js';
import { decodeSockaddr, encodeSockaddr, type SocketAddress } from './internal/sockaddr.js';
import { peerKey, socketsOnPort } from './internal/port-sockets.js';
import { answersLaneOffers, clientIdRelease, isDetectorClientId, isUcxxTsClientId } from './internal/client-id.js';
import { isLocalIp } from './internal/peer-locality.js';
import { offerLane, publishHint } from './endpoint/fast-lane.js';
import { Endpoint, type EndpointOptions, type PeerAddress } from './endpoint.js';
import type { Worker } from './worker.js';
import { InvalidArgumentError, INTERNAL, checkConstructorToken } from './errors/misuse.js';
import { show } from './internal/bytes.js';
import type { ListenerServices } from './worker/services.js';

// Keys of this module's own members (no other module uses them).
const kOnConnRequest: unique symbol = Symbol('ucxx-ts.onConnRequest');

/** Options of `worker.listen()`. */
export interface ListenerOptions {
  /** The IP address to bind; 'localhost' means 127.0.0.1. Default '0.0.0.0' (all IPv4 interfaces). */
  host?: string;
  /** The port; 0 (the default) picks a free one. */
  port?: number;
  /**
   * Options for the endpoints created for incoming connections. Their `errorHandling` is not applied:
   * UCX gives an accepted endpoint the mode its client asked for (naming another one makes UCX refuse
   * the client, which is what a ucxx server does to a NONE-mode client), so a ucxx-ts listener accepts
   * clients of either mode; `endpoint.errorHandling` is undefined on accepted endpoints.
   */
  endpoint?: EndpointOptions;
  /**
   * Decides each incoming connection before an endpoint exists for it, as ucxx's listener callback does
   * with its `ucp_conn_request_h` (`createEndpointFromConnRequest`, or `ucp_listener_reject`): return
   * `true` to accept, `false` to refuse. A refused client's connect rejects (UCX tells it the server
   * rejected it); nothing of it reaches `onConnection`, the iterator or 'connectionError'. The decision
   * is synchronous: UCX 1.13 aborts in its TCP connection manager when a connection request waits
   * undecided (an asynchronous decision showed it in 3 of 3 runs). A callback that throws, or returns
   * anything but a boolean, refuses the client, then the error is thrown as an uncaught exception, like
   * one from an event listener. Default: accept every connection.
   *
   * @example
   * ```ts
   * let clients = 0;
   * const listener = worker.listen({
   *   port: 13337,
   *   accept: (request) => request.clientAddress?.host === '127.0.0.1' && clients++ < 8,
   * });
   * ```
   */
  accept?: (request: ConnectionRequest) => boolean;
  /**
   * Offers a fast lane to ucxx-ts clients on this host that connect in PEER mode (the default from UCX
   * 1.19 on): their data then moves over shared memory while the PEER-mode connection keeps detecting
   * a failed peer (`endpoint.fastLane`; docs/interoperability.md). Other clients (ucxx, UCX programs,
   * other hosts) never see anything of it. Needs the context's 'am' feature. Default true; false turns
   * it off.
   *
   * @example
   * ```ts
   * const listener = worker.listen({ port: 13337, fastLane: false }); // every connection over TCP (PEER mode)
   * ```
   */
  fastLane?: boolean;
}

/** An incoming connection, as the listener's `accept` callback sees it (before it is an endpoint). */
export interface ConnectionRequest {
  /** The client's address and port, or null when UCX cannot tell them. */
  readonly clientAddress: PeerAddress | null;
  /** The port of the listener it came to. */
  readonly listenerPort: number;
  /**
   * The client id the client's UCX sent with the request (`UCP_EP_PARAMS_FLAGS_SEND_CLIENT_ID`), or null
   * when it sent none (ucxx's clients and UCX's examples send none).
   */
  readonly clientId: bigint | null;
  /** Whether the client is a ucxx-ts worker (its client id says so). */
  readonly fromUcxxTs: boolean;
}

const K = CONSTANTS;
/** How long an accepted endpoint's wireup may take before the endpoint is handed out regardless. */
const WIREUP_WAIT_MS = 1000;
/** How soon a closed listener first looks again for a connection UCX holds, and the longest wait after. */
const DRAIN_CHECK_FIRST_MS = 2;
const DRAIN_CHECK_MAX_MS = 250;
/** Listeners whose UCX listener exists: open ones, and closed ones still draining. */
const listeners = new SlotTable<Listener>();

/** @internal For getDiagnostics(): listeners of this thread not yet closed. */
export function liveListenerCount(): number {
  return listeners.values().filter((listener) => !listener.closed).length;
}
let connCallback: bigint | undefined;
let requestAttr: StructBuffer<'field_mask' | 'client_address' | 'client_id'> | undefined;

/** The client's address of a connection request (null if UCX cannot tell). */
function clientAddress(connRequest: bigint): SocketAddress | null {
  requestAttr ??= new StructBuffer(layouts.ucp_conn_request_attr_t);
  requestAttr.setU64('field_mask', K.UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR);
  if (ucx().ucp_conn_request_query(connRequest, requestAttr.buffer) !== 0) return null;
  return decodeSockaddr(requestAttr.buffer, requestAttr.offset('client_address'));
}

/** The client id a connection request carries (src/internal/client-id.ts), or null when it has none. */
function clientId(connRequest: bigint): bigint | null {
  requestAttr ??= new StructBuffer(layouts.ucp_conn_request_attr_t);
  requestAttr.setU64('field_mask', K.UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ID).setU64('client_id', 0n);
  if (ucx().ucp_conn_request_query(connRequest, requestAttr.buffer) !== 0) return null;
  const id = requestAttr.getU64('client_id');
  return id === 0n ? null : id;
}

function addressText({ host, port }: SocketAddress): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The client's address of a connection request, as port-sockets spells it (null if UCX cannot tell). */
function clientKey(connRequest: bigint): string | null {
  requestAttr ??= new StructBuffer(layouts.ucp_conn_request_attr_t);
  requestAttr.setU64('field_mask', K.UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR);
  if (ucx().ucp_conn_request_query(connRequest, requestAttr.buffer) !== 0) return null;
  return peerKey(requestAttr.buffer, requestAttr.offset('client_address'));
}

function connCallbackAddress(): bigint {
  connCallback ??= registerCallback('connRequest', (connRequest: bigint | null, id: number) => {
    const listener = listeners.get(id);
    if (listener !== undefined && connRequest !== null) listener[kOnConnRequest](connRequest);
  });
  return connCallback;
}

/** @internal True when a listener of this process is bound to `port`. */
export function isOwnListenerPort(port: number): boolean {
  return listeners.values().some((listener) => listener.port === port);
}

/** The events of a Listener. */
export interface ListenerEvents {
  /**
   * A connection request UCX handed over could not become an endpoint (for one, a client on another UCX
   * release). The client's connect rejects with ConnectionRefusedError; the listener goes on listening.
   */
  connectionError: [error: ConnectionAcceptError];
}


/**
 * Accepts connections on a socket address; each becomes an Endpoint, handed to the callback given to
 * `worker.listen()` and to the async iterator. Made by `worker.listen()`.
 *
 * @example
 * ```ts
 * const listener = worker.listen({ port: 13337 });
 * for await (const ep of listener) serve(ep);
 * ```
 */
export class Listener extends EventEmitter<ListenerEvents> implements AsyncIterable<Endpoint> {
  /** The worker, as what a Listener may use of it (worker/services.ts). */
  readonly #worker: ListenerServices;
  /** The same worker, handed to the endpoints it accepts. */
  readonly #owner: Worker;
  /** The ucp_listener_h while the listener is open; null once closed. */
  #handle: bigint | null;
  /** The ucp_listener_h until it is destroyed, which may be a while after close(): see #drain. */
  #ucxListener: bigint | null;
  readonly #id: number;
  readonly #host: string;
  readonly #port: number;
  readonly #endpointOptions: EndpointOptions;
  readonly #onConnection: ((endpoint: Endpoint) => void) | undefined;
  readonly #decide: ((request: ConnectionRequest) => boolean) | undefined;
  readonly #queue: Endpoint[] = [];
  readonly #waiting: ((result: IteratorResult<Endpoint>) => void)[] = [];
  #iterated = false;
  /** Connection requests UCX handed over that are not accepted yet: each must be accepted or rejected. */
  readonly #pending = new Set<bigint>();
  /** Client addresses of the connection requests UCX handed over (see #connectionInFlight). */
  readonly #delivered = new Set<string>();
  #pruneAt = 64;
  #drainTimer: NodeJS.Timeout | undefined;
  readonly #destroyed: Promise<void>;
  #markDestroyed!: () => void;

  /** @internal Use `worker.listen()` (IllegalConstructorError otherwise). */
  constructor(
    token: typeof INTERNAL, worker: Worker, workerHandle: bigint, options: ListenerOptions,
    onConnection?: (endpoint: Endpoint) => void,
  ) {
    checkConstructorToken(token, 'Listener', 'worker.listen()');
    super();
    if (onConnection !== undefined && typeof onConnection !== 'function') {
      throw new InvalidArgumentError('onConnection must be a function');
    }
    const host = options.host === undefined ? '0.0.0.0' : options.host === 'localhost' ? '127.0.0.1' : options.host;
    const sockaddr = encodeSockaddr(host, options.port ?? 0);
    this.#worker = worker;
    this.#owner = worker;
    if (options.accept !== undefined && typeof options.accept !== 'function') {
      throw new InvalidArgumentError('options.accept must be a function');
    }
    if (options.fastLane !== undefined && typeof options.fastLane !== 'boolean') {
      throw new InvalidArgumentError(`options.fastLane must be a boolean, got ${show(options.fastLane)}`);
    }
    this.#onConnection = onConnection;
    this.#decide = options.accept;
    this.#endpointOptions = options.endpoint ?? {};
    this.#destroyed = new Promise((resolve) => { this.#markDestroyed = resolve; });
    // A closed listener still draining on the port the user asks for gives the port up now.
    const port = options.port ?? 0;
    if (port !== 0) for (const other of listeners.values()) if (other.closed && other.port === port) other[kSettle](true);
    this.#id = listeners.add(this);
    const params = new StructBuffer(layouts.ucp_listener_params_t);
    params
      .setU64('field_mask', K.UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | K.UCP_LISTENER_PARAM_FIELD_CONN_HANDLER)
      .setPtr('sockaddr.addr', addressOf(sockaddr))
      .setU32('sockaddr.addrlen', sockaddr.length)
      .setPtr('conn_handler.cb', connCallbackAddress())
      .setPtr('conn_handler.arg', BigInt(this.#id));
    const out = new OutCell();
    try {
      check(ucx().ucp_listener_create(workerHandle, params.buffer, out.reset()), `ucp_listener_create (${host})`);
    } catch (err) {
      listeners.delete(this.#id);
      // SO_REUSEADDR (ContextOptions.reuseAddress) lets a port be bound over connections in TIME_WAIT
      // only when the server that made them set it too (Linux): ucxx's and UCX's defaults do not.
      if ((err as { status?: unknown }).status === UCS_ERR_BUSY && err instanceof Error) {
        err.message += `: port ${port} is in use, or held in TIME_WAIT (up to 60 s) by connections that a server ` +
          'without SO_REUSEADDR (ucxx C++ or Python, a UCX program with its defaults) closed first';
      }
      throw err;
    }
    this.#handle = out.ptr();
    this.#ucxListener = this.#handle;
    const attr = new StructBuffer(layouts.ucp_listener_attr_t);
    attr.setU64('field_mask', K.UCP_LISTENER_ATTR_FIELD_SOCKADDR);
    check(ucx().ucp_listener_query(this.#handle, attr.buffer), 'ucp_listener_query');
    const bound = decodeSockaddr(attr.buffer, layouts.ucp_listener_attr_t.offsets.sockaddr);
    this.#host = host;
    this.#port = bound.port;
    if (options.fastLane !== false && worker.context.features.includes('am')) this.#laneHint = publishHint(bound.port);
    debug('listener on %s:%d open', host, bound.port);
  }

  /** The fast lanes' hint on this host, while the listener offers them (endpoint/fast-lane.ts). */
  #laneHint: { close(): void } | null = null;

  /** The port the listener is bound to (the chosen one when 0 was asked for). */
  get port(): number {
    return this.#port;
  }

  /** The address the listener is bound to. */
  get host(): string {
    return this.#host;
  }

  /** True once closed. */
  get closed(): boolean {
    return this.#handle === null;
  }

  #refed = true;

  /**
   * Lets the open listener keep the process alive again after `unref()` (the default, as a
   * `net.Server`). Returns the listener.
   *
   * @example
   * ```ts
   * listener.unref();  // the process may exit while it listens
   * listener.ref();
   * ```
   */
  ref(): this {
    this.#refed = true;
    this.#worker[kUpdateBusy]();
    return this;
  }

  /**
   * The open listener no longer keeps the process alive (its endpoints do, unless unref'd themselves),
   * as `server.unref()`. Returns the listener.
   *
   * @example
   * ```ts
   * const listener = worker.listen({ port: 0 }, serve).unref();
   * ```
   */
  unref(): this {
    this.#refed = false;
    this.#worker[kUpdateBusy]();
    return this;
  }

  /**
   * Whether the listener keeps the process alive while open (false after `unref()`).
   *
   * @example
   * ```ts
   * console.log(listener.hasRef()); // true by default
   * ```
   */
  hasRef(): boolean {
    return this.#refed;
  }

  /**
   * The `ucp_listener_h` handle.
   *
   * @example
   * ```ts
   * const handle = listener.getHandle(); // a ucp_listener_h, for code that calls libucp itself
   * ```
   */
  getHandle(): bigint {
    if (this.#handle === null) throw new ClosedError('the Listener');
    return this.#handle;
  }

  /** @internal Called from inside progress: the endpoint is created afterwards, outside the callback. */
  [kOnConnRequest](connRequest: bigint): void {
    this.#noteDelivered(connRequest);
    if (this.#handle === null) {
      // Closed and draining: refuse it (the client gets ConnectionRefusedError).
      if (this.#ucxListener !== null) ucx().ucp_listener_reject(this.#ucxListener, connRequest);
      return;
    }
    this.#pending.add(connRequest);
    const id = clientId(connRequest);
    if (id !== null && isUcxxTsClientId(id) && !sameWireRange(clientIdRelease(id), ucpVersion())) {
      // Another release's request is refused here, inside the callback: UCX 1.13's listener aborted
      // once (tcp_sockcm_ep.c:416, a send on a request neither accepted nor rejected) while such a
      // request waited for a reject outside it.
      this.#refuseRelease(connRequest, clientAddress(connRequest), clientIdRelease(id));
      return;
    }
    this.#worker[kDefer](() => this.#accept(connRequest, id));
  }

  /** `id`: the request's client id, read in the callback. */
  #accept(connRequest: bigint, id: bigint | null): void {
    if (!this.#pending.has(connRequest) || this.#handle === null) return;
    // ucp_ep_create consumes the request: ask for the client's address before.
    const address = clientAddress(connRequest);
    // A ucxx-ts client on this host may take a fast lane (it asks by waiting for the offer).
    const lane = this.#laneHint !== null && id !== null && isUcxxTsClientId(id) && answersLaneOffers(id) &&
      address !== null && isLocalIp(address.host);
    // A client's failure detector (worker/detector.ts): its connection exists for the lane only.
    const detector = lane && isDetectorClientId(id);
    const decide = this.#decide;
    if (decide === undefined) {
      this.#decided(connRequest, address, true, lane, detector);
      return;
    }
    let verdict: unknown;
    try {
      verdict = decide(Object.freeze({
        clientAddress: address, listenerPort: this.#port, clientId: id, fromUcxxTs: id !== null && isUcxxTsClientId(id),
      }));
    } catch (err) {
      this.#decided(connRequest, address, false);
      process.nextTick(() => { throw err; });
      return;
    }
    this.#decided(connRequest, address, verdict === true, lane, detector);
    if (typeof verdict !== 'boolean') {
      process.nextTick(() => {
        throw new InvalidArgumentError(`a listener's accept callback must return true or false, got ${show(verdict)}: ` +
          'the decision cannot wait (UCX 1.13 aborts when a connection request is left undecided); the client was refused');
      });
    }
  }

  /**
   * Refuses a ucxx-ts client on a UCX release this one cannot read (UCX reads its request as garbage:
   * mostly refused, now and then an endpoint that fails at once: docs/ucx-1.20-bugs/cross_release_accept.c),
   * and reports it as connectionError, outside the callback.
   */
  #refuseRelease(connRequest: bigint, address: SocketAddress | null, release: [number, number]): void {
    if (!this.#pending.delete(connRequest) || this.#handle === null) return;
    ucx().ucp_listener_reject(this.#handle, connRequest);
    const client = address === null ? null : addressText(address);
    const failure = new ConnectionAcceptError(`${this.#host}:${this.#port}`, client, UCS_ERR_REJECTED, ucpVersion().join('.'),
      `${release[0]}.${release[1]}`);
    debug('listener on :%d: %s', this.#port, failure.message);
    this.#worker[kDefer](() => {
      if (this.listenerCount('connectionError') > 0) this.emit('connectionError', failure);
    });
  }

  /**
   * Accepts or refuses a connection request still pending. `lane`: a fast lane is offered; `fromDetector`:
   * the client's failure detector made the request, so the endpoint goes on this worker's detector too
   * and is handed out with its lane or not at all (the client then connects again without one).
   */
  #decided(connRequest: bigint, address: SocketAddress | null, ok: boolean, lane = false, fromDetector = false): void {
    if (!this.#pending.delete(connRequest) || this.#handle === null) return;
    const workerHandle = this.#worker[kHandle];
    if (!ok || workerHandle === null || this.#worker.closed) {
      if (!ok) debug('listener on :%d refuses %s (its accept callback said no)', this.#port, address === null ? 'a client' : addressText(address));
      ucx().ucp_listener_reject(this.#handle, connRequest);
      return;
    }
    let endpoint: Endpoint;
    const client = address === null ? null : addressText(address);
    const detector = fromDetector ? this.#worker[kDetector]() : null;
    detector?.hold(1);
    try {
      endpoint = Endpoint[kCreate](INTERNAL, this.#owner, detector?.handle ?? workerHandle, this.#endpointOptions, null, (params) => {
        params
          .setU64('field_mask', params.getU64('field_mask') | K.UCP_EP_PARAM_FIELD_CONN_REQUEST)
          .setPtr('conn_request', connRequest);
      }, `connection ${client === null ? '' : `from ${client} `}to listener :${this.#port}`, address);
    } catch (err) {
      detector?.hold(-1);
      // ucp_ep_create consumed the request (UCX refused the client); nothing to hand out.
      const status = (err as { status?: unknown }).status;
      if (typeof status !== 'number') throw err;
      const failure = new ConnectionAcceptError(`${this.#host}:${this.#port}`, client, status, ucpVersion().join('.'));
      debug('listener on :%d: %s', this.#port, failure.message);
      if (this.listenerCount('connectionError') > 0) this.emit('connectionError', failure);
      return;
    }
    // Read from now on (stream bytes stay on the PEER endpoint when a lane is taken; none come over a detector's).
    if (this.#worker.context.features.includes('stream')) endpoint[kReadStreamAhead]();
    // Hand the endpoint out once its wireup is complete (UCX 1.13 has mishandled sends posted before
    // that), but hand it out whatever happens: a client that sent and closed at once still left its
    // messages in this worker, and its endpoint reports the close after delivery.
    let delivered = false;
    const deliver = (): void => {
      if (delivered) return;
      delivered = true;
      clearTimeout(timer);
      if (!lane) {
        this.#deliver(endpoint);
        return;
      }
      void offerLane(endpoint, this.#workerAddress()).then((taken) => {
        detector?.hold(-1);
        if (taken || !fromDetector) {
          this.#deliver(endpoint);
          return;
        }
        debug('listener on :%d: %s took no fast lane; closing its detector connection', this.#port, endpoint.peer);
        void endpoint.close();
      });
    };
    const timer = setTimeout(deliver, WIREUP_WAIT_MS);
    timer.unref();
    endpoint[kWireupFlush]().then(deliver, deliver);
  }

  #laneAddress: Uint8Array | null = null;

  /** The worker's address, offered to fast-lane clients. */
  #workerAddress(): Uint8Array {
    this.#laneAddress ??= this.#owner.getAddress();
    return this.#laneAddress;
  }

  #deliver(endpoint: Endpoint): void {
    if (this.#handle === null) {
      debug('listener on :%d closed before it could hand out %s: closing it', this.#port, endpoint.peer);
      void endpoint.close();
      return;
    }
    debug('listener on :%d hands out %s%s', this.#port, endpoint.peer, endpoint.closed ? ' (its client already left)' : '');
    this.#onConnection?.(endpoint);
    const waiter = this.#waiting.shift();
    if (waiter !== undefined) waiter({ value: endpoint, done: false });
    else if (this.#iterated || this.#onConnection === undefined) this.#queue.push(endpoint);
  }

  /** Yields each incoming connection's Endpoint until the listener closes. */
  [Symbol.asyncIterator](): AsyncIterator<Endpoint> {
    this.#iterated = true;
    return {
      next: (): Promise<IteratorResult<Endpoint>> => {
        const ready = this.#queue.shift();
        if (ready !== undefined) return Promise.resolve({ value: ready, done: false });
        if (this.#handle === null) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => this.#waiting.push(resolve));
      },
      return: (): Promise<IteratorResult<Endpoint>> => {
        this.close();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }

  /**
   * Stops accepting connections (established endpoints stay open); a client connecting from now on is
   * refused. Idempotent.
   *
   * @example
   * ```ts
   * listener.close();
   * ```
   */
  close(): void {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#handle = null;
    this.#laneHint?.close();
    this.#laneHint = null;
    for (const connRequest of this.#pending) ucx().ucp_listener_reject(handle, connRequest);
    this.#pending.clear();
    for (const waiter of this.#waiting.splice(0)) waiter({ value: undefined, done: true });
    this.#worker[kUpdateBusy]();
    debug('listener on :%d closed', this.#port);
    this.#drain(DRAIN_CHECK_FIRST_MS);
  }

  /**
   * UCX 1.13 crashes when it receives the connection data of a connection its TCP connection manager
   * accepted before the listener was destroyed (the accepted connection keeps a pointer to the freed
   * listener; docs/ucx-1.13-bugs/listener_destroy_conn_request.c). So the UCX listener lives on after
   * close(), refusing what it hands over, until UCX holds no accepted connection it has not handed over.
   */
  #drain(delayMs: number): void {
    if (this[kSettle](false)) return;
    this.#drainTimer = setTimeout(() => this.#drain(Math.min(delayMs * 2, DRAIN_CHECK_MAX_MS)), delayMs);
    this.#drainTimer.unref();
  }

  /**
   * @internal Destroys a closed listener's UCX listener once nothing is in flight on it, or at once with
   * `force`. True when it is destroyed.
   */
  [kSettle](force: boolean): boolean {
    if (this.#ucxListener === null) return true;
    if (this.#handle !== null || (!force && this.#connectionInFlight())) return false;
    const handle = this.#ucxListener;
    this.#ucxListener = null;
    clearTimeout(this.#drainTimer);
    listeners.delete(this.#id);
    ucx().ucp_listener_destroy(handle);
    this.#worker[kListenerClosed](this);
    this.#markDestroyed();
    return true;
  }

  /** @internal Closes, and waits for the drain at most `limitMs` before destroying the UCX listener. */
  async [kCloseWithin](limitMs: number): Promise<void> {
    this.close();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.#destroyed, new Promise((resolve) => { timer = setTimeout(resolve, limitMs); })]);
    clearTimeout(timer);
    this[kSettle](true);
  }

  /**
   * True while UCX may hold a connection on this listener's port whose request it has not handed over:
   * one in the accept queue, or an accepted one whose client address no request had. False where the
   * system cannot tell (no /proc).
   */
  #connectionInFlight(): boolean {
    const sockets = socketsOnPort(this.#port, this.#host.includes(':'));
    if (sockets === null) return false;
    if (sockets.backlog > 0) return true;
    for (const client of sockets.accepted) if (!this.#delivered.has(client)) return true;
    return false;
  }

  #noteDelivered(connRequest: bigint): void {
    const client = clientKey(connRequest);
    if (client === null) return;
    this.#delivered.add(client);
    if (this.#delivered.size < this.#pruneAt) return;
    // Forget the clients whose connections are gone, so that the set stays as large as the live ones.
    const sockets = socketsOnPort(this.#port, this.#host.includes(':'));
    if (sockets !== null) for (const known of this.#delivered) if (!sockets.accepted.has(known)) this.#delivered.delete(known);
    this.#pruneAt = Math.max(64, this.#delivered.size * 2);
  }

  /** The same as `close()`, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
