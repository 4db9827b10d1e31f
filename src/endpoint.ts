/**
 * A connection to a remote worker: RMA (`memPut`/`memGet`), tag messages and flush. Created by
 * `worker.connect()`, `worker.connectToAddress()` or a Listener.
 *
 * Peer failure handling is on by default: when the peer goes away the endpoint emits 'error' (only if
 * somebody listens for it) and 'close', its in-flight requests reject with a UcxError such as
 * ConnectionResetError, and every later operation throws ClosedError.
 *
 * ```ts
 * const ep = await worker.connect('127.0.0.1', port);
 * const key = createRemoteKeyFromSerialized(ep, serializedKey);
 * await ep.memPut(Buffer.from('hello'), key, 128);
 * await ep.flush();
 * await ep.close();
 * ```
 */
import { EventEmitter } from 'node:events';
import { CONSTANTS, OutCell, StructBuffer, layouts, registerCallback, ucx, statusOfPtr } from './ffi/index.js';
import { ClosedError, UcxError, check, errorFromStatus } from './errors.js';
import { Request, ResultKind, type AnyRequest, type TagRecvInfo } from './request.js';
import { SlotTable } from './internal/slot-table.js';
import { byteLengthOf, toTag, toU64, type BufferSource } from './internal/bytes.js';
import { RemoteKey } from './remote-key.js';
import type { Worker } from './worker.js';

export interface EndpointOptions {
  /**
   * Peer failure detection (UCP_ERR_HANDLING_MODE_PEER). Default true. With false a failed peer may
   * leave requests hanging, as in plain UCX.
   */
  errorHandling?: boolean;
  /** How long a graceful `close()` may take before it is forced, in ms. Default 5000. */
  closeTimeout?: number;
}

const K = CONSTANTS;
const REQ = layouts.ucp_request_param_t.offsets;
const FULL_MASK = (1n << 64n) - 1n;

const endpoints = new SlotTable<Endpoint>();
let errorCallback: bigint | undefined;

function errorCallbackAddress(): bigint {
  errorCallback ??= registerCallback('epError', (id: number, _ep: bigint | null, status: number) => {
    endpoints.get(id)?._onPeerError(status);
  });
  return errorCallback;
}

type State = 'open' | 'failed' | 'closing' | 'closed';

export interface EndpointEvents {
  error: [error: UcxError];
  close: [];
}

export class Endpoint extends EventEmitter<EndpointEvents> {
  readonly #worker: Worker;
  #handle: bigint | null;
  readonly #id: number;
  readonly #errorHandling: boolean;
  readonly #closeTimeout: number;
  readonly #peer: string;
  #state: State = 'open';
  #failure: UcxError | undefined;
  #closing: Promise<void> | undefined;
  /** Remote keys unpacked on this endpoint: destroyed before the endpoint. */
  readonly #keys = new Set<RemoteKey>();
  /** Receives posted through this endpoint (they are worker-wide in UCP): cancelled when it closes. */
  readonly #receives = new Set<AnyRequest>();

  /** @internal */
  static _create(
    worker: Worker, workerHandle: bigint, options: EndpointOptions,
    fill: (params: StructBuffer<keyof typeof layouts.ucp_ep_params_t.offsets>) => void, peer: string,
  ): Endpoint {
    return new Endpoint(worker, workerHandle, options, fill, peer);
  }

