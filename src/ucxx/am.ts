/**
 * ucxx's active messages, wire-compatible with ucxx's `Endpoint::amSend` / `amRecv` and
 * `Worker::registerAmReceiverCallback` (cpp/src/request_am.cpp, cpp/src/worker.cpp):
 *
 * - every message goes on UCP AM id 0 with `UCP_AM_SEND_FLAG_REPLY`, its UCP header being ucxx's
 *   AM header (am-header.ts: memory type, memory-type policy, receiver-callback info,
 *   user header);
 * - a worker handles AM id 0 from creation on (when its context has the 'am' feature, as ucxx): each
 *   message is attributed to the endpoint UCX names as its reply endpoint, and kept in that endpoint's
 *   queue, in arrival order, until `endpoint.amRecv()` takes it; a message naming a registered receiver
 *   callback goes to that callback instead;
 * - rendezvous data is fetched at once into host memory; a sender that said 'errorOnUnsupported' with
 *   a memory type other than host gets UCS_ERR_UNSUPPORTED (ucxx-ts has host memory only).
 *
 * `worker.setAmHandler(0, ...)` replaces this handler (the plain-UCP form then owns id 0).
 */
import { abortError } from '../internal/abort-error.js';
import { kBindSignal, kCancelFallback, kComplete, kFail, kHold, kLive, kMaxAmHeader, kReply } from '../internal/symbols.js';
import { UCS_ERR_IO_ERROR, UCS_ERR_NO_MEMORY, UCS_ERR_UNSUPPORTED } from '../ffi/index.js';
import { constants as bufferConstants } from 'node:buffer';
import { AlreadyExistsError, CanceledError, errorFromStatus, type UcxError } from '../errors/index.js';
import { Request, ResultKind } from '../request.js';
import { asBytes, optionsObject, show, type BufferSource } from '../internal/bytes.js';
import {
  decodeUcxxAmHeader, encodeAmOwner, encodeUcxxAmHeader, toAmCallbackId,
  type AmMemoryTypePolicy, type AmReceiverCallbackInfo, type UcxxAmHeader,
} from './am-header.js';
import type { AmMessage } from '../active-message.js';
import type { Endpoint } from '../endpoint.js';
import type { Worker } from '../worker.js';
import {
  InvalidArgumentError, ArgumentOutOfRangeError, INTERNAL, checkConstructorToken,
} from '../errors/misuse.js';
import type { UcxxAmServices } from '../worker/services.js';

/**
 * The UCP AM id ucxx sends and receives its active messages on.
 *
 * @example
 * ```ts
 * // hand AM id 0 to plain UCP active messages (ucxx's amRecv() then receives nothing)
 * worker.setAmHandler(UCXX_AM_ID, (msg) => console.log('plain AM on id 0:', msg.length, 'bytes'));
 * ```
 */
export const UCXX_AM_ID = 0;
const HOST = 0;

/** Options of ucxx's form of `endpoint.amSend(data, options)`. */
export interface UcxxAmSendOptions {
  /** The memory type the header announces (`ucs_memory_type_t`, default 0 = host). The data is host memory. */
  memoryType?: number;
  /** What the receiver does with a memory type it cannot allocate: default 'fallbackToHost'. */
  memoryTypePolicy?: AmMemoryTypePolicy;
  /** Deliver to this receiver callback (registered at the receiver) instead of its amRecv queue. */
  receiverCallbackInfo?: AmReceiverCallbackInfo | null;
  /** Opaque bytes carried in the header (keep them small: UCX limits the AM header size). */
  userHeader?: BufferSource | null;
  /** 'eager', 'rendezvous', or 'auto' (default: UCX decides by size). */
  protocol?: 'auto' | 'eager' | 'rendezvous';
}

/**
 * One ucxx active message received (by `endpoint.amRecv()` or a receiver callback).
 *
 * @example
 * ```ts
 * const msg = await ep.amRecv();
 * if (msg.error !== null) throw msg.error;   // the receive failed (as ucxx's request status)
 * console.log(msg.userHeader, msg.data);
 * ```
 */
