/**
 * An Endpoint after ucxx Python's handshake, with ucxx Python's message helpers
 * (python/ucxx/ucxx/_lib_async/endpoint.py). Every message is a plain UCP tag message:
 *
 * - `send(buffer)` / `recv(buffer)`: one message with the peer's tag / our tag (full mask).
 * - `sendObj(bytes)` / `recvObj()`: two messages with that tag, the byte length as a native-order
 *   (little-endian) u64, then the bytes.
 * - `sendMulti(buffers)` / `recvMulti()`: ucxx C++'s tagMulti: ceil(n / 100) 1209-byte headers, then the
 *   n frames, all with that tag (see tag-multi-header.ts).
 *
 * A user tag (`{ tag }`) is combined with the endpoint's tag as ucxx does, `hash64bits(endpointTag,
 * hash(tag))`, for int tags; `{ tag, forceTag: true }` uses the tag as is.
 */
import { constants as bufferConstants } from 'node:buffer';
import type { Endpoint } from '../endpoint.js';
import type { TagProbeResult } from '../worker.js';
import { optionsObject, byteLengthOf, type BufferSource, show, FULL_MASK } from '../internal/bytes.js';
import { MessageFormatError } from './errors.js';
import type { PeerTags } from './handshake.js';
import { messageTag } from './peer-info.js';
import { HEADER_BYTES, decodeHeader, encodeHeaders } from './tag-multi-header.js';
import {
  InvalidArgumentError, ArgumentOutOfRangeError, INTERNAL, checkConstructorToken,
} from '../errors/misuse.js';


/** Options of the ucxx Python message helpers' sends. */
export interface UcxxPythonTagOptions {
  /** A user tag (an integer), combined with the endpoint's tag as ucxx Python combines it. */
  tag?: bigint | number;
  /** Use `tag` as the UCP tag itself (ucxx Python's force_tag). */
  forceTag?: boolean;
}

/** Options of the receives into a buffer you give. */
export interface UcxxPythonRecvOptions extends UcxxPythonTagOptions {
  /** Rejects the receive with CanceledError when aborted. */
  signal?: AbortSignal;
}

/** Options of `recvObj`. */
export interface UcxxPythonRecvObjOptions extends UcxxPythonAllocatingRecvOptions {
  /**
   * Allocates the object's buffer, as ucxx Python's `recv_obj(allocator=...)`: called with the announced
   * byte length (within `maxBytes`), it returns a Uint8Array of exactly that length. Default: a new
   * Uint8Array.
   */
  allocator?: (length: number) => Uint8Array;
}

/** Options of `tagProbe`. */
export interface UcxxPythonProbeOptions extends UcxxPythonTagOptions {
  /** Take the message out of the queue: the result's `receive` (or `recvWithHandle`) gets it. */
  remove?: boolean;
}

/** Options of the receives that allocate what arrives. */
export interface UcxxPythonAllocatingRecvOptions extends UcxxPythonRecvOptions {
  /**
   * The most bytes the peer may make this receive allocate (recvObj's object; recvMulti's frames
   * together). Default: the largest Buffer Node can allocate. Above it: MessageFormatError.
   */
  maxBytes?: number;
}

function limitOf(options: UcxxPythonAllocatingRecvOptions): number {
  const max = options.maxBytes ?? bufferConstants.MAX_LENGTH;
  if (typeof max !== 'number' || !(max >= 0)) throw new ArgumentOutOfRangeError(`maxBytes must be a non-negative number, got ${show(max)}`);
  return Math.min(max, bufferConstants.MAX_LENGTH);
}

/**
 * An endpoint paired with a ucxx Python peer (its handshake done): ucxx Python's send/recv,
 * sendMulti/recvMulti and sendObj/recvObj framing on the exchanged tags.
 *
 * @example
 * ```ts
 * const ep = await worker.connect(host, port, { handshake: 'ucxx-python' });
 * await ep.send(data);
 * ```
 */
export class UcxxPythonEndpoint implements AsyncDisposable {
  /** The underlying Endpoint (for RMA, flush, events...). */
  readonly endpoint: Endpoint;
  /** The tag this side sends with (the peer's msg_tag). */
  readonly msgTagSend: bigint;
  /** The tag this side receives with (its own msg_tag). */
  readonly msgTagRecv: bigint;

