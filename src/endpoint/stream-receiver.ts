/**
 * An endpoint's stream receiver. While the endpoint is open, exactly one `ucp_stream_recv_nbx` is
 * always posted: into the buffer of the application's oldest waiting `streamRecv` when the stash is
 * empty (one copy, by UCX), otherwise into a read-ahead buffer of ours, whose filled parts become the
 * stash. UCX 1.13 drops the bytes it holds for an endpoint (arrived, no receive posted) when the peer
 * closes, gracefully or not (docs/ucx-1.13-bugs/stream_close_drops_data.c), and cannot cancel a
 * stream receive: with a receive always posted UCX holds none, and what a cancelled receive's buffer
 * gets is stashed, so no byte is lost and the order holds.
 *
 * Stashed bytes are views of read-ahead buffers that are never written again once handed out, so
 * `takeChunk` (streamChunks, the Duplex) gives them away without copying.
 *
 * On an endpoint whose data takes the fast lane (endpoint/fast-lane.ts) no receive is ever posted on
 * the lane: it could not be cancelled, and the lane's next connection would get its bytes. UCX keeps
 * what arrives there (the lane is never closed under it) and the receiver pulls it
 * (`ucp_stream_recv_data_nb`, one copy into the receive's buffer): when a receive is made and after
 * each progress while one waits (the worker pulls its waiting lane endpoints); `takeAvailable` copies
 * it straight into its buffer; chunks and `bufferedBytes` move it into the stash, and so does a release
 * of the lane. What nobody waits for stays in UCX.
 */
import { CONSTANTS, UCS_INPROGRESS, addressOf, copyFromMemory, copyIntoRegion, statusOfPtr, ucx } from '../ffi/index.js';
import { InvalidStateError } from '../errors/misuse.js';
import { Request, ResultKind } from '../request.js';
import { INTERNAL } from '../errors/misuse.js';
import {
  kAbandon, kBackground, kBindSignal, kCancelFallback, kComplete, kFail, kOnSettle, kReply, kRequests,
} from '../internal/symbols.js';
import type { StreamServices } from '../worker/services.js';

const K = CONSTANTS;

/** A receive of the application's: into its buffer (`streamRecv`), or a chunk of the stash (`takeChunk`). */
interface StreamReceive {
  readonly request: Request<number> | Request<Uint8Array>;
  /** The destination; null for a chunk, which takes stashed bytes as they are. */
  readonly bytes: Uint8Array | null;
  /** Most bytes of a chunk. */
  readonly max: number;
  readonly waitAll: boolean;
  served: number;
}

/** The one UCX receive in flight: into an application's receive, or read ahead into `target`. */
interface Posted {
  readonly ucxRequest: Request<number>;
  readonly target: Uint8Array;
  /** The application's receive it fills; null when reading ahead. */
  readonly entry: StreamReceive | null;
}

/**
 * Read-ahead buffers: the first is small (an idle endpoint holds one), each one that fills is followed
 * by one twice as large up to the largest, so a busy stream is read in large pieces.
 */
const READ_AHEAD_FIRST = 64 * 1024;
const READ_AHEAD_LARGEST = 1024 * 1024;
/** A read-ahead buffer with less room than this left is retired for a new one. */
const READ_AHEAD_MIN_ROOM = 16 * 1024;

const EMPTY = new Uint8Array(0);

/** A copy of the first `length` bytes (`slice` of a Buffer would be a view). */
function copyOf(bytes: Uint8Array, length: number): Uint8Array {
  const copy = new Uint8Array(length);
  copy.set(bytes.subarray(0, length));
  return copy;
}

/** A stream descriptor UCX handed out for the lane (ucp_stream_recv_data_nb), `used` bytes of it taken. */
interface HeldDescriptor {
  readonly lane: bigint;
  readonly data: bigint;
  readonly length: number;
  used: number;
}

/** What the receiver needs from its endpoint. */
export interface StreamReceiverHost {
  readonly worker: StreamServices;
  /** The ucp_ep_h while the endpoint is open, null otherwise. */
  openHandle(): bigint | null;
  /** Bytes went into the stash (the worker's `streamReadyEndpoints` reports the endpoint). */
  stashed(): void;
  /** The fast lane's ucp_ep while the endpoint's data takes it; null otherwise. */
  laneHandle(): bigint | null;
  /** Receives start (true) or stop (false) waiting for bytes of the lane: the worker pulls it meanwhile. */
  laneWaiting(waiting: boolean): void;
}