export class UcxxAmMessage {
  /** The payload (host memory; empty when the receive failed). Eager payloads up to 16 KiB share slabs. */
  readonly data: Uint8Array;
  /** The user header (empty when none). */
  readonly userHeader: Uint8Array;
  /** The memory type the sender announced (0 = host). */
  readonly memoryType: number;
  /** The sender's memory-type policy. */
  readonly memoryTypePolicy: AmMemoryTypePolicy;
  /** The receiver callback the sender named, if any. */
  readonly receiverCallbackInfo: {
    /** The owner name. */
    readonly owner: string;
    /** The callback id. */
    readonly id: bigint;
  } | null;
  /** The endpoint it came from (UCX's reply endpoint), when it is one of this worker's. */
  readonly endpoint: Endpoint | null;
  /** Whether the payload came by rendezvous. */
  readonly rendezvous: boolean;
  /** Why the receive failed (as ucxx's request status), or null. */
  readonly error: UcxError | null;

  /** @internal Received messages only (IllegalConstructorError otherwise). */
  constructor(
    token: typeof INTERNAL, header: UcxxAmHeader, data: Uint8Array, endpoint: Endpoint | null, rendezvous: boolean,
    error: UcxError | null,
  ) {
    checkConstructorToken(token, 'UcxxAmMessage', 'endpoint.amRecv() or worker.registerAmReceiverCallback()');
    this.data = data;
    this.userHeader = header.userHeader;
    this.memoryType = header.memoryType;
    this.memoryTypePolicy = header.memoryTypePolicy;
    this.receiverCallbackInfo = header.receiverCallbackInfo;
    this.endpoint = endpoint;
    this.rendezvous = rendezvous;
    this.error = error;
  }
}

/** A receiver callback: gets every message that names it, once received (check `message.error`). */
export type AmReceiverCallback = (message: UcxxAmMessage) => void | Promise<void>;

interface Waiter {
  resolve: (message: Promise<UcxxAmMessage>) => void;
  reject: (error: Error) => void;
}

/** An endpoint's messages not yet taken, and the amRecv calls waiting for one. */
interface EndpointQueue {
  readonly ready: Promise<UcxxAmMessage>[];
  readonly waiters: Waiter[];
}

const EMPTY = new Uint8Array(0);

/** Allocates the buffer of a received ucxx active message's data: `length` bytes, exactly. */
export type AmAllocator = (length: number) => Uint8Array;

class UcxxAmState {
  readonly #worker: UcxxAmServices;
  readonly callbacks = new Map<string, Map<bigint, AmReceiverCallback>>();
  /** registerAmAllocator's allocator (host memory), or null for a new Uint8Array per message. */
  allocator: AmAllocator | null = null;
  readonly #queues = new Map<Endpoint, EndpointQueue>();

  constructor(worker: Worker) {
    this.#worker = worker;
  }