  /** @internal Made by `worker.connect(..., { handshake: 'ucxx-python' })` and the ucxx Python listener. */
  constructor(token: typeof INTERNAL, endpoint: Endpoint, tags: PeerTags) {
    checkConstructorToken(token, 'UcxxPythonEndpoint', "worker.connect(host, port, { handshake: 'ucxx-python' }) or its listener");
    this.endpoint = endpoint;
    this.msgTagSend = tags.msgTagSend;
    this.msgTagRecv = tags.msgTagRecv;
  }

  /** True once the endpoint is closed, closing or failed. */
  get closed(): boolean {
    return this.endpoint.closed;
  }

  /** Receives that completed (recv, recvObj, recvMulti, amRecv, recvWithHandle), as ucxx Python counts. */
  #finishedRecvs = 0;
  /** The count at which `closeAfterNRecv` aborts the endpoint, if set. */
  #closeAfter: number | null = null;

  /** Counts a completed receive; aborts the endpoint when `closeAfterNRecv`'s count is reached. */
  #received<T>(value: T): T {
    this.#finishedRecvs++;
    if (this.#closeAfter !== null && this.#finishedRecvs >= this.#closeAfter) void this.abort();
    return value;
  }

  /**
   * ucxx Python's `close_after_n_recv(n, count_from_ep_creation)`: aborts the endpoint once `n` more
   * receives have completed (counted from the endpoint's creation with `fromCreation`). As in ucxx
   * Python, recv, recvMulti, amRecv and recvWithHandle count one each and recvObj two (its size and its
   * data). Set once; an `n` already passed is a RangeError.
   *
   * @example
   * ```ts
   * ep.closeAfterNRecv(1);
   * const length = await ep.recv(buffer); // the endpoint closes after it
   * ```
   */
  closeAfterNRecv(n: number, fromCreation = false): void {
    if (!Number.isSafeInteger(n) || n < 0) throw new ArgumentOutOfRangeError(`closeAfterNRecv: n must be a non-negative integer, got ${show(n)}`);
    const target = fromCreation ? n : n + this.#finishedRecvs;
    if (this.#closeAfter !== null) throw new InvalidArgumentError(`closeAfterNRecv has already been set to ${this.#closeAfter} (from creation)`);
    if (target < this.#finishedRecvs) {
      throw new ArgumentOutOfRangeError(`closeAfterNRecv: ${target} is below the receives already done (${this.#finishedRecvs})`);
    }
    if (target === this.#finishedRecvs) void this.abort();
    else this.#closeAfter = target;
  }

  /**
   * ucxx Python's `set_close_callback(callback)`: `callback` runs once when the endpoint closes, by
   * either side or by its peer's failure.
   *
   * @example
   * ```ts
   * ep.setCloseCallback(() => console.log('the connection is gone'));
   * ```
   */
  setCloseCallback(callback: () => void): void {
    if (typeof callback !== 'function') throw new InvalidArgumentError('setCloseCallback takes a function');
    if (this.endpoint.closed) queueMicrotask(callback);
    else this.endpoint.once('close', callback);
  }

  /**
   * ucxx Python's `abort()`: ends the connection now, without waiting for what is in flight (each
   * operation still pending rejects with CanceledError), as its close without a flush. Idempotent.
   *
   * @example
   * ```ts
   * try { await work(ep); } finally { await ep.abort(); }
   * ```
   */
  abort(): Promise<void> {
    if (!this.endpoint.closed) this.endpoint.cancelInflightRequests();
    return this.endpoint.close();
  }

  /**
   * ucxx Python's `am_send(buffer)`: one ucxx active message (the ucxx form of `Endpoint.amSend`).
   *
   * @example
   * ```ts
   * await ep.amSend(Buffer.from('hello')); // Python: await ep.am_recv()
   * ```
   */
  async amSend(buffer: BufferSource): Promise<void> {
    await this.endpoint.amSend(buffer).promise;
  }

  /**
   * ucxx Python's `am_recv()`: the next ucxx active message's bytes from this endpoint.
   *
   * @example
   * ```ts
   * const bytes = await ep.amRecv(); // Python: await ep.am_send(data)
   * ```
   */
  async amRecv(options: { signal?: AbortSignal } = {}): Promise<Uint8Array> {
    const message = await this.endpoint.amRecv(options).promise;
    return this.#received(message.data);
  }

  /**
   * ucxx Python's `tag_probe(tag, force_tag, remove)`: whether a message for this endpoint's tag (with the
   * user tag combined as `recv` does) has arrived, without receiving it; null when none has. With
   * `remove`, `recvWithHandle` (or the result's `receive`) takes it.
   *
   * @example
   * ```ts
   * const probe = ep.tagProbe({ remove: true });
   * if (probe) await ep.recvWithHandle(new Uint8Array(probe.length), probe);
   * ```
   */
  tagProbe(options: UcxxPythonProbeOptions = {}): TagProbeResult | null {
    options = optionsObject(options, 'tagProbe options');
    return this.endpoint.worker.tagProbe(this.#recvTag(options), FULL_MASK, { remove: options.remove === true });
  }

  /**
   * ucxx Python's `recv_with_handle(buffer, probe_result)`: receives the message a `tagProbe` with
   * `remove: true` took; resolves with its length.
   *
   * @example
   * ```ts
   * const probe = ep.tagProbe({ remove: true });
   * if (probe) console.log(await ep.recvWithHandle(new Uint8Array(probe.length), probe));
   * ```
   */
  async recvWithHandle(buffer: BufferSource, probe: TagProbeResult): Promise<number> {
    if (probe?.receive === null || typeof probe?.receive !== 'function') {
      throw new InvalidArgumentError('recvWithHandle needs the result of tagProbe({ remove: true })');
    }
    const info = await probe.receive(buffer).promise;
    return this.#received(info.length);
  }

  #sendTag(options: UcxxPythonTagOptions): bigint {
    return messageTag(this.msgTagSend, options.tag, options.forceTag === true);
  }

  #recvTag(options: UcxxPythonTagOptions): bigint {
    return messageTag(this.msgTagRecv, options.tag, options.forceTag === true);
  }

  /** Sends each buffer as one tag message, in order; settles when all have completed. */
  async #sendAll(buffers: readonly BufferSource[], tag: bigint): Promise<void> {
    const pending: Promise<void>[] = [];
    try {
      for (const buffer of buffers) pending.push(this.endpoint.tagSend(buffer, tag).promise);
    } catch (err) {
      // Those already posted settle on their own; nobody waits for them any more.
      for (const p of pending) p.catch(() => undefined);
      throw err;
    }
    await Promise.all(pending);
  }