export class StreamReceiver {
  readonly #host: StreamReceiverHost;
  /** Bytes that arrived while no receive of the application's wanted them, oldest first. */
  readonly #stash: Uint8Array[] = [];
  #stashed = 0;
  /** The application's receives in order. */
  readonly #entries: StreamReceive[] = [];
  #posted: Posted | null = null;
  /** The read-ahead buffer and how much of it is handed out. */
  #ahead: Uint8Array | null = null;
  #aheadUsed = 0;
  #aheadSize = READ_AHEAD_FIRST;
  /** Set by `readAhead()`: the context has the stream feature, so the endpoint keeps a receive posted. */
  #reading = false;
  /** UCX failed a receive of this endpoint: it is failing or closing, and no receive is posted again. */
  #failed = false;
  /** The endpoint closed and UCX let go: what the stash holds is all there will be. */
  #ended = false;
  /** Whether the host was told that receives wait on the lane. */
  #laneWaiting = false;
  /**
   * A descriptor taken from the lane and not yet given back (its first `used` bytes taken): the lane's
   * bytes that come first. Held to tell that bytes are there without copying them (#hold).
   */
  #held: HeldDescriptor | null = null;
  /** Called (inside progress) when bytes reach the stash while nobody waits for them. */
  onArrival: (() => void) | null = null;

  constructor(host: StreamReceiverHost) {
    this.#host = host;
  }

  /** Stash bytes waiting for the next receive (the lane's included). */
  get bufferedBytes(): number {
    this.#laneToStash();
    return this.#stashed;
  }

  /** True once the endpoint closed and the stash is empty: the stream has ended. */
  get ended(): boolean {
    return this.#ended && this.#stashed === 0;
  }

  /** Receives into `bytes` (at least 1 byte; all of it with `waitAll`). */
  recv(bytes: Uint8Array, waitAll: boolean, signal: AbortSignal | undefined): Request<number> {
    const request = new Request<number>(INTERNAL, null, ResultKind.Length, 'streamRecv', bytes);
    this.#queue({ request, bytes, max: bytes.byteLength, waitAll, served: 0 }, signal);
    return request;
  }

  /**
   * Takes up to `max` stream bytes as they are in the stash (no copy): at once when some are there,
   * else when some arrive. Resolves with an empty array once the stream has ended.
   */
  recvChunk(max: number, signal: AbortSignal | undefined): Request<Uint8Array> {
    this.#laneToStash();
    const request = new Request<Uint8Array>(INTERNAL, null, ResultKind.Bytes, 'streamChunks', null);
    if (this.#entries.length === 0 && (this.#stashed > 0 || this.#ended)) {
      request[kReply] = this.#ended && this.#stashed === 0 ? EMPTY : this.#takeView(max);
      request[kComplete](0, (request[kReply] as Uint8Array).byteLength, 0n);
      return request;
    }
    this.#queue({ request, bytes: null, max, waitAll: false, served: 0 }, signal);
    return request;
  }