  private constructor(
    worker: Worker, workerHandle: bigint, options: EndpointOptions,
    fill: (params: StructBuffer<keyof typeof layouts.ucp_ep_params_t.offsets>) => void, peer: string,
  ) {
    super();
    this.#worker = worker;
    this.#peer = peer;
    this.#errorHandling = options.errorHandling ?? true;
    const closeTimeout = options.closeTimeout ?? 5000;
    if (typeof closeTimeout !== 'number' || !(closeTimeout >= 0)) {
      throw new RangeError(`closeTimeout must be a non-negative number of ms, got ${String(closeTimeout)}`);
    }
    this.#closeTimeout = closeTimeout;
    this.#id = endpoints.add(this);
    const params = new StructBuffer(layouts.ucp_ep_params_t);
    params.setU64('field_mask', K.UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE);
    if (this.#errorHandling) {
      params
        .setU64('field_mask', K.UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | K.UCP_EP_PARAM_FIELD_ERR_HANDLER)
        .setU32('err_mode', Number(K.UCP_ERR_HANDLING_MODE_PEER))
        .setPtr('err_handler.cb', errorCallbackAddress())
        .setPtr('err_handler.arg', BigInt(this.#id));
    }
    fill(params);
    const out = new OutCell();
    const status = ucx().ucp_ep_create(workerHandle, params.buffer, out.reset());
    if (status !== 0) {
      endpoints.delete(this.#id);
      throw errorFromStatus(status, `ucp_ep_create (${peer})`);
    }
    this.#handle = out.ptr();
    worker._endpointOpened(this);
  }

  /** The worker this endpoint belongs to. */
  get worker(): Worker {
    return this.#worker;
  }

  /** True once the endpoint is closed, closing, or failed. */
  get closed(): boolean {
    return this.#state !== 'open';
  }

  /** The error the peer failed with, if it did. */
  get failure(): UcxError | undefined {
    return this.#failure;
  }

  /** The `ucp_ep_h` handle, for code that calls libucp itself. */
  getHandle(): bigint {
    return this._live('use');
  }

  /** @internal Throws ClosedError (with the peer failure as cause) unless the endpoint is usable. */
  _live(what: string): bigint {
    if (this.#state !== 'open' || this.#handle === null) {
      const err = new ClosedError(`the Endpoint (${this.#peer})`);
      if (this.#failure !== undefined) (err as { cause?: unknown }).cause = this.#failure;
      throw Object.assign(err, { operation: what });
    }
    this.#worker._live('Endpoint');
    return this.#handle;
  }

  /**
   * Writes `source` into remote memory.
   *
   * - `memPut(source, remoteKey, offset = 0)`: at `offset` in the key's region; an `offset + length`
   *   outside the region is a RangeError, raised before anything reaches UCX.
   * - `memPut(source, remoteAddress, rkeyHandle)`: ucxx's raw form, unchecked (no bounds, no access).
   *
   * Completion is local (the source may be reused); `flush()` makes the data visible at the target.
   *
   * ```ts
   * await ep.memPut(new Uint8Array([1, 2, 3]), key, 64);
   * await ep.flush();
   * ```
   */
  memPut(source: BufferSource, remoteKey: RemoteKey, offset?: number | bigint): Request<void>;
  memPut(source: BufferSource, remoteAddress: bigint, rkeyHandle: bigint): Request<void>;
  memPut(source: BufferSource, target: RemoteKey | bigint, extra?: number | bigint): Request<void> {
    return this.#rma(true, source, target, extra);
  }

  /**
   * Reads remote memory into `destination`; the same forms and checks as `memPut`.
   *
   * ```ts
   * const back = new Uint8Array(3);
   * await ep.memGet(back, key, 64);
   * ```
   */
  memGet(destination: BufferSource, remoteKey: RemoteKey, offset?: number | bigint): Request<void>;
  memGet(destination: BufferSource, remoteAddress: bigint, rkeyHandle: bigint): Request<void>;
  memGet(destination: BufferSource, target: RemoteKey | bigint, extra?: number | bigint): Request<void> {
    return this.#rma(false, destination, target, extra);
  }

  #rma(put: boolean, memory: BufferSource, target: RemoteKey | bigint, extra: number | bigint | undefined): Request<void> {
    const what = put ? 'memPut' : 'memGet';
    const ep = this._live(what);
    const length = byteLengthOf(memory, put ? 'memPut source' : 'memGet destination');
    let address: bigint;
    let rkey: bigint;
    if (target instanceof RemoteKey) {
      rkey = target._handleFor(this, put ? 'write' : 'read');
      address = target._addressOf(extra === undefined ? 0n : toU64(extra, 'offset'), length);
    } else if (typeof target === 'bigint') {
      if (typeof extra !== 'bigint') {
        throw new TypeError(`${what}(buffer, remoteAddress, rkeyHandle): rkeyHandle must be a bigint handle`);
      }
      address = toU64(target, 'remoteAddress');
      rkey = extra;
    } else {
      throw new TypeError(`${what}: the target must be a RemoteKey or a bigint remote address`);
    }
    const worker = this.#worker;
    const request = worker._newRequest<void>(ResultKind.Void, what, memory);
    const param = worker._params.send.buffer;
    param.writeUInt32LE(request._id, REQ.user_data);
    const fn = put ? ucx().ucp_put_nbx : ucx().ucp_get_nbx;
    return worker._track(request, fn(ep, memory, length, address, rkey, param));
  }

  /**
   * Sends a tag message: plain `ucp_tag_send_nbx`, no framing, so any UCP peer receives exactly these
   * bytes. Completes when the buffer may be reused.
   *
   * ```ts
   * await ep.tagSend(Buffer.from('hi'), 7n);
   * ```
   */
  tagSend(buffer: BufferSource, tag: bigint | number): Request<void> {
    const ep = this._live('tagSend');
    const length = byteLengthOf(buffer, 'tagSend buffer');
    const t = toTag(tag, 'tag');
    const worker = this.#worker;
    const request = worker._newRequest<void>(ResultKind.Void, 'tagSend', buffer);
    const param = worker._params.send.buffer;
    param.writeUInt32LE(request._id, REQ.user_data);
    return worker._track(request, ucx().ucp_tag_send_nbx(ep, buffer, length, t, param));
  }

  /**
   * Receives a tag message matching `tag` under `tagMask`. UCP matches tags per worker, not per endpoint
   * (as in ucxx): this is `worker.tagRecv` whose request is also cancelled when this endpoint closes.
   */
  tagRecv(buffer: BufferSource, tag: bigint | number, tagMask: bigint | number = FULL_MASK): Request<TagRecvInfo> {
    this._live('tagRecv');
    return this.#worker._tagRecv(buffer, tag, tagMask, this.#receives);
  }

  /**
   * Completes every outstanding operation on this endpoint, remotely too: after it, puts are visible
   * at the target and gets have their data.
   */
  flush(): Request<void> {
    const ep = this._live('flush');
    const worker = this.#worker;
    const request = worker._newRequest<void>(ResultKind.Void, 'endpoint flush', null);
    const param = worker._params.send.buffer;
    param.writeUInt32LE(request._id, REQ.user_data);
    return worker._track(request, ucx().ucp_ep_flush_nbx(ep, param));
  }

  /**
   * Closes the endpoint: destroys the remote keys unpacked on it, cancels its receives, then closes
   * gracefully (flushing), forcing the close when the peer is gone or `closeTimeout` passes. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #close(): Promise<void> {
    const failed = this.#state === 'failed';
    this.#state = 'closing';
    for (const key of [...this.#keys]) key.close();
    for (const request of [...this.#receives]) request.cancel();
    const handle = this.#handle;
    const workerHandle = this.#worker._handle;
    if (handle !== null && workerHandle !== null) {
      // Let cancellations and the flush inside a graceful close run.
      await this.#worker._progressUntil(() => this.#receives.size === 0, 1000);
      let done = await this.#closeWith(handle, failed && this.#errorHandling);
      if (!done && this.#errorHandling) done = await this.#closeWith(handle, true);
    }
    for (const request of [...this.#receives]) request._abandon('the endpoint was closed');
    this.#handle = null;
    this.#state = 'closed';
    endpoints.delete(this.#id);
    this.#worker._endpointClosed(this);
    this.emit('close');
  }

  /** One ucp_ep_close_nbx attempt; true when the endpoint is gone. */
  async #closeWith(handle: bigint, force: boolean): Promise<boolean> {
    const worker = this.#worker;
    const request = worker._newRequest<void>(ResultKind.Void, 'endpoint close', null);
    const param = worker._params.close.buffer;
    param.writeUInt32LE(request._id, REQ.user_data);
    param.writeUInt32LE(force ? Number(K.UCP_EP_CLOSE_FLAG_FORCE) : 0, REQ.flags);
    const ptr = ucx().ucp_ep_close_nbx(handle, param);
    const status = statusOfPtr(ptr);
    worker._track(request, ptr);
    if (status !== 1) return true;
    const finished = await worker._progressUntil(() => request.completed, this.#closeTimeout);
    if (!finished) {
      // The close request stays with UCX; the worker's destruction releases it.
      return !force ? false : true;
    }
    return true;
  }

  /** @internal Called (from inside progress) when UCX reports the peer failed. */
  _onPeerError(status: number): void {
    if (this.#state !== 'open') return;
    this.#state = 'failed';
    this.#failure = errorFromStatus(status, `endpoint to ${this.#peer} failed`);
    const failure = this.#failure;
    this.#worker._defer(() => {
      if (this.listenerCount('error') > 0) this.emit('error', failure);
      void this.close();
    });
  }

  /** @internal */
  _keyUnpacked(key: RemoteKey): void {
    this.#keys.add(key);
  }

  /** @internal */
  _keyClosed(key: RemoteKey): void {
    this.#keys.delete(key);
  }

  /** @internal Unpacks a packed rkey on this endpoint. */
  _unpack(packed: Uint8Array): bigint {
    const ep = this._live('createRemoteKeyFromSerialized');
    const out = new OutCell();
    check(ucx().ucp_ep_rkey_unpack(ep, packed, out.reset()), 'ucp_ep_rkey_unpack');
    return out.ptr() as bigint;
  }
}