  #queue(endpoint: Endpoint): EndpointQueue {
    let queue = this.#queues.get(endpoint);
    if (queue === undefined) {
      const created: EndpointQueue = { ready: [], waiters: [] };
      queue = created;
      this.#queues.set(endpoint, created);
      endpoint.once('close', () => {
        this.#queues.delete(endpoint);
        for (const waiter of created.waiters.splice(0)) waiter.reject(new CanceledError('amRecv: the endpoint was closed'));
        created.ready.length = 0;
      });
    }
    return queue;
  }

  /** Runs inside worker progress for every message on AM id 0. */
  onMessage(msg: AmMessage): void {
    const endpoint = msg.replyEndpoint;
    let header: UcxxAmHeader;
    try {
      header = decodeUcxxAmHeader(msg.header);
    } catch (err) {
      msg.reject();
      if (endpoint === null) warn(`dropped a message with a malformed header: ${String(err)}`);
      else this.#deliver(endpoint, Promise.reject(err as Error));
      return;
    }
    let callback: AmReceiverCallback | undefined;
    const info = header.receiverCallbackInfo;
    if (info !== null) {
      callback = this.callbacks.get(info.owner)?.get(info.id);
      if (callback === undefined) {
        msg.reject();
        warn(`dropped a message for receiver callback owner '${info.owner}' id ${info.id}: none is registered`);
        return;
      }
    } else if (endpoint === null) {
      msg.reject();
      warn('dropped a message without a known reply endpoint (ucxx senders set UCP_AM_SEND_FLAG_REPLY)');
      return;
    }
    const received = this.#receive(msg, header, endpoint);
    if (callback !== undefined) {
      const cb = callback;
      void received.then((message) => {
        try {
          const result = cb(message);
          if (result instanceof Promise) result.catch((err: unknown) => warn(`a receiver callback failed: ${String(err)}`));
        } catch (err) {
          warn(`a receiver callback failed: ${String(err)}`);
        }
      });
    } else {
      this.#deliver(endpoint as Endpoint, received.then((message) => {
        if (message.error !== null) throw message.error;
        return message;
      }));
    }
  }

  /** The message once its data is here; never rejects (a failure is the message's `error`). */
  #receive(msg: AmMessage, header: UcxxAmHeader, endpoint: Endpoint | null): Promise<UcxxAmMessage> {
    const failed = (status: number): Promise<UcxxAmMessage> => {
      msg.reject(status);
      const error = errorFromStatus(status, 'ucxx AM receive');
      return Promise.resolve(new UcxxAmMessage(INTERNAL, header, EMPTY, endpoint, msg.rendezvous, error));
    };
    // The user's allocator, as ucxx's: eager data is copied into its buffer, rendezvous data lands in it.
    let target: Uint8Array | undefined;
    if (this.allocator !== null && msg.length > 0 && msg.length <= bufferConstants.MAX_LENGTH) {
      try {
        const allocated = this.allocator(msg.length);
        if (!(allocated instanceof Uint8Array) || allocated.byteLength !== msg.length) {
          throw new InvalidArgumentError(`the AM allocator must return a Uint8Array of ${msg.length} bytes, got ${show(allocated)}`);
        }
        target = allocated;
      } catch (err) {
        warn(`the AM allocator failed (${String(err)}); the message is refused`);
        return failed(UCS_ERR_NO_MEMORY);
      }
    }
    if (!msg.rendezvous) {
      const data = msg.data ?? EMPTY;
      if (target !== undefined) target.set(data);
      return Promise.resolve(new UcxxAmMessage(INTERNAL, header, target ?? data, endpoint, false, null));
    }
    if (header.memoryType !== HOST && header.memoryTypePolicy === 'errorOnUnsupported') return failed(UCS_ERR_UNSUPPORTED);
    if (msg.length > bufferConstants.MAX_LENGTH) return failed(UCS_ERR_NO_MEMORY);
    let request: Request<Uint8Array>;
    try {
      request = msg.receive(target);
    } catch {
      return failed(UCS_ERR_NO_MEMORY);
    }
    return request.promise.then(
      (data) => new UcxxAmMessage(INTERNAL, header, data, endpoint, true, null),
      (err: unknown) => new UcxxAmMessage(INTERNAL, header, EMPTY, endpoint, true,
        (err as UcxError).status !== undefined ? err as UcxError : errorFromStatus(UCS_ERR_IO_ERROR, String(err))),
    );
  }

  #deliver(endpoint: Endpoint, message: Promise<UcxxAmMessage>): void {
    message.catch(() => undefined); // observed by whoever takes it
    const queue = this.#queue(endpoint);
    const waiter = queue.waiters.shift();
    if (waiter !== undefined) waiter.resolve(message);
    else queue.ready.push(message);
  }

  /** Whether a message from `endpoint` waits in its queue for an amRecv. */
  probe(endpoint: Endpoint): boolean {
    return (this.#queues.get(endpoint)?.ready.length ?? 0) > 0;
  }

  amRecv(endpoint: Endpoint, signal: AbortSignal | undefined): Request<UcxxAmMessage> {
    endpoint[kLive]('amRecv');
    const result = new Request<UcxxAmMessage>(INTERNAL, null, ResultKind.Value, 'amRecv', null);
    const settle = (message: Promise<UcxxAmMessage>): void => {
      message.then((m) => {
        result[kReply] = m;
        result[kComplete](0, 0, 0n);
      }, (err: unknown) => result[kFail](err instanceof Error ? err : new Error(String(err))));
    };
    const queue = this.#queue(endpoint);
    const ready = queue.ready.shift();
    if (ready !== undefined) {
      settle(ready);
      return result;
    }
    // Waiting for a message keeps the worker (and the process) awake, as a posted receive does.
    const worker = this.#worker;
    worker[kHold](1);
    let held = true;
    const release = (): void => {
      if (!held) return;
      held = false;
      worker[kHold](-1);
    };
    const waiter: Waiter = {
      resolve: (message) => { release(); settle(message); },
      reject: (error) => { release(); result[kFail](error); },
    };
    queue.waiters.push(waiter);
    // cancel() and the signal take the waiter out of the queue: a message arriving later waits for the next amRecv.
    result[kCancelFallback] = () => {
      const i = queue.waiters.indexOf(waiter);
      if (i < 0) return;
      queue.waiters.splice(i, 1);
      waiter.reject(signal?.aborted === true ? abortError('amRecv', signal.reason) : new CanceledError('amRecv: canceled'));
    };
    result[kBindSignal](signal);
    return result;
  }
}