  /** Up to `max` stashed bytes without copying, or null when the stash is empty or a receive waits. */
  takeChunk(max: number): Uint8Array | null {
    this.#laneToStash();
    if (this.#stashed === 0 || this.#entries.length > 0) return null;
    return this.#takeView(max);
  }

  /** After the endpoint closed: a receive served from the stash alone, or null when there is nothing. */
  recvClosed(bytes: Uint8Array): Request<number> | null {
    if (this.#stashed === 0 || this.#entries.length > 0) return null;
    const request = new Request<number>(INTERNAL, null, ResultKind.Length, 'streamRecv', bytes);
    request[kComplete](0, this.takeStash(bytes), 0n);
    return request;
  }

  /** The endpoint is open and has the stream feature: keep a receive posted from now on. */
  readAhead(): void {
    this.#reading = true;
    this.#pump();
  }

  /**
   * The endpoint is about to be closed in UCX: what UCX still holds (bytes that arrived after a receive
   * completed, when it could not post the next) goes to the stash before the close drops it.
   */
  drain(handle: bigint): void {
    const held = this.#held;
    if (held !== null && held.lane === handle) {
      this.#stashPush(copyFromMemory(held.data + BigInt(held.used), held.length - held.used));
      this.#consumed(held.length - held.used);
    }
    const api = ucx();
    const lengthOut = this.#host.worker[kRequests].params.streamLength;
    for (;;) {
      const data = api.ucp_stream_recv_data_nb(handle, lengthOut.address);
      if (data === null || statusOfPtr(data) !== UCS_INPROGRESS) break;
      try {
        this.#stashPush(copyFromMemory(data, Number(lengthOut.u64())));
      } finally {
        api.ucp_stream_data_release(handle, data);
      }
    }
  }

  /**
   * The endpoint is closed and UCX has let go of it: the waiting receives take what the stash holds,
   * chunks then end (an empty chunk), and the rest fail with `reason`.
   */
  closed(reason: Error): void {
    this.#ended = true;
    this.#serveFromStash();
    this.#syncLaneWait(false);
    for (const entry of this.#entries.splice(0)) {
      if (entry.bytes === null) {
        entry.request[kReply] = EMPTY;
        entry.request[kComplete](0, 0, 0n);
      } else if (entry.served > 0 && !entry.waitAll) entry.request[kComplete](0, entry.served, 0n);
      else {
        // A waitAll receive that cannot be filled: its bytes go back to the stream for the next receive.
        if (entry.served > 0) this.#unshift(copyOf(entry.bytes, entry.served));
        entry.request[kFail](reason);
      }
    }
  }

  #queue(entry: StreamReceive, signal: AbortSignal | undefined): void {
    const { request } = entry;
    this.#entries.push(entry);
    // UCX 1.13 cannot cancel a stream receive: a cancelled one is settled at once, and bytes that UCX
    // later puts into its buffer are stashed for the next receive, so none are lost and the order holds.
    request[kCancelFallback] = () => {
      const i = this.#entries.indexOf(entry);
      if (i >= 0) this.#entries.splice(i, 1);
      this.#syncLaneWait(true);
      // Bytes of a waitAll receive served so far are the stream's (they came before anything stashed).
      if (entry.bytes !== null && entry.served > 0) this.#unshift(copyOf(entry.bytes, entry.served));
      request[kAbandon]('canceled');
    };
    request[kBindSignal](signal);
    // A read-ahead was posted with nobody waiting: now somebody does.
    const posted = this.#posted;
    if (posted !== null && posted.entry === null) this.#host.worker[kRequests].foreground(posted.ucxRequest);
    this.#pump();
  }

  /** Serves the waiting receives, in order, from the stash. */
  #serveFromStash(): void {
    const entries = this.#entries;
    this.#serveEntries(entries);
    // Nobody waits on the read-ahead any more: it no longer keeps the worker busy or the process alive.
    const posted = this.#posted;
    if (entries.length === 0 && posted !== null && posted.entry === null) this.#host.worker[kRequests].background(posted.ucxRequest);
    if (this.#laneWaiting) this.#syncLaneWait(true);
  }

  #serveEntries(entries: StreamReceive[]): void {
    while (entries.length > 0) {
      const head = entries[0] as StreamReceive;
      if (head.request.completed) {
        entries.shift();
        continue;
      }
      if (this.#stashed === 0 || this.#posted?.entry === head) return;
      if (head.bytes === null) {
        entries.shift();
        head.request[kReply] = this.#takeView(head.max);
        head.request[kComplete](0, (head.request[kReply] as Uint8Array).byteLength, 0n);
        continue;
      }
      head.served += this.takeStash(head.bytes.subarray(head.served));
      if (head.served < head.bytes.byteLength && head.waitAll) return;
      entries.shift();
      head.request[kComplete](0, head.served, 0n);
    }
  }

  /**
   * Keeps the one UCX receive posted: into the oldest waiting `streamRecv`'s buffer when the stash is
   * empty, otherwise read ahead.
   */
  #pump(): void {
    const lane = this.#host.laneHandle() !== null;
    if (lane) this.pullLane();
    for (;;) {
      this.#serveFromStash();
      if (this.#posted !== null || this.#failed) return;
      const handle = this.#host.openHandle();
      if (handle === null) return;
      const head = this.#entries[0];
      // With a lane, only a read-ahead is posted here: the receives are filled from the lane.
      const into = !lane && head !== undefined && head.bytes !== null && this.#stashed === 0 ? head : null;
      if (into === null && !this.#reading && (head === undefined || lane)) return;
      let target: Uint8Array;
      if (into !== null) target = (into.bytes as Uint8Array).subarray(into.served);
      else {
        if (this.#ahead === null || this.#ahead.byteLength - this.#aheadUsed < READ_AHEAD_MIN_ROOM) {
          if (this.#ahead !== null) this.#aheadSize = Math.min(this.#aheadSize * 2, READ_AHEAD_LARGEST);
          // Never zero-filled: only the parts UCX wrote are ever handed out. A Buffer, so that its views
          // are Buffers for the Duplex.
          this.#ahead = Buffer.allocUnsafeSlow(this.#aheadSize);
          this.#aheadUsed = 0;
        }
        target = this.#ahead.subarray(this.#aheadUsed);
      }
      const requests = this.#host.worker[kRequests];
      const { streamRecv: block, streamLength } = requests.params;
      const waitAll = into !== null && into.waitAll;
      block.setFlags(waitAll ? Number(K.UCP_STREAM_RECV_FLAG_WAITALL) : 0);
      const ucxRequest = requests.open<number>(block, ResultKind.Length, 'streamRecv', target);
      // A read-ahead nobody waits on does not keep the worker busy (nor the process alive).
      ucxRequest[kBackground] = this.#entries.length === 0;
      const ptr = ucx().ucp_stream_recv_nbx(handle, target, target.byteLength, streamLength.address, block.address);
      const immediate = ptr === null ? Number(streamLength.u64()) : 0;
      requests.track(ucxRequest, block, ptr, immediate);
      const posted: Posted = { ucxRequest, target, entry: into };
      if (!ucxRequest.completed) {
        this.#posted = posted;
        ucxRequest[kOnSettle] = (status, length) => {
          this.#posted = null;
          // A receive fails when UCX fails or closes the endpoint, from a loop that fails every receive
          // posted, so one posted from here would fail too, and so on forever. What arrives from now on
          // waits in UCX until `drain()`.
          if (status !== 0) this.#failed = true;
          this.#settled(posted, status, length);
          this.#pump();
        };
        return;
      }
      this.#settled(posted, ucxRequest.status, immediate);
      // A receive UCX refused at once (the endpoint failed): nothing more comes from it.
      if (ucxRequest.status !== 0) {
        this.#failed = true;
        return;
      }
    }
  }

  /** A UCX receive settled with `length` bytes in `posted.target`. */
  #settled(posted: Posted, status: number, length: number): void {
    const entry = posted.entry;
    if (entry === null) {
      if (status !== 0 || length === 0) return;
      const view = posted.target.subarray(0, length);
      this.#aheadUsed += length;
      this.#stashPush(view);
      return;
    }
    if (entry.request.completed) {
      // Cancelled meanwhile: keep what arrived for the next receive.
      if (length > 0) this.#stashPush(copyOf(posted.target, length));
      return;
    }
    entry.served += length;
    // An error here is the endpoint failing or closing: the receive waits for `closed()`, which gives it
    // whatever else arrived, so bytes that came after the failure still reach it.
    if (status !== 0) return;
    if (entry.waitAll && entry.served < (entry.bytes as Uint8Array).byteLength) return;
    this.#entries.splice(this.#entries.indexOf(entry), 1);
    entry.request[kComplete](0, entry.served, 0n);
  }

  /**
   * Takes what UCX holds on the lane into the waiting receives' buffers, in order, once the stash is
   * empty (what the stash holds came first); chunks take it through the stash.
   */
  pullLane(): void {
    const lane = this.#host.laneHandle();
    if (lane === null) return;
    this.#serveFromStash();
    // Only while receives wait: what nobody waits for stays in UCX (the rest of a descriptor held).
    while (this.#entries.length > 0 && this.#hold(lane)) {
      const held = this.#held as HeldDescriptor;
      const at = held.data + BigInt(held.used);
      const rest = held.length - held.used;
      const used = this.#stashed === 0 ? this.#fill(at, rest) : 0;
      if (used > 0) {
        this.#consumed(used);
        continue;
      }
      // A chunk waits (it takes stashed bytes as they are): through the stash.
      this.#stashPush(copyFromMemory(at, rest));
      this.#consumed(rest);
      this.#serveFromStash();
    }
    this.#syncLaneWait(true);
  }

  /** Moves what UCX holds on the lane into the stash (for views of it, or to count it). */
  #laneToStash(): void {
    const lane = this.#host.laneHandle();
    if (lane !== null) this.drain(lane);
  }

  /** Whether stream bytes wait to be taken, the lane's included (one descriptor held, not copied). */
  hasBytes(): boolean {
    if (this.#stashed > 0) return true;
    const lane = this.#host.laneHandle();
    return lane !== null && this.#hold(lane);
  }

  /** Holds the lane's next descriptor unless one is held; false when UCX holds nothing for the lane. */
  #hold(lane: bigint): boolean {
    if (this.#held !== null) return true;
    const lengthOut = this.#host.worker[kRequests].params.streamLength;
    const data = ucx().ucp_stream_recv_data_nb(lane, lengthOut.address);
    if (data === null || statusOfPtr(data) !== UCS_INPROGRESS) return false;
    this.#held = { lane, data, length: Number(lengthOut.u64()), used: 0 };
    return true;
  }

  /** `n` more bytes of the held descriptor were taken: gives it back to UCX once all were. */
  #consumed(n: number): void {
    const held = this.#held as HeldDescriptor;
    held.used += n;
    if (held.used < held.length) return;
    this.#held = null;
    ucx().ucp_stream_data_release(held.lane, held.data);
  }

  /** The lane is no longer the endpoint's (its bytes were drained first): receives wait on the endpoint again. */
  laneGone(): void {
    this.#syncLaneWait(false);
    this.#pump();
  }

  /** Copies `length` bytes at `data` (UCX's) into the waiting receives, in order; returns how many it used. */
  #fill(data: bigint, length: number): number {
    const entries = this.#entries;
    let used = 0;
    while (used < length && entries.length > 0) {
      const head = entries[0] as StreamReceive;
      if (head.request.completed) {
        entries.shift();
        continue;
      }
      // A chunk takes stashed bytes as they are.
      if (head.bytes === null) break;
      const n = Math.min(head.bytes.byteLength - head.served, length - used);
      copyIntoRegion(Number(addressOf(head.bytes)), head.bytes.byteLength, head.served, data + BigInt(used), n);
      head.served += n;
      used += n;
      if (head.waitAll && head.served < head.bytes.byteLength) continue;
      entries.shift();
      head.request[kComplete](0, head.served, 0n);
    }
    return used;
  }

