/**
 * An endpoint's stream receiver: the application's `streamRecv`s in a queue served in order, one
 * `ucp_stream_recv_nbx` at a time into the head receive's buffer, and a stash of bytes that arrived
 * with nobody waiting (a cancelled receive's, or read ahead). UCX 1.13 cannot cancel a stream receive
 * and drops an endpoint's unreceived stream bytes when the peer goes away; the stash and the read-ahead
 * keep both from losing data.
 */
import { CONSTANTS, UCS_INPROGRESS, addressOf, copyFromMemory, copyIntoRegion, statusOfPtr, ucx } from '../ffi/index.js';
import { CanceledError } from '../errors.js';
import { InvalidStateError } from '../internal/misuse-errors.js';
import { Request, ResultKind, type AnyRequest } from '../request.js';
import { INTERNAL } from '../internal/misuse-errors.js';
import {
  kAbandon, kBackground, kBindSignal, kCancelFallback, kComplete, kFail, kGroup, kOnSettle, kRequests,
} from '../internal/symbols.js';
import type { Worker } from '../worker.js';

const K = CONSTANTS;

interface StreamReceive {
  readonly request: Request<number>;
  readonly bytes: Uint8Array;
  readonly waitAll: boolean;
  served: number;
  /** A read-ahead of ours (see readAhead): what it receives goes to the stash. */
  readonly ahead?: boolean;
}

/** Read-ahead chunk, and how much may wait in the stash before reading ahead stops. */
const READ_AHEAD_CHUNK = 64 * 1024;
const READ_AHEAD_LIMIT = 1024 * 1024;

/** What the receiver needs from its endpoint. */
export interface StreamReceiverHost {
  readonly worker: Worker;
  /** The endpoint's receives in flight (cancelled when it closes). */
  readonly receives: Set<AnyRequest>;
  /** The ucp_ep_h while the endpoint is open, null otherwise. */
  openHandle(): bigint | null;
  /** Bytes went into the stash (the worker's `streamReadyEndpoints` reports the endpoint). */
  stashed(): void;
}

export class StreamReceiver {
  readonly #host: StreamReceiverHost;
  /** Bytes that arrived while no receive of the application's wanted them, oldest first. */
  readonly #stash: Uint8Array[] = [];
  /** The receives in order; the head's is the one UCX request in flight (`#active`). */
  readonly #entries: StreamReceive[] = [];
  #active: AnyRequest | null = null;

  constructor(host: StreamReceiverHost) {
    this.#host = host;
  }