const states = new WeakMap<Worker, UcxxAmState>();

function stateOf(worker: Worker): UcxxAmState {
  let state = states.get(worker);
  if (state === undefined) {
    state = new UcxxAmState(worker);
    states.set(worker, state);
  }
  return state;
}

/** @internal Called by the Worker constructor: handles AM id 0 the ucxx way. */
export function installUcxxAm(worker: Worker): void {
  const state = stateOf(worker);
  worker.setAmHandler(UCXX_AM_ID, (msg) => state.onMessage(msg));
}

/** Sends `data` as a ucxx active message (see Endpoint.amSend). */
export function ucxxAmSend(endpoint: Endpoint, data: BufferSource | null, options: UcxxAmSendOptions = {}): Request<void> {
  endpoint[kLive]('amSend');
  options = optionsObject(options, 'amSend options');
  const userHeader = options.userHeader === undefined || options.userHeader === null
    ? null : asBytes(options.userHeader, 'amSend userHeader');
  const header = encodeUcxxAmHeader({
    memoryType: options.memoryType,
    memoryTypePolicy: options.memoryTypePolicy,
    receiverCallbackInfo: options.receiverCallbackInfo,
    userHeader,
  });
  const max = endpoint.worker[kMaxAmHeader]();
  if (header.byteLength > max) {
    throw new ArgumentOutOfRangeError(`amSend: the ucxx AM header takes ${header.byteLength} bytes (user header ` +
      `${userHeader?.byteLength ?? 0}); this UCX accepts at most ${max}`);
  }
  return endpoint.amSend(UCXX_AM_ID, header, data, { protocol: options.protocol, reply: true });
}

/** Whether a ucxx active message from `endpoint` waits for an amRecv (see Endpoint.amProbe). */
export function ucxxAmProbe(endpoint: Endpoint): boolean {
  endpoint[kLive]('amProbe');
  endpoint.worker.progress();
  return stateOf(endpoint.worker).probe(endpoint);
}

/** The next ucxx active message from `endpoint` (see Endpoint.amRecv). */
export function ucxxAmRecv(endpoint: Endpoint, options: { signal?: AbortSignal } = {}): Request<UcxxAmMessage> {
  options = optionsObject(options, 'amRecv options');
  return stateOf(endpoint.worker).amRecv(endpoint, options.signal);
}

/** Registers a receiver callback (see Worker.registerAmReceiverCallback). */
/** Sets (or, with null, removes) the allocator of a worker's received ucxx AM data (see Worker.registerAmAllocator). */
export function registerAmAllocator(worker: Worker, allocator: AmAllocator | null, memoryType: string): void {
  worker[kLive]('Worker');
  if (memoryType !== 'host') {
    throw new ArgumentOutOfRangeError(`registerAmAllocator: ucxx-ts receives into host memory only, not ${show(memoryType)}`);
  }
  if (allocator !== null && typeof allocator !== 'function') throw new InvalidArgumentError('registerAmAllocator: allocator must be a function or null');
  stateOf(worker).allocator = allocator;
}

export function registerAmReceiverCallback(worker: Worker, info: AmReceiverCallbackInfo, callback: AmReceiverCallback): void {
  worker[kLive]('Worker');
  if (info === null || typeof info !== 'object') throw new InvalidArgumentError('registerAmReceiverCallback: info must be { owner, id }');
  encodeAmOwner(info.owner); // validates the name
  const id = toAmCallbackId(info.id);
  if (typeof callback !== 'function') throw new InvalidArgumentError('registerAmReceiverCallback: callback must be a function');
  if (info.owner === 'ucxx') throw new ArgumentOutOfRangeError("the receiver-callback owner name 'ucxx' is reserved (as in ucxx)");
  const callbacks = stateOf(worker).callbacks;
  let byId = callbacks.get(info.owner);
  if (byId === undefined) {
    byId = new Map();
    callbacks.set(info.owner, byId);
  }
  if (byId.has(id)) throw new AlreadyExistsError(`a receiver callback for owner '${info.owner}' id ${id} is already registered`);
  byId.set(id, callback);
}

function warn(message: string): void {
  process.emitWarning(`ucxx-ts: ucxx active message: ${message}`, { code: 'UCXX_AM_DROPPED' });
}

