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
import {
  CONSTANTS, OutCell, StructBuffer, UCS_OK, addressOf, copyFromMemory, layouts, statusOfPtr, ucx, type Ptr,
} from './ffi/index.js';
import { ClosedError, check, errorFromStatus } from './errors.js';
import { Request, ResultKind, type AnyRequest, type RequestHost, type TagRecvInfo } from './request.js';
import { completionCallbacks, inflight, post } from './internal/completions.js';
import { ProgressEngine, type ProgressMode } from './internal/progress-engine.js';
import { asBytes, byteLengthOf, toTag, type BufferSource } from './internal/bytes.js';
import { resolveSockaddr } from './internal/sockaddr.js';
import type { Context } from './context.js';
import { Endpoint, type EndpointOptions } from './endpoint.js';
import { Listener, type ListenerOptions } from './listener.js';

export type { ProgressMode } from './internal/progress-engine.js';

export interface WorkerOptions {
  /** How the worker is progressed. Default 'event'. */
  progressMode?: ProgressMode;
  /** A name shown in UCX logs. */
  name?: string;
}

const K = CONSTANTS;
const FULL_MASK = (1n << 64n) - 1n;
const REQ = layouts.ucp_request_param_t.offsets;

/** The parameter blocks a worker reuses for every operation; only `user_data` changes per call. */
class ParamBlocks {
  readonly send = new StructBuffer(layouts.ucp_request_param_t);
  readonly tagRecv = new StructBuffer(layouts.ucp_request_param_t);
  readonly close = new StructBuffer(layouts.ucp_request_param_t);

  constructor() {
    const cbs = completionCallbacks();
    const base = Number(K.UCP_OP_ATTR_FIELD_CALLBACK | K.UCP_OP_ATTR_FIELD_USER_DATA);
    this.send.setU32('op_attr_mask', base).setPtr('cb.send', cbs.send);
    this.tagRecv
      .setU32('op_attr_mask', base | Number(K.UCP_OP_ATTR_FLAG_NO_IMM_CMPL))
      .setPtr('cb.recv', cbs.tagRecv);
    this.close.setU32('op_attr_mask', base | Number(K.UCP_OP_ATTR_FIELD_FLAGS)).setPtr('cb.send', cbs.send);
  }
}


export class Worker implements RequestHost {
  readonly #context: Context;
  #handle: bigint | null;
  readonly #engine: ProgressEngine;
  /** @internal */
  readonly _params = new ParamBlocks();
  readonly #inflight = new Set<AnyRequest>();
  readonly #endpoints = new Set<Endpoint>();
  readonly #listeners = new Set<Listener>();
  readonly #deferred: (() => void)[] = [];
  #closing: Promise<void> | undefined;

