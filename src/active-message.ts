/**
 * Active messages: `endpoint.amSend(id, header, data)` on one side, `worker.setAmHandler(id, handler)`
 * or `for await (const msg of worker.amMessages(id))` on the other. AM ids are the caller's (plain UCP
 * AM: C programs using ucp_am_send_nbx / ucp_worker_set_am_recv_handler with the same id interoperate).
 *
 * A handler runs as soon as UCX has the message, from inside worker progress:
 * - small (eager) messages arrive whole: `msg.data` holds a copy of the payload;
 * - large (rendezvous) messages arrive as a descriptor: the handler calls `msg.receive(buffer?)` to
 *   fetch the data into a buffer it chooses (or one allocated for it), or `msg.reject(status)`.
 *   Rejecting synchronously inside the handler sends `status` to the sender, whose request fails with
 *   it. A rendezvous message the handler neither received nor rejected by the time it returned (or its
 *   Promise settled) is released.
 * Handlers must not close the worker or progress it synchronously; close paths wait for progress to
 * return by themselves.
 *
 * ```ts
 * // ask a peer for its memory key (see examples/am-key-exchange.ts)
 * worker.setAmHandler(KEY_REQUEST, (msg) => {
 *   msg.replyEndpoint?.amSend(KEY_REPLY, null, region.createRemoteKey().serialize());
 * });
 * ```
 */
import {
  CONSTANTS, UCS_ERR_REJECTED, UCS_INPROGRESS, UCS_OK, layouts, readStruct, registerCallback, ucx, type Address,
} from './ffi/index.js';
import { copyPayload } from './internal/payload-slab.js';
import { ClosedError } from './errors/index.js';
import { Request, ResultKind } from './request.js';
import { requestOperation } from './engine/operations.js';
import { SlotTable } from './internal/slot-table.js';
import { asBytes, type BufferSource, optionsObject, show } from './internal/bytes.js';
import {
  kBindSignal, kComplete, kDetachable, kEndpointByHandle, kReply, kReplyHandle, kRequests, kServeFastLane, kUpdateBusy,
} from './internal/symbols.js';
import type { Endpoint } from './endpoint.js';
import { onStreamEndMessage } from './endpoint/stream-end.js';
import { onFastLaneMessage } from './endpoint/fast-lane.js';
import { AM_ID_FAST_LANE, AM_ID_MAX, AM_ID_STREAM_END } from './am-ids.js';
import type { ReceiveOptions, Worker } from './worker.js';
import {
  InvalidArgumentError, ArgumentOutOfRangeError, InvalidStateError, INTERNAL, checkConstructorToken,
} from './errors/misuse.js';
import type { AmServices } from './worker/services.js';

// Keys of this module's own members (no other module uses them).
const kDecision: unique symbol = Symbol('ucxx-ts.decision');
const kRelease: unique symbol = Symbol('ucxx-ts.release');
const kPendingDescriptors: unique symbol = Symbol('ucxx-ts.pendingDescriptors');
const kOnMessage: unique symbol = Symbol('ucxx-ts.onMessage');
const kReleaseDescriptor: unique symbol = Symbol('ucxx-ts.releaseDescriptor');

const K = CONSTANTS;
const RECV_PARAM = layouts.ucp_am_recv_param_t;
/** The receive attributes ucxx-ts reads are all in the low 32 bits of `recv_attr`. */
const ATTR_REPLY_EP = Number(K.UCP_AM_RECV_ATTR_FIELD_REPLY_EP);
const ATTR_RNDV = Number(K.UCP_AM_RECV_ATTR_FLAG_RNDV);
/** Zero bytes, shared (nothing can be written into it). */
const EMPTY = new Uint8Array(0);

/** A handler of active messages of one id: see `worker.setAmHandler()`. */
export type AmHandler = (message: AmMessage) => void | Promise<void>;

const dispatchers = new SlotTable<AmDispatcher>();

/** @internal For getDiagnostics(): one dispatcher per worker, from its creation to its close. */
export function liveWorkerCount(): number {
  return dispatchers.size;
}