  /**
   * ucxx Python's `send(buffer)`: one tag message.
   *
   * @example
   * ```ts
   * await ep.send(Buffer.from('hello'));
   * await ep.send(data, { tag: 7 }); // a user tag, combined with the endpoint's as ucxx Python does
   * ```
   */
  async send(buffer: BufferSource, options: UcxxPythonTagOptions = {}): Promise<void> {
    options = optionsObject(options, 'send options');
    await this.endpoint.tagSend(buffer, this.#sendTag(options)).promise;
  }

  /**
   * ucxx Python's `recv(buffer)`: one tag message into `buffer`; resolves with its length. A message
   * longer than the buffer is a MessageTruncatedError; a shorter one fills the start (as in ucxx).
   *
   * @example
   * ```ts
   * const buffer = new Uint8Array(1024);
   * const length = await ep.recv(buffer, { signal: AbortSignal.timeout(5000) });
   * ```
   */
  async recv(buffer: BufferSource, options: UcxxPythonRecvOptions = {}): Promise<number> {
    options = optionsObject(options, 'recv options');
    const info = await this.endpoint.tagRecv(buffer, this.#recvTag(options), FULL_MASK, { signal: options.signal }).promise;
    return this.#received(info.length);
  }

  /**
   * ucxx Python's `send_obj(obj)`: the length as a little-endian u64, then the bytes.
   *
   * @example
   * ```ts
   * await ep.sendObj(Buffer.from(JSON.stringify({ op: 'ping' }))); // Python: obj = await ep.recv_obj()
   * ```
   */
  async sendObj(bytes: BufferSource, options: UcxxPythonTagOptions = {}): Promise<void> {
    options = optionsObject(options, 'sendObj options');
    const tag = this.#sendTag(options);
    const size = new Uint8Array(8);
    new DataView(size.buffer).setBigUint64(0, BigInt(byteLengthOf(bytes, 'sendObj bytes')), true);
    await this.#sendAll([size, bytes], tag);
  }

  /**
   * ucxx Python's `recv_obj()`: receives the length, then that many bytes into a new Uint8Array.
   *
   * @example
   * ```ts
   * const bytes = await ep.recvObj({ maxBytes: 1 << 20 }); // Python: await ep.send_obj(b'...')
   * const message = JSON.parse(Buffer.from(bytes).toString('utf8'));
   * ```
   */
  async recvObj(options: UcxxPythonRecvObjOptions = {}): Promise<Uint8Array> {
    options = optionsObject(options, 'recvObj options');
    const limit = limitOf(options);
    const allocator = options.allocator;
    if (allocator !== undefined && typeof allocator !== 'function') throw new InvalidArgumentError('recvObj: allocator must be a function');
    const tag = this.#recvTag(options);
    const sizeBytes = new Uint8Array(8);
    const first = await this.endpoint.tagRecv(sizeBytes, tag, FULL_MASK, { signal: options.signal }).promise;
    this.#received(null); // ucxx Python's recv_obj is two recv calls, each counted
    if (first.length !== 8) throw new MessageFormatError(`recv_obj: the size message is ${first.length} bytes, expected 8`);
    const size = new DataView(sizeBytes.buffer).getBigUint64(0, true);
    if (size > BigInt(limit)) throw new MessageFormatError(`recv_obj: the peer announced ${size} bytes, above the limit of ${limit}`);
    const data = allocator === undefined ? new Uint8Array(Number(size)) : allocator(Number(size));
    if (!(data instanceof Uint8Array) || data.byteLength !== Number(size)) {
      throw new InvalidArgumentError(`recvObj: the allocator must return a Uint8Array of ${size} bytes, got ${show(data)}`);
    }
    const second = await this.endpoint.tagRecv(data, tag, FULL_MASK, { signal: options.signal }).promise;
    if (second.length !== data.byteLength) {
      throw new MessageFormatError(`recv_obj: received ${second.length} bytes, the peer announced ${size}`);
    }
    return this.#received(data);
  }

  /**
   * ucxx Python's `send_multi(buffers)`: the headers, then each buffer as its own message. An empty
   * list is a RangeError (ucxx sends nothing for it and its request never completes).
   *
   * @example
   * ```ts
   * await ep.sendMulti([header, payload]); // Python: frames = await ep.recv_multi()
   * ```
   */
  async sendMulti(buffers: readonly BufferSource[], options: UcxxPythonTagOptions = {}): Promise<void> {
    options = optionsObject(options, 'sendMulti options');
    if (!Array.isArray(buffers)) throw new InvalidArgumentError('sendMulti takes an array of buffers');
    if (buffers.length === 0) throw new ArgumentOutOfRangeError('sendMulti needs at least one buffer');
    const tag = this.#sendTag(options);
    const sizes = buffers.map((b: BufferSource) => byteLengthOf(b, 'sendMulti buffer'));
    await this.#sendAll([...encodeHeaders(sizes), ...buffers], tag);
  }

  /**
   * ucxx Python's `recv_multi()`: receives headers until one says no more follow, then every frame they
   * describe; resolves with the frames (new Uint8Arrays; CUDA frames arrive in host memory). Each header
   * must be 1209 bytes and each frame as long as its header says (MessageFormatError otherwise).
   *
   * @example
   * ```ts
   * const [header, payload] = await ep.recvMulti({ maxBytes: 256 << 20 });
   * ```
   */
  async recvMulti(options: UcxxPythonAllocatingRecvOptions = {}): Promise<Uint8Array[]> {
    options = optionsObject(options, 'recvMulti options');
    const limit = limitOf(options);
    const tag = this.#recvTag(options);
    const sizes: bigint[] = [];
    for (;;) {
      const bytes = new Uint8Array(HEADER_BYTES);
      const info = await this.endpoint.tagRecv(bytes, tag, FULL_MASK, { signal: options.signal }).promise;
      const header = decodeHeader(bytes.subarray(0, info.length));
      sizes.push(...header.sizes);
      if (!header.next) break;
    }
    const total = sizes.reduce((a, b) => a + b, 0n);
    if (total > BigInt(limit)) {
      throw new MessageFormatError(`recv_multi: the peer announced ${sizes.length} frames of ${total} bytes, above the limit of ${limit}`);
    }
    const frames = sizes.map((size) => new Uint8Array(Number(size)));
    // Posted in order before any completes: UCP matches same-tag receives in the order they were posted.
    const requests = frames.map((frame) => this.endpoint.tagRecv(frame, tag, FULL_MASK, { signal: options.signal }).promise);
    const infos = await Promise.all(requests);
    infos.forEach((info, i) => {
      if (info.length !== frames[i]?.byteLength) {
        throw new MessageFormatError(`recv_multi: frame ${i} is ${info.length} bytes, its header says ${frames[i]?.byteLength}`);
      }
    });
    return this.#received(frames);
  }

  /**
   * Closes the endpoint (ucxx Python's close sends nothing to the peer either). Idempotent.
   *
   * @example
   * ```ts
   * await ep.close(); // or `await using ep = await worker.connect(...)`
   * ```
   */
  close(): Promise<void> {
    return this.endpoint.close();
  }

  /** The same as `close()`, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