  /** Stash bytes waiting for the next receive. */
  get bufferedBytes(): number {
    let total = 0;
    for (const chunk of this.#stash) total += chunk.byteLength;
    return total;
  }

  /** Receives into `bytes` (at least 1 byte; all of it with `waitAll`). */
  recv(bytes: Uint8Array, waitAll: boolean, signal: AbortSignal | undefined): Request<number> {
    return this.#post(bytes, waitAll, signal, false);
  }

  /** After the endpoint closed: a receive served from the stash alone, or null when there is nothing. */
  recvClosed(bytes: Uint8Array): Request<number> | null {
    if (this.#stash.length === 0 || this.#entries.length > 0) return null;
    const request = new Request<number>(INTERNAL, null, ResultKind.Length, 'streamRecv', bytes);
    request[kComplete](0, this.takeStash(bytes), 0n);
    return request;
  }

  /** Whether `request` is a read-ahead of ours rather than a receive of the application's. */
  isReadAhead(request: AnyRequest): boolean {
    return this.#entries.some((entry) => entry.ahead === true && entry.request === request);
  }

  /** The endpoint closed: nothing more is served from UCX. */
  clear(): void {
    this.#entries.length = 0;
  }

  #post(bytes: Uint8Array, waitAll: boolean, signal: AbortSignal | undefined, ahead: boolean): Request<number> {
    const request = new Request<number>(INTERNAL, null, ResultKind.Length, 'streamRecv', bytes);
    const entry: StreamReceive = { request, bytes, waitAll, served: 0, ahead };
    this.#entries.push(entry);
    request[kGroup] = this.#host.receives;
    this.#host.receives.add(request);
    // UCX 1.13 cannot cancel a stream receive: a cancelled one is settled at once, and bytes that UCX
    // later puts into it are kept for the next receive, so none are lost and the order holds.
    request[kCancelFallback] = () => {
      const i = this.#entries.indexOf(entry);
      if (i > 0 || (i === 0 && this.#active === null)) this.#entries.splice(i, 1);
      request[kAbandon]('canceled');
    };
    request[kBindSignal](signal);
    this.#pump();
    return request;
  }

  #readingAhead = false;

  /**
   * Reads the stream ahead into the stash until the application's first `streamRecv`. UCX
   * drops an endpoint's unreceived stream data when the peer goes away, so a client that sends and
   * closes at once would lose its bytes before the application could ask for them.
   */
  readAhead(): void {
    this.#readingAhead = true;
    this.#post(new Uint8Array(READ_AHEAD_CHUNK), false, undefined, true);
  }

  stopReadingAhead(): void {
    if (!this.#readingAhead) return;
    this.#readingAhead = false;
    // The application's receive waits behind the read-ahead's UCX receive, which UCX cannot cancel.
    if (this.#active !== null) this.#host.worker[kRequests].foreground(this.#active);
    for (const entry of this.#entries) if (entry.ahead === true) entry.request.cancel();
  }

  /**
   * Serves queued stream receives in order: first from bytes kept from cancelled receives, then with one
   * `ucp_stream_recv_nbx` at a time into the head receive's buffer.
   */
  #pump(): void {
    if (this.#active !== null) this.#serveStashBehindCancelled();
    while (this.#active === null && this.#entries.length > 0) {
      const head = this.#entries[0] as StreamReceive;
      if (head.request.completed) {
        this.#entries.shift();
        continue;
      }
      if (head.ahead !== true) head.served += this.takeStash(head.bytes.subarray(head.served));
      if (head.served === head.bytes.byteLength || (head.served > 0 && !head.waitAll)) {
        this.#entries.shift();
        head.request[kComplete](0, head.served, 0n);
        continue;
      }
      const handle = this.#host.openHandle();
      if (handle === null) return;
      const worker = this.#host.worker;
      const target = head.bytes.subarray(head.served);
      const requests = worker[kRequests];
      const { streamRecv: block, streamLength } = requests.params;
      block.setFlags(head.waitAll ? Number(K.UCP_STREAM_RECV_FLAG_WAITALL) : 0);
      const ucxRequest = requests.open<number>(block, ResultKind.Length, 'streamRecv', target);
      // Nobody waits on a read-ahead until the first streamRecv (#stopReadingAhead brings it forward).
      ucxRequest[kBackground] = head.ahead === true;
      const ptr = ucx().ucp_stream_recv_nbx(handle, target, target.byteLength, streamLength.address, block.address);
      const immediate = ptr === null ? Number(streamLength.u64()) : 0;
      requests.track(ucxRequest, block, ptr, immediate);
      if (ucxRequest.completed) {
        this.#done(head, target, ucxRequest.status, immediate, ucxRequest, ucxRequest.error);
        return;
      }
      this.#active = ucxRequest;
      ucxRequest[kOnSettle] = (status, length, error) => this.#done(head, target, status, length, ucxRequest, error);
    }
  }

  /**
   * While a cancelled receive (or a read-ahead) still owns the one UCX stream receive, the receives
   * behind it take what the stash already holds: those bytes came first, and UCX may never complete
   * the outstanding receive if the peer sends nothing more.
   */
  #serveStashBehindCancelled(): void {
    const queue = this.#entries;
    const owner = queue[0];
    if (owner === undefined || !(owner.request.completed || owner.ahead === true)) return;
    let i = 1;
    while (i < queue.length && this.#stash.length > 0) {
      const entry = queue[i] as StreamReceive;
      if (entry.request.completed || entry.ahead === true) {
        i++;
        continue;
      }
      entry.served += this.takeStash(entry.bytes.subarray(entry.served));
      if (entry.served < entry.bytes.byteLength && (entry.served === 0 || entry.waitAll)) return;
      queue.splice(i, 1);
      entry.request[kComplete](0, entry.served, 0n);
    }
  }

  #done(
    head: StreamReceive, target: Uint8Array, status: number, length: number, ucxRequest: Request<number>,
    error?: Error,
  ): void {
    if (this.#active === ucxRequest) this.#active = null;
    if (this.#entries[0] === head) this.#entries.shift();
    if (head.request.completed || head.ahead === true) {
      // Cancelled meanwhile, or read ahead: keep what arrived for the next receive.
      if (status === 0 && length > 0) this.#stashPush(target.slice(0, length));
      if (head.ahead === true) {
        this.#host.receives.delete(head.request);
        head.request[kComplete](status === 0 ? 0 : status, 0, 0n);
        if (status === 0 && this.#readingAhead && this.bufferedBytes < READ_AHEAD_LIMIT && this.#host.openHandle() !== null) {
          this.#post(new Uint8Array(READ_AHEAD_CHUNK), false, undefined, true);
          return;
        }
      }
    } else if (status === 0) {
      head.served += length;
      if (head.waitAll && head.served < head.bytes.byteLength) this.#entries.unshift(head);
      else head.request[kComplete](0, head.served, 0n);
    } else {
      head.request[kFail](error ?? new CanceledError('streamRecv'));
    }
    this.#pump();
  }

  #stashPush(bytes: Uint8Array): void {
    this.#stash.push(bytes);
    this.#host.stashed();
  }

  /**
   * Copies into `bytes`, without waiting, what has arrived and no receive waits for: the stash first,
   * then the data UCX holds for the endpoint, one receive descriptor at a time
   * (`ucp_stream_recv_data_nb`, released at once); the part of a descriptor that does not fit is
   * stashed for the next receive. Returns how many bytes (0: nothing has arrived). A read-ahead goes
   * on (resumed once the stash has room): it keeps what a peer sent before it went away, which UCX
   * would drop from its own queue.
   */
  takeAvailable(bytes: Uint8Array): number {
    if (this.#entries.some((entry) => entry.ahead !== true && !entry.request.completed)) {
      throw new InvalidStateError('streamRecvAvailable: a streamRecv of this endpoint is waiting, and the bytes that arrive go to it first');
    }
    let filled = this.takeStash(bytes);
    const handle = this.#host.openHandle();
    if (handle === null) return filled;
    const api = ucx();
    const lengthOut = this.#host.worker[kRequests].params.streamLength;
    // The destination's address, taken at the first descriptor (none when UCX holds nothing).
    let destination = -1;
    while (filled < bytes.byteLength) {
      // With a UCX receive still posted (a cancelled one's, or a read-ahead), UCX holds no data: what
      // arrives goes to that receive, then to the stash.
      const data = api.ucp_stream_recv_data_nb(handle, lengthOut.address);
      if (data === null || statusOfPtr(data) !== UCS_INPROGRESS) break;
      const length = Number(lengthOut.u64());
      const n = Math.min(length, bytes.byteLength - filled);
      try {
        if (destination < 0) destination = Number(addressOf(bytes));
        copyIntoRegion(destination, bytes.byteLength, filled, data, n);
        if (n < length) this.#stashPush(copyFromMemory(data + BigInt(n), length - n));
      } finally {
        api.ucp_stream_data_release(handle, data);
      }
      filled += n;
    }
    if (this.#readingAhead && this.#active === null && this.bufferedBytes < READ_AHEAD_LIMIT) {
      this.#post(new Uint8Array(READ_AHEAD_CHUNK), false, undefined, true);
    }
    return filled;
  }

  /** Moves stashed stream bytes into `bytes`; returns how many. */
  takeStash(bytes: Uint8Array): number {
    let filled = 0;
    while (filled < bytes.byteLength && this.#stash.length > 0) {
      const head = this.#stash[0] as Uint8Array;
      const n = Math.min(head.byteLength, bytes.byteLength - filled);
      bytes.set(head.subarray(0, n), filled);
      filled += n;
      if (n === head.byteLength) this.#stash.shift();
      else this.#stash[0] = head.subarray(n);
    }
    return filled;
  }
}