/**
 * AM ids a worker registers with UCX at its creation (when its context has the 'am' feature), so that a
 * message that arrives before the program set a handler for its id is held for that handler instead of
 * being dropped by UCX. UCX keeps one small entry per id up to the highest registered, and registering
 * every one of the 65,536 ids would cost each worker tens of milliseconds.
 *
 * @example
 * ```ts
 * // an id below AM_IDS_HELD can get its handler after the peer sent to it: nothing is lost
 * const id = 7;
 * if (id >= AM_IDS_HELD) worker.setAmHandler(id, handler); // before any peer can send to it
 * ```
 */
export const AM_IDS_HELD = 256;
/** Messages (and eager bytes) a worker holds for ids without a handler; beyond either, it drops them. */
const HELD_MESSAGES_MAX = 1024;
const HELD_BYTES_MAX = 64 << 20;
let heldMessages = 0;

/** @internal For getDiagnostics(): messages held, all workers of this thread, for ids without a handler. */
export function heldAmMessageCount(): number {
  return heldMessages;
}

/**
 * A rendezvous descriptor UCX holds for us until we receive or release it. A message that is dropped
 * without either is released when it is garbage-collected, so forgetting one leaks nothing for long.
 */
class PendingDescriptor {
  #descriptor: bigint | null;
  readonly #dispatcher: AmDispatcher;
  constructor(dispatcher: AmDispatcher, descriptor: bigint) {
    this.#dispatcher = dispatcher;
    this.#descriptor = descriptor;
    dispatcher[kPendingDescriptors].add(this);
  }

  /** Hands the descriptor over (to ucp_am_recv_data_nbx); null when already taken or released. */
  take(): bigint | null {
    const descriptor = this.#descriptor;
    this.#descriptor = null;
    this.#dispatcher[kPendingDescriptors].delete(this);
    return descriptor;
  }

  release(): void {
    const descriptor = this.take();
    if (descriptor !== null) this.#dispatcher[kReleaseDescriptor](descriptor);
  }
}

const forgottenMessages = new FinalizationRegistry<PendingDescriptor>((pending) => pending.release());
let amCallback: bigint | undefined;

function amCallbackAddress(): bigint {
  amCallback ??= registerCallback(
    'amRecv',
    (arg: number, header: Address, headerLength: number, data: Address, length: number, param: Address) => {
      const dispatcher = dispatchers.get(Math.floor(arg / 0x10000));
      if (dispatcher === undefined) return UCS_OK;
      return dispatcher[kOnMessage](arg & 0xffff, header, headerLength, data, length, param);
    },
  );
  return amCallback;
}

/**
 * One received active message.
 *
 * @example
 * ```ts
 * worker.setAmHandler(1, (msg: AmMessage) => {
 *   if (!msg.rendezvous) return use(msg.header, msg.data);      // eager: the payload is here
 *   msg.receive(new Uint8Array(msg.length)).then((data) => use(msg.header, data));
 * });
 * ```
 */
export class AmMessage {
  /** The AM id it was sent with. */
  readonly id: number;
  /** A copy of the user header (empty when none was sent). */
  readonly header: Uint8Array;
  /** The payload length in bytes. */
  readonly length: number;
  /** True when UCX used the rendezvous protocol: the payload waits at the sender until `receive()`. */
  readonly rendezvous: boolean;
  /** The endpoint to answer on, when the sender set `reply: true` and it is one of this worker's. */
  readonly replyEndpoint: Endpoint | null;
  /** @internal The reply endpoint's raw ucp_ep_h (0n: none), for the fast lane's handshake. */
  [kReplyHandle] = 0n;
  readonly #worker: Worker;
  readonly #workerHandle: bigint;
  readonly #data: Uint8Array | null;
  readonly #pending: PendingDescriptor | null;
  /** @internal Set while the handler runs inside the UCX callback: the status to return to UCX. */
  [kDecision]: number | null = null;