  /** @internal Use `context.createWorker()`. */
  constructor(context: Context, contextHandle: bigint, options: WorkerOptions, wakeup: boolean) {
    const mode = options.progressMode ?? 'event';
    if (mode !== 'event' && mode !== 'polling' && mode !== 'manual') {
      throw new TypeError(`progressMode must be 'event', 'polling' or 'manual', got ${String(mode)}`);
    }
    this.#context = context;
    const params = new StructBuffer(layouts.ucp_worker_params_t);
    params.setU64('field_mask', K.UCP_WORKER_PARAM_FIELD_THREAD_MODE).setU32('thread_mode', 0);
    let name: Buffer | undefined;
    if (options.name !== undefined) {
      name = Buffer.from(`${options.name}\0`);
      params.setU64('field_mask', K.UCP_WORKER_PARAM_FIELD_THREAD_MODE | K.UCP_WORKER_PARAM_FIELD_NAME);
      params.setPtr('name', addressOf(name));
    }
    const out = new OutCell();
    check(ucx().ucp_worker_create(contextHandle, params.buffer, out.reset()), 'ucp_worker_create');
    this.#handle = out.ptr();
    try {
      this.#engine = new ProgressEngine(this.#handle as bigint, mode, wakeup, () => this.#runDeferred());
    } catch (err) {
      ucx().ucp_worker_destroy(this.#handle);
      this.#handle = null;
      throw err;
    }
    this.#engine.inflightProbe = () => this.#inflight.size > 0;
  }

  /** The context this worker belongs to. */
  get context(): Context {
    return this.#context;
  }

  /** The progress mode chosen at creation. */
  get progressMode(): ProgressMode {
    return this.#engine.mode;
  }

  /** True once `close()` has been called. */
  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /** The `ucp_worker_h` handle, for code that calls libucp itself. */
  getHandle(): bigint {
    return this._live('Worker');
  }

  /**
   * Progresses the worker until UCX has nothing more to do right now; returns the number of events
   * processed. Required in 'manual' mode, harmless in the others.
   */
  progress(): number {
    this._live('Worker');
    return this.#engine.progress();
  }

  /**
   * The worker's address: the bytes a peer passes to `connectToAddress()`.
   *
   * ```ts
   * const address = worker.getAddress(); // send it to the peer by any means
   * ```
   */
  getAddress(): Uint8Array {
    const handle = this._live('Worker');
    const attr = new StructBuffer(layouts.ucp_worker_attr_t);
    attr.setU64('field_mask', K.UCP_WORKER_ATTR_FIELD_ADDRESS);
    check(ucx().ucp_worker_query(handle, attr.buffer), 'ucp_worker_query');
    const address = attr.getPtr('address');
    const length = Number(attr.getU64('address_length'));
    if (address === null) throw errorFromStatus(-4, 'ucp_worker_query returned no address');
    const bytes = new Uint8Array(copyFromMemory(address, length));
    ucx().ucp_worker_release_address(handle, address);
    return bytes;
  }

  /**
   * Completes every outstanding operation of this worker, remotely too (RMA becomes visible at targets).
   *
   * ```ts
   * endpoint.memPut(data, key);
   * await worker.flush();
   * ```
   */
  flush(): Request<void> {
    const handle = this._live('Worker');
    const request = this._newRequest<void>(ResultKind.Void, 'worker flush', null);
    this._params.send.buffer.writeUInt32LE(request._id, REQ.user_data);
    return this._track(request, ucx().ucp_worker_flush_nbx(handle, this._params.send.buffer));
  }

  /** Orders all RMA/atomic operations issued before it before those issued after, on every endpoint. */
  fence(): void {
    check(ucx().ucp_worker_fence(this._live('Worker')), 'ucp_worker_fence');
  }

  /**
   * Receives a tag message from any endpoint of this worker whose tag matches `tag` under `tagMask`
   * (default: all 64 bits). Resolves with the received length and the sender's tag. A message longer than
   * the buffer rejects with MessageTruncatedError.
   *
   * ```ts
   * const { length, senderTag } = await worker.tagRecv(buffer, 42n);
   * ```
   */
  tagRecv(buffer: BufferSource, tag: bigint | number, tagMask: bigint | number = FULL_MASK): Request<TagRecvInfo> {
    return this._tagRecv(buffer, tag, tagMask, null);
  }

  /** @internal */
  _tagRecv(
    buffer: BufferSource, tag: bigint | number, tagMask: bigint | number, group: Set<AnyRequest> | null,
  ): Request<TagRecvInfo> {
    const handle = this._live('Worker');
    const length = byteLengthOf(buffer, 'tagRecv buffer');
    const t = toTag(tag, 'tag');
    const m = toTag(tagMask, 'tagMask');
    const request = this._newRequest<TagRecvInfo>(ResultKind.TagInfo, 'tagRecv', buffer);
    const param = this._params.tagRecv.buffer;
    param.writeUInt32LE(request._id, REQ.user_data);
    // Posted with NO_IMM_CMPL: UCX 1.13 does not fill recv_info when a receive completes at once, so the
    // callback (run from inside the call if need be) is the one place that reports tag and length.
    const ptr = post(ucx().ucp_tag_recv_nbx, handle, buffer, length, t, m, param);
    if (group !== null && !request.completed && statusOfPtr(ptr) === 1) {
      request._group = group;
      group.add(request);
    }
    return this._track(request, ptr);
  }

  /**
   * Starts a listener on a socket address; every incoming connection becomes an Endpoint, handed to
   * `onConnection` and to the listener's async iterator. Port 0 picks a free port (see `listener.port`).
   *
   * ```ts
   * const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (ep) => ep.tagSend(hello, 1n));
   * ```
   */
  listen(options: ListenerOptions = {}, onConnection?: (endpoint: Endpoint) => void): Listener {
    const handle = this._live('Worker');
    const listener = new Listener(this, handle, options, onConnection);
    this.#listeners.add(listener);
    this._updateBusy();
    return listener;
  }

  /**
   * Connects to a listener at `host:port`. Resolves once the connection is established; rejects with a
   * UcxError (for example UnreachableError or ConnectionResetError) when it cannot be.
   *
   * ```ts
   * const ep = await worker.connect('127.0.0.1', 13337);
   * ```
   */
  async connect(host: string, port: number, options: EndpointOptions = {}): Promise<Endpoint> {
    this._live('Worker');
    const sockaddr = await resolveSockaddr(host, port);
    const handle = this._live('Worker');
    const endpoint = Endpoint._create(this, handle, options, (params) => {
      params
        .setU64('field_mask', params.getU64('field_mask') | K.UCP_EP_PARAM_FIELD_SOCK_ADDR | K.UCP_EP_PARAM_FIELD_FLAGS)
        .setU32('flags', Number(K.UCP_EP_PARAMS_FLAGS_CLIENT_SERVER))
        .setPtr('sockaddr.addr', addressOf(sockaddr))
        .setU32('sockaddr.addrlen', sockaddr.length);
    }, `${host}:${port}`);
    try {
      await endpoint.flush();
    } catch (err) {
      await endpoint.close();
      throw err;
    }
    return endpoint;
  }

  /**
   * Creates an endpoint to a worker whose address (from its `getAddress()`) you received.
   *
   * ```ts
   * const ep = worker.connectToAddress(peerAddress);
   * ```
   */
  connectToAddress(address: BufferSource, options: EndpointOptions = {}): Endpoint {
    const handle = this._live('Worker');
    const bytes = asBytes(address, 'worker address');
    if (bytes.byteLength === 0) throw new RangeError('worker address is empty');
    return Endpoint._create(this, handle, options, (params) => {
      params
        .setU64('field_mask', params.getU64('field_mask') | K.UCP_EP_PARAM_FIELD_REMOTE_ADDRESS)
        .setPtr('address', addressOf(bytes));
    }, 'worker address');
  }

  /**
   * Closes the worker: cancels what is in flight (those requests reject with CanceledError), closes its
   * endpoints (and their remote keys) and listeners, then destroys it. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #close(): Promise<void> {
    if (this.#handle === null) return;
    const handle = this.#handle;
    for (const request of [...this.#inflight]) {
      if (request._handle !== null) ucx().ucp_request_cancel(handle, request._handle);
    }
    await Promise.all([...this.#endpoints].map((ep) => ep.close()));
    for (const listener of [...this.#listeners]) listener.close();
    this.#engine.progress();
    // Whatever UCX did not complete by now never will once the worker is gone.
    for (const request of [...this.#inflight]) {
      this.#releaseId(request);
      request._abandon('the worker was closed');
    }
    this.#engine.close();
    this.#handle = null;
    ucx().ucp_worker_destroy(handle);
    this.#context._workerClosed(this);
  }

  // ---- internals shared with Endpoint and Listener -------------------------------------------------

  /** @internal Returns the handle for a new operation, or throws ClosedError once closing. */
  _live(what: string): bigint {
    if (this.#handle === null || this.#closing !== undefined) {
      throw new ClosedError(what === 'Worker' ? 'the Worker' : `the Worker of this ${what}`);
    }
    return this.#handle;
  }

  /** @internal The handle while it exists (also during close), for teardown paths. */
  get _handle(): bigint | null {
    return this.#handle;
  }

  /** @internal A Request with a slot id ready to be written into user_data. */
  _newRequest<T>(kind: ResultKind, what: string, keep: unknown): Request<T> {
    const request = new Request<T>(this, kind, what, keep);
    request._id = inflight.add(request);
    return request;
  }

  /** @internal Interprets an nbx return value for a request created by _newRequest. */
  _track<T>(request: Request<T>, ptr: Ptr): Request<T> {
    if (ptr === null) {
      this.#releaseId(request);
      request._settle(UCS_OK, 0, 0n);
      return request;
    }
    const status = statusOfPtr(ptr);
    if (status !== 1) {
      this.#releaseId(request);
      request._settle(status, 0, 0n);
      return request;
    }
    if (!request.completed) {
      request._handle = ptr;
      this.#inflight.add(request);
      this._updateBusy();
    }
    return request;
  }

  #releaseId(request: AnyRequest): void {
    if (request._id !== 0) {
      inflight.delete(request._id);
      request._id = 0;
    }
  }

  /** @internal */
  _cancelRequest(handle: bigint): void {
    if (this.#handle !== null) ucx().ucp_request_cancel(this.#handle, handle);
  }

  /** @internal */
  _requestSettled(request: AnyRequest): void {
    if (this.#inflight.delete(request)) this._updateBusy();
  }

  /** @internal Runs `fn` after the current progress call returns (never from inside a UCX callback). */
  _defer(fn: () => void): void {
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
  _updateBusy(): void {
    this.#engine.setBusy(this.#inflight.size > 0 || this.#listeners.size > 0, this.#inflight.size > 0);
  }

  /** @internal Progresses until `done()` or the deadline; used by close paths in every mode. */
  async _progressUntil(done: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (this.#handle === null) return done();
      this.#engine.progress();
      if (done()) return true;
      if (Date.now() > deadline) return false;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return true;
  }

  /** @internal */
  _endpointOpened(endpoint: Endpoint): void {
    this.#endpoints.add(endpoint);
  }

  /** @internal */
  _endpointClosed(endpoint: Endpoint): void {
    this.#endpoints.delete(endpoint);
  }

  /** @internal */
  _listenerClosed(listener: Listener): void {
    this.#listeners.delete(listener);
    this._updateBusy();
  }
}
