/**
 * Drives `ucp_worker_progress` from Node's event loop.
 *
 * - 'event': the worker's event fd is watched by a libuv poll on Node's own loop. The arm protocol
 *   (progress until idle, then `ucp_worker_arm` until it returns UCS_OK) runs after every wake-up, so the
 *   process sleeps in epoll until UCX has something to do. The watch stays for the worker's whole life,
 *   so a peer's emulated RMA into this process completes even when this side has nothing in flight.
 * - 'polling': the same fd watch while idle, plus a setImmediate loop that progresses continuously while
 *   operations are in flight (lowest latency, one core busy meanwhile; I/O and timers still run between
 *   iterations).
 * - 'manual': nothing runs by itself; the caller calls `worker.progress()`.
 *
 * The fd watch is ref'd only while the worker is "busy" (operations in flight or a listener open), so an
 * idle worker never keeps the process alive.
 */
import { UCS_OK, pollReadable, ucx, type FdPoll, OutCell } from '../ffi/index.js';
import { errorFromStatus } from '../errors.js';
import { progressOnce } from './completions.js';

export type ProgressMode = 'event' | 'polling' | 'manual';

const UCS_ERR_BUSY = -15;
/** Progress calls per drain before yielding to the event loop, so a flood cannot starve it. */
const MAX_PROGRESS_PER_DRAIN = 1024;
/** A safety net in 'event' mode while operations are in flight: re-drain if no wake-up came for this long. */
const EVENT_WATCHDOG_MS = 100;
/** Progress/arm rounds per wake-up before the rest waits for the next event-loop iteration. */
const MAX_ARM_ROUNDS = 8;

export class ProgressEngine {
  readonly mode: ProgressMode;
  readonly #worker: bigint;
  readonly #afterProgress: () => void;
  /** Whether operations are in flight ('polling' spins only then). */
  readonly #hasInflight: () => boolean;
  #poll: FdPoll | undefined;
  #busy = false;
  #kickScheduled = false;
  #spinning = false;
  #watchdog: NodeJS.Timeout | undefined;
  #closed = false;
  #inProgress = false;

  constructor(
    worker: bigint, mode: ProgressMode, wakeup: boolean, afterProgress: () => void, hasInflight: () => boolean,
  ) {
    this.#worker = worker;
    this.#hasInflight = hasInflight;
    this.mode = mode;
    this.#afterProgress = afterProgress;
    if (mode === 'manual') return;
    if (!wakeup) {
      throw new TypeError(`progressMode '${mode}' needs the context feature 'wakeup'; use 'manual' without it`);
    }
    const fd = new OutCell();
    const status = ucx().ucp_worker_get_efd(worker, fd.reset());
    if (status !== UCS_OK) throw errorFromStatus(status, 'ucp_worker_get_efd');
    this.#poll = pollReadable(fd.i32(), () => this.#onWake());
    this.#poll.unref();
    this.#drainAndArm();
  }

  /** Progresses until UCX reports no more work (bounded); returns how many events were processed. */
  progress(): number {
    if (this.#closed || this.#inProgress) return 0;
    this.#inProgress = true;
    let total = 0;
    try {
      const fn = ucx().ucp_worker_progress;
      for (let i = 0; i < MAX_PROGRESS_PER_DRAIN; i++) {
        const n = progressOnce(fn, this.#worker);
        if (n === 0) break;
        total += n;
      }
    } finally {
      this.#inProgress = false;
    }
    this.#afterProgress();
    return total;
  }

  /** Tells the engine whether operations are in flight / a listener is open. */
  setBusy(busy: boolean, inflight: boolean): void {
    if (this.#closed) return;
    if (busy !== this.#busy) {
      this.#busy = busy;
      if (busy) this.#poll?.ref();
      else this.#poll?.unref();
    }
    if (inflight) this.kick();
    else if (this.#watchdog !== undefined) {
      clearInterval(this.#watchdog);
      this.#watchdog = undefined;
    }
  }

  /** Called after an operation went in flight: make sure progress happens soon. */
  kick(): void {
    if (this.#closed || this.mode === 'manual') return;
    if (this.mode === 'polling') {
      if (!this.#spinning) {
        this.#spinning = true;
        setImmediate(this.#spin);
      }
      return;
    }
    if (!this.#kickScheduled) {
      this.#kickScheduled = true;
      setImmediate(this.#onKick);
    }
    if (this.#watchdog === undefined) {
      this.#watchdog = setInterval(this.#onKick, EVENT_WATCHDOG_MS);
      this.#watchdog.unref();
    }
  }

  readonly #onKick = (): void => {
    this.#kickScheduled = false;
    this.#drainAndArm();
  };

  readonly #spin = (): void => {
    if (this.#closed) return;
    this.progress();
    if (this.#hasInflight()) setImmediate(this.#spin);
    else {
      this.#spinning = false;
      this.#drainAndArm();
    }
  };


  #onWake(): void {
    if (this.#closed) return;
    if (this.#spinning) {
      this.progress();
      return;
    }
    this.#drainAndArm();
    if (this.mode === 'polling' && this.#hasInflight()) this.kick();
  }

  /**
   * The arm protocol: progress until idle, then arm; UCS_ERR_BUSY means events arrived meanwhile.
   * Bounded: a transport can stay "busy" until work that runs on the event loop happens (for example
   * the deferred close of an endpoint whose peer died keeps its socket readable), so after a few rounds
   * the retry moves to the next loop iteration instead of spinning here.
   */
  #drainAndArm(): void {
    if (this.#closed || this.#poll === undefined) return;
    const arm = ucx().ucp_worker_arm;
    for (let round = 0; round < MAX_ARM_ROUNDS; round++) {
      this.progress();
      if (this.#closed) return;
      const status = arm(this.#worker);
      if (status === UCS_OK) return;
      if (status !== UCS_ERR_BUSY) throw errorFromStatus(status, 'ucp_worker_arm');
    }
    if (!this.#kickScheduled) {
      this.#kickScheduled = true;
      setImmediate(this.#onKick);
    }
  }

  /** Stops all automatic progress. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#watchdog !== undefined) clearInterval(this.#watchdog);
    this.#watchdog = undefined;
    this.#poll?.close();
    this.#poll = undefined;
  }
}