  /** Tells the host whether receives wait on the lane (`lane`: the endpoint still has one). */
  #syncLaneWait(lane: boolean): void {
    const waiting = lane && this.#entries.length > 0 && this.#host.laneHandle() !== null;
    if (waiting === this.#laneWaiting) return;
    this.#laneWaiting = waiting;
    this.#host.laneWaiting(waiting);
  }

  #unshift(bytes: Uint8Array): void {
    this.#stash.unshift(bytes);
    this.#stashed += bytes.byteLength;
  }

  #stashPush(bytes: Uint8Array): void {
    const last = this.#stash[this.#stash.length - 1];
    // Contiguous pieces of one read-ahead buffer are one piece: larger chunks, fewer of them.
    if (last !== undefined && last.buffer === bytes.buffer && last.byteOffset + last.byteLength === bytes.byteOffset) {
      this.#stash[this.#stash.length - 1] = Buffer.from(last.buffer, last.byteOffset, last.byteLength + bytes.byteLength);
    } else this.#stash.push(bytes);
    this.#stashed += bytes.byteLength;
    this.#host.stashed();
    if (this.#entries.length === 0) this.onArrival?.();
  }

  /** Up to `max` bytes from the head of the stash, without copying. */
  #takeView(max: number): Uint8Array {
    const head = this.#stash[0] as Uint8Array;
    if (head.byteLength <= max) {
      this.#stash.shift();
      this.#stashed -= head.byteLength;
      return head;
    }
    this.#stash[0] = head.subarray(max);
    this.#stashed -= max;
    return head.subarray(0, max);
  }

  /**
   * Copies into `bytes`, without waiting, what has arrived and no receive waits for: the stash first,
   * then what UCX holds for the endpoint (none while a receive is posted, as one always is on an
   * endpoint of a stream context), one receive descriptor at a time (`ucp_stream_recv_data_nb`,
   * released at once); the part of a descriptor that does not fit is stashed for the next receive.
   * Returns how many bytes (0: nothing has arrived).
   */
  takeAvailable(bytes: Uint8Array): number {
    if (this.#entries.some((entry) => !entry.request.completed)) {
      throw new InvalidStateError('streamRecvAvailable: a streamRecv of this endpoint is waiting, and the bytes that arrive go to it first');
    }
    let filled = this.takeStash(bytes);
    // UCX holds what the lane brought (no receive is posted there): straight into `bytes`, and the part
    // of a descriptor that does not fit stays held for the next one.
    const lane = this.#host.laneHandle();
    if (lane !== null) {
      let destination = -1;
      while (filled < bytes.byteLength && this.#hold(lane)) {
        const held = this.#held as HeldDescriptor;
        const n = Math.min(held.length - held.used, bytes.byteLength - filled);
        if (destination < 0) destination = Number(addressOf(bytes));
        copyIntoRegion(destination, bytes.byteLength, filled, held.data + BigInt(held.used), n);
        this.#consumed(n);
        filled += n;
      }
      return filled;
    }
    // Or what the endpoint brought when no receive is posted on it.
    const handle = this.#posted === null ? this.#host.openHandle() : null;
    if (handle === null) return filled;
    const api = ucx();
    const lengthOut = this.#host.worker[kRequests].params.streamLength;
    // The destination's address, taken at the first descriptor (none when UCX holds nothing).
    let destination = -1;
    while (filled < bytes.byteLength) {
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
    this.#stashed -= filled;
    return filled;
  }
}