  /** @internal Received messages only (IllegalConstructorError otherwise). */
  constructor(
    token: typeof INTERNAL, worker: Worker, workerHandle: bigint, id: number, header: Uint8Array, length: number,
    data: Uint8Array | null, pending: PendingDescriptor | null, replyEndpoint: Endpoint | null,
  ) {
    checkConstructorToken(token, 'AmMessage', 'worker.setAmHandler() or worker.amMessages()');
    this.#worker = worker;
    this.#workerHandle = workerHandle;
    this.id = id;
    this.header = header;
    this.length = length;
    this.#data = data;
    this.#pending = pending;
    this.rendezvous = pending !== null;
    this.replyEndpoint = replyEndpoint;
    if (pending !== null) forgottenMessages.register(this, pending, this);
  }

  /**
   * The payload of an eager message (a copy); null for a rendezvous message. Small payloads (up to 16 KiB)
   * are slices of a shared 256 KiB slab, as Node pools small Buffers: copy out what you keep for long.
   */
  get data(): Uint8Array | null {
    return this.#data;
  }

  /**
   * The payload. Eager: at once (copied into `buffer` when given). Rendezvous: fetched from the sender
   * into `buffer` (or a new one), exactly once; an InvalidStateError after it was received, rejected or released.
   * A `buffer` smaller than `length` is a RangeError. Aborting `options.signal` rejects a fetch still
   * under way with CanceledError at once (a sender that went away without failing the connection
   * never sends the data); the message is dropped.
   *
   * @example
   * ```ts
   * for await (const msg of worker.amMessages(3)) {
   *   const data = await msg.receive(undefined, { signal: AbortSignal.timeout(5000) });
   *   console.log(msg.header, data.byteLength);
   * }
   * ```
   */
  @requestOperation
  receive(buffer?: BufferSource, options: ReceiveOptions = {}): Request<Uint8Array> {
    const signal = optionsObject(options, 'AM receive options').signal;
    const target = buffer === undefined ? null : asBytes(buffer, 'AM receive buffer');
    if (target !== null && target.byteLength < this.length) {
      throw new ArgumentOutOfRangeError(`the AM receive buffer has ${target.byteLength} bytes, the message ${this.length}`);
    }
    if (this.#pending === null) {
      const data = this.#data ?? new Uint8Array(0);
      let result = data;
      if (target !== null) {
        target.set(data);
        result = target.subarray(0, data.byteLength);
      }
      const request = new Request<Uint8Array>(INTERNAL, null, ResultKind.Bytes, 'AM receive', null);
      request[kReply] = result;
      request[kComplete](UCS_OK, result.byteLength, 0n);
      return request;
    }
    const descriptor = this.#pending.take();
    if (descriptor === null) {
      throw new InvalidStateError('the data of this rendezvous message was already received, rejected or released');
    }
    forgottenMessages.unregister(this);
    if (this[kDecision] === null) this[kDecision] = UCS_INPROGRESS;
    const destination = target ?? new Uint8Array(this.length);
    const requests = this.#worker[kRequests];
    // See src/engine/own-memh.ts.
    const memh = requests.ownMemh?.mapReceive(destination, this.length, requests.params.amRecvDataOwnMemh) ?? null;
    const block = memh === null ? requests.params.amRecvData : requests.params.amRecvDataOwnMemh;
    const request = requests.open<Uint8Array>(block, ResultKind.Bytes, 'AM receive', destination);
    request[kReply] = destination;
    // Completed at once means the whole payload is in `destination`.
    requests.track(request, block, ucx().ucp_am_recv_data_nbx(this.#workerHandle, descriptor, destination, this.length, block.address), this.length);
    if (memh !== null) requests.ownMemh?.releaseAfter(request, memh);
    if (!request.completed) {
      // UCX cannot cancel a data fetch: an abort rejects it at once and UCX keeps `destination` until it lets go.
      request[kDetachable] = true;
      request[kBindSignal](signal);
    }
    return request;
  }

  /**
   * Declines a rendezvous message without fetching its data. Called synchronously inside the handler,
   * `status` (default UCS_ERR_REJECTED) is what the sender's request fails with; later, UCX 1.13 can only
   * tell the sender "done". No effect on eager messages or after `receive()`.
   *
   * @example
   * ```ts
   * worker.setAmHandler(1, (msg) => {
   *   if (msg.rendezvous && msg.length > 64 << 20) return msg.reject(); // the sender gets RejectedError
   *   msg.receive().then((data) => store(data));
   * });
   * ```
   */
  reject(status: number = UCS_ERR_REJECTED): void {
    if (typeof status !== 'number') throw new InvalidArgumentError(`status must be a number, got ${typeof status}`);
    if (!Number.isInteger(status) || status >= 0 || status < -100) {
      throw new ArgumentOutOfRangeError(`status must be a UCS error status (a negative integer), got ${show(status)}`);
    }
    if (this.#pending === null) return;
    forgottenMessages.unregister(this);
    if (this[kDecision] === null) {
      // Still inside the UCX callback: UCX sends this status to the sender and frees the descriptor.
      if (this.#pending.take() !== null) this[kDecision] = status;
      return;
    }
    this.#pending.release();
  }

  /** @internal Releases a rendezvous descriptor nobody took (after an async handler, or at close). */
  [kRelease](): void {
    if (this.#pending === null) return;
    forgottenMessages.unregister(this);
    this.#pending.release();
  }
}

interface Queue {
  messages: AmMessage[];
  waiters: ((result: IteratorResult<AmMessage>) => void)[];
}

/** @internal Per-worker AM state: UCX handler registration and delivery to handlers or iterators. */
export class AmDispatcher {
  /** The worker, as what the dispatcher may use of it (worker/services.ts). */
  readonly #worker: AmServices;
  /** The same worker, handed to the messages it builds. */
  readonly #owner: Worker;
  readonly #workerHandle: bigint;
  readonly #slot: number;
  readonly #handlers = new Map<number, AmHandler>();
  readonly #queues = new Map<number, Queue>();
  /** Messages that arrived for an id without a handler, in arrival order, for the next one set. */
  readonly #held = new Map<number, AmMessage[]>();
  #heldCount = 0;
  #heldBytes = 0;
  /** Ids whose held messages are being handed to a new handler: later ones queue behind them. */
  readonly #draining = new Set<number>();
  #dropped = 0;
  /** Ids registered with UCX (they stay registered until the worker is destroyed). */
  readonly #registered = new Set<number>();
  /** Other ucp_workers whose fast-lane messages this dispatcher handles (the worker's detector). */
  readonly #laneWorkers: bigint[] = [];
  #closed = false;
  /** Iterator next() calls waiting for a message. */
  #waiting = 0;

  /** True while an `amMessages` iterator waits for a message. */
  get waiting(): boolean {
    return this.#waiting > 0;
  }
  /** How many rendezvous descriptors UCX holds for this worker's handlers or iterators. */
  get pendingCount(): number {
    return this[kPendingDescriptors].size;
  }
  /** @internal Rendezvous descriptors not yet received or released (released at close). */
  readonly [kPendingDescriptors] = new Set<PendingDescriptor>();

  constructor(worker: Worker, workerHandle: bigint, holdIds: boolean) {
    this.#worker = worker;
    this.#owner = worker;
    this.#workerHandle = workerHandle;
    this.#slot = dispatchers.add(this);
    if (holdIds) {
      for (let id = 0; id < AM_IDS_HELD; id++) this.#register(id, true);
      this.#handlers.set(AM_ID_STREAM_END, onStreamEndMessage);
      this.#register(AM_ID_STREAM_END, true);
      this.#handlers.set(AM_ID_FAST_LANE, onFastLaneMessage);
      this.#register(AM_ID_FAST_LANE, true);
    }
  }

  setHandler(id: number, handler: AmHandler | null): void {
    checkAmId(id);
    if (handler !== null && typeof handler !== 'function') throw new InvalidArgumentError('the AM handler must be a function');
    this.#endQueue(id);
    if (handler === null) {
      // The UCX registration stays, and messages are held for the next handler: UCX 1.13 segfaults on
      // an active message without a header for an id that has no handler.
      this.#handlers.delete(id);
      return;
    }
    this.#handlers.set(id, handler);
    this.#register(id, true);
    const held = this.#takeHeld(id);
    if (held.length === 0) return;
    // Not from inside setAmHandler: the caller finishes setting up first. Messages arriving meanwhile
    // queue behind these, so the handler sees every message of the id in arrival order.
    this.#draining.add(id);
    this.#held.set(id, held);
    this.#heldCount += held.length;
    heldMessages += held.length;
    for (const message of held) this.#heldBytes += message.data?.byteLength ?? 0;
    queueMicrotask(() => {
      this.#draining.delete(id);
      for (const message of this.#takeHeld(id)) {
        const current = this.#handlers.get(id);
        if (current === undefined || this.#closed) {
          if (this.#closed || !this.#hold(message)) message[kRelease]();
          continue;
        }
        this.#run(current, message, true);
      }
    });
  }

  /** Removes and returns the messages held for `id`. */
  #takeHeld(id: number): AmMessage[] {
    const held = this.#held.get(id);
    if (held === undefined) return [];
    this.#held.delete(id);
    this.#heldCount -= held.length;
    heldMessages -= held.length;
    for (const message of held) this.#heldBytes -= message.data?.byteLength ?? 0;
    return held;
  }

  /** Keeps a message of an id without a handler; false when the bound is reached (it is dropped). */
  #hold(message: AmMessage): boolean {
    const bytes = message.data?.byteLength ?? 0;
    if (this.#heldCount >= HELD_MESSAGES_MAX || this.#heldBytes + bytes > HELD_BYTES_MAX) return false;
    let held = this.#held.get(message.id);
    if (held === undefined) this.#held.set(message.id, held = []);
    held.push(message);
    this.#heldCount++;
    this.#heldBytes += bytes;
    heldMessages++;
    return true;
  }

  /** One warning per worker for the first drop, and the count in later ones every 1,000: never silent. */
  #warnDropped(id: number): void {
    this.#dropped++;
    if (this.#dropped !== 1 && this.#dropped % 1000 !== 0) return;
    process.emitWarning(
      `ucxx-ts: active messages for ids without a handler exceed what a worker holds (${HELD_MESSAGES_MAX} ` +
        `messages, ${HELD_BYTES_MAX >> 20} MiB); ${this.#dropped} dropped so far, the last of id ${id} ` +
        '(rendezvous ones are rejected: their senders fail)',
      { code: 'UCXX_AM_DROPPED' },
    );
  }

  iterate(id: number, signal: AbortSignal | undefined): AsyncIterableIterator<AmMessage> {
    checkAmId(id);
    this.#endQueue(id);
    const queue: Queue = { messages: [], waiters: [] };
    this.#queues.set(id, queue);
    queue.messages.push(...this.#takeHeld(id));
    this.#handlers.set(id, (message) => {
      const waiter = queue.waiters.shift();
      if (waiter !== undefined) waiter({ value: message, done: false });
      else queue.messages.push(message);
      message[kDecision] ??= UCS_INPROGRESS; // kept for the consumer
    });
    this.#register(id, true);
    const end = (): void => {
      if (this.#queues.get(id) === queue) {
        this.#endQueue(id);
        this.#handlers.delete(id); // the UCX registration stays: see setHandler
      }
    };
    signal?.addEventListener('abort', end, { once: true });
    const iterator: AsyncIterableIterator<AmMessage> = {
      next: () => {
        const message = queue.messages.shift();
        if (message !== undefined) return Promise.resolve({ value: message, done: false });
        if (this.#queues.get(id) !== queue) return Promise.resolve({ value: undefined, done: true });
        // A pending next() is a receive in flight: it keeps the process alive until a message comes.
        return new Promise((resolve) => {
          this.#waiting++;
          this.#worker[kUpdateBusy]();
          queue.waiters.push((result) => {
            this.#waiting--;
            this.#worker[kUpdateBusy]();
            resolve(result);
          });
        });
      },
      return: () => {
        end();
        return Promise.resolve({ value: undefined, done: true });
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  #endQueue(id: number): void {
    const queue = this.#queues.get(id);
    if (queue === undefined) return;
    this.#queues.delete(id);
    // Messages nobody took from the iterator wait for the next handler of the id, as unclaimed ones do.
    for (const message of queue.messages.splice(0)) if (this.#closed || !this.#hold(message)) message[kRelease]();
    for (const waiter of queue.waiters.splice(0)) waiter({ value: undefined, done: true });
  }

  /**
   * Sets UCX's handler of `id` to ours (`on`), or, at close, keeps it but with no dispatcher in its
   * argument (slot 0, never issued): UCX 1.13 segfaults on a header-less message for an id without a
   * handler, and this worker's slot may go to a new worker before UCX destroys this one.
   */
  #register(id: number, on: boolean, workerHandle = this.#workerHandle): void {
    if (on) this.#registered.add(id);
    if (id === AM_ID_FAST_LANE && workerHandle === this.#workerHandle) {
      for (const other of this.#laneWorkers) this.#register(id, on, other);
    }
    const param = this.#worker[kRequests].params.amHandler;
    param.clear()
      .setU64('field_mask', K.UCP_AM_HANDLER_PARAM_FIELD_ID | K.UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
        K.UCP_AM_HANDLER_PARAM_FIELD_CB | K.UCP_AM_HANDLER_PARAM_FIELD_ARG)
      .setU32('id', id)
      .setU32('flags', Number(K.UCP_AM_FLAG_WHOLE_MSG))
      .setPtr('cb', amCallbackAddress())
      .setPtr('arg', BigInt((on ? this.#slot * 0x10000 : 0) + id));
    const status = ucx().ucp_worker_set_am_recv_handler(workerHandle, param.buffer);
    if (status !== UCS_OK && on) throw new ClosedError(`AM handler registration failed (status ${status})`);
  }

  /**
   * @internal The fast lane's messages that arrive on `workerHandle` (the worker's failure detector)
   * are handled here too, with reply endpoints looked up among this worker's.
   */
  [kServeFastLane](workerHandle: bigint): void {
    if (this.#closed || this.#laneWorkers.includes(workerHandle)) return;
    this.#laneWorkers.push(workerHandle);
    this.#register(AM_ID_FAST_LANE, true, workerHandle);
  }

  /** @internal Runs inside ucp_worker_progress: builds the message and lets its handler decide. */
  [kOnMessage](
    id: number, header: Address, headerLength: number, data: Address, length: number, param: Address,
  ): number {
    const handler = this.#draining.has(id) ? undefined : this.#handlers.get(id);
    let rendezvous = false;
    let replyEndpoint: Endpoint | null = null;
    let replyHandle = 0n;
    if (param !== 0) {
      const fields = readStruct(param, RECV_PARAM.size);
      const attr = fields.readUInt32LE(RECV_PARAM.offsets.recv_attr);
      rendezvous = (attr & ATTR_RNDV) !== 0;
      if ((attr & ATTR_REPLY_EP) !== 0) {
        replyHandle = fields.readBigUInt64LE(RECV_PARAM.offsets.reply_ep);
        replyEndpoint = this.#worker[kEndpointByHandle](replyHandle) ?? null;
      }
    }
    if (handler === undefined &&
      (this.#heldCount >= HELD_MESSAGES_MAX || (!rendezvous && this.#heldBytes + length > HELD_BYTES_MAX))) {
      this.#warnDropped(id);
      return rendezvous ? UCS_ERR_REJECTED : UCS_OK;
    }
    // Copies (UCX reuses both regions once the callback returns), carved out of shared slabs: a fresh
    // ArrayBuffer per message would cost more than the copy (see internal/payload-slab.ts).
    const headerBytes = header === 0 || headerLength === 0 ? EMPTY : copyPayload(header, headerLength);
    const payload = rendezvous ? null : data === 0 || length === 0 ? EMPTY : copyPayload(data, length);
    const pending = rendezvous && data !== 0 ? new PendingDescriptor(this, BigInt(data)) : null;
    const message = new AmMessage(
      INTERNAL, this.#owner, this.#workerHandle, id, headerBytes, length, payload, pending, replyEndpoint,
    );
    message[kReplyHandle] = replyHandle;
    if (handler === undefined) {
      // Held for the handler or iterator the program sets next: a rendezvous sender waits until then.
      this.#hold(message);
      if (!message.rendezvous) return UCS_OK;
      message[kDecision] = UCS_INPROGRESS;
      return UCS_INPROGRESS;
    }
    return this.#run(handler, message);
  }

  /**
   * Hands a message to its handler and returns the status for UCX (from inside the UCX callback; a held
   * message's rendezvous data is already kept, UCS_INPROGRESS).
   */
  #run(handler: AmHandler, message: AmMessage, held = false): number {
    const id = message.id;
    let result: void | Promise<void> = undefined;
    try {
      result = handler(message);
    } catch (err) {
      warn(id, err);
      if (message.rendezvous && message[kDecision] === null) message.reject();
      else if (held) message[kRelease]();
    }
    const decision = message[kDecision];
    if (!message.rendezvous) return UCS_OK;
    if (decision !== null && !held) return decision;
    // Neither received nor rejected yet: UCX keeps the descriptor. An async handler has until its Promise
    // settles; a message handed on elsewhere is released once received, rejected or garbage-collected.
    message[kDecision] = UCS_INPROGRESS;
    if (result instanceof Promise) {
      result.then(
        () => message[kRelease](),
        (err: unknown) => {
          warn(id, err);
          message[kRelease]();
        },
      );
    }
    return UCS_INPROGRESS;
  }

  /** @internal */
  [kReleaseDescriptor](descriptor: bigint): void {
    if (!this.#closed) ucx().ucp_am_data_release(this.#workerHandle, descriptor);
  }

  /** Releases what UCX still holds for us and unregisters everything. */
  /** Returns how many rendezvous descriptors it released. */
  close(): number {
    if (this.#closed) return 0;
    const released = this[kPendingDescriptors].size;
    for (const id of [...this.#queues.keys()]) this.#endQueue(id);
    for (const id of [...this.#held.keys()]) for (const message of this.#takeHeld(id)) message[kRelease]();
    for (const pending of [...this[kPendingDescriptors]]) pending.release();
    this.#closed = true;
    for (const id of this.#registered) this.#register(id, false);
    this.#handlers.clear();
    dispatchers.delete(this.#slot);
    return released;
  }
}

/**
 * @internal Refuses an id that is no AM id, or the reserved one (unless `reserved`: ucxx-ts's own send).
 */
export function checkAmId(id: number, reserved = false): void {
  if (!Number.isInteger(id) || id < 0 || id > AM_ID_MAX) {
    throw new ArgumentOutOfRangeError(`AM id must be an integer in [0, ${AM_ID_FAST_LANE - 1}], got ${show(id)}`);
  }
  if (id === AM_ID_STREAM_END && !reserved) {
    throw new ArgumentOutOfRangeError(
      `AM id ${id} (AM_ID_STREAM_END) is reserved by ucxx-ts for the Duplex's end-of-stream marker; ids 0-${AM_ID_FAST_LANE - 1} are yours`,
    );
  }
  if (id === AM_ID_FAST_LANE && !reserved) {
    throw new ArgumentOutOfRangeError(
      `AM id ${id} (AM_ID_FAST_LANE) is reserved by ucxx-ts for setting up fast lanes; ids 0-${AM_ID_FAST_LANE - 1} are yours`,
    );
  }
}

function warn(id: number, err: unknown): void {
  process.emitWarning(`ucxx-ts: the handler of active message id ${id} failed: ${String(err)}`, {
    code: 'UCXX_AM_HANDLER_ERROR',
    detail: err instanceof Error ? err.stack : undefined,
  });
}
