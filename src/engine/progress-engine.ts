/**
 * Drives `ucp_worker_progress` from Node's event loop.
 *
 * - 'event': the worker's event fd is watched by a libuv poll on Node's own loop, and the process sleeps
 *   in epoll until UCX has something to do. After any activity (a wake-up, an operation posted or
 *   completed) the engine keeps polling for a short grace period (`busyPollUs`, default 50 us) before it
 *   runs the arm protocol (progress until idle, then `ucp_worker_arm` until it returns UCS_OK) and goes
 *   back to sleep: an answer that comes within the grace period costs no wake-up. The watch stays for
 *   the worker's whole life, so a peer's emulated RMA into this process completes even when this side
 *   has nothing in flight.
 * - 'polling': the same, but it polls continuously while operations are in flight, and for a longer
 *   grace period (default 1 ms) after the last one (lowest latency, one core busy meanwhile).
 * - 'manual': nothing runs by itself; the caller calls `worker.progress()`.
 *
 * Polling runs as a chain of microtasks, one `ucp_worker_progress` call per step, and lets the event
 * loop turn (I/O and timers run) every SLICE_MS. A turn of the loop costs an epoll_wait syscall and the
 * timers' bookkeeping (microseconds: docs/performance.md); a step costs a progress call. Code that waits on a
 * completion runs in the microtasks queued ahead of the next step, so it posts its next operation at
 * once.
 *
 * The fd watch is ref'd only while the worker is "busy" (operations in flight or a listener open), so an
 * idle worker never keeps the process alive.
 */
import { OutCell, UCS_ERR_BUSY, UCS_OK, pollReadable, ucx, type FdWatch } from '../ffi/index.js';
import { errorFromStatus } from '../errors/index.js';
import { progressOnce } from './completions.js';
import { noteLoopTurn } from '../internal/loop-turn.js';
import { InvalidArgumentError } from '../errors/misuse.js';

/**
 * How a worker is progressed: 'event' sleeps in epoll until UCX has work (no CPU when idle),
 * 'polling' spins while operations are in flight (lowest latency), 'manual' leaves it to
 * `worker.progress()`.
 */
export type ProgressMode = 'event' | 'polling' | 'manual';

/** Progress calls per drain before yielding to the event loop, so a flood cannot starve it. */
const MAX_PROGRESS_PER_DRAIN = 1024;
/** A safety net in 'event' mode while operations are in flight: re-drain if no wake-up came for this long. */
const EVENT_WATCHDOG_MS = 100;
/** Default grace periods (microseconds of polling after the last activity before sleeping). */
export const DEFAULT_BUSY_POLL_US = { event: 50, polling: 1000, manual: 0 } as const;
/**
 * How long polling runs in microtasks before it lets the event loop turn: I/O and timers wait up to
 * this long while a worker polls. A turn costs a few microseconds and falls inside one operation, so
 * with 1-2 us round trips a slice of 0.2 ms put a turn in about 1% of them, on each side (the p99 of a
 * ping-pong); 1 ms puts it below the 99th percentile (docs/performance.md).
 */
const SLICE_MS = 1;
/** Polling steps between two clock reads (a power of two). */
const STEPS_PER_CHECK = 8;
/**
 * Once QUIET_STEPS steps in a row found nothing, a step makes up to EMPTY_CALLS_PER_STEP progress calls
 * in a row while they find nothing, before it queues the next step: each queued step allocates a
 * Promise reaction, and one per call (~40 ns) made garbage fast enough for V8 to scavenge every few
 * hundred operations (docs/performance.md). A call that finds work ends the step at once, and the
 * steps right after one that found work make one call each, so that code awaiting a completion (a few
 * microtask hops) runs and posts its next operation without waiting for a batch of calls.
 */
const EMPTY_CALLS_PER_STEP = 32;
const QUIET_STEPS = 12;
/**
 * Steps are queued as reactions to this settled Promise: one V8 microtask each. Node's `queueMicrotask`
 * wraps every callback in an AsyncResource and a bound function, which cost as much as the step itself.
 */
const RESOLVED = Promise.resolve();
/** Progress/arm rounds per wake-up before the rest waits for the next event-loop iteration. */
const MAX_ARM_ROUNDS = 8;

export class ProgressEngine {
  readonly mode: ProgressMode;
  readonly #worker: bigint;
  readonly #afterProgress: () => void;
  /** Whether operations are in flight ('polling' spins only then). */
  readonly #hasInflight: () => boolean;
  #poll: FdWatch | undefined;
  #busy = false;
  /** Whether the fd watch is ref'd (keeps the process alive). */
  #refd = false;
  #kickScheduled = false;
  /** Polling (a chain of steps) is under way. */
  #spinning = false;
  /** When the current slice of steps ends (performance.now() ms). */
  #sliceEnd = 0;
  /** The last activity (performance.now() ms): polling goes on until `#graceMs` after it. */
  #lastActivity = 0;
  readonly #graceMs: number;
  /** Steps taken, and whether one of them saw activity since the last clock read. */
  #steps = 0;
  #activeSinceCheck = false;
  /** Steps in a row that found nothing. */
  #quietSteps = 0;
  #watchdog: NodeJS.Timeout | undefined;
  #closed = false;
  #inProgress = false;

  /** True while a progress call runs, i.e. inside a UCX callback (where progress must not be called). */
  get inProgress(): boolean {
    return this.#inProgress;
  }

  constructor(
    worker: bigint, mode: ProgressMode, wakeup: boolean, afterProgress: () => void, hasInflight: () => boolean,
    busyPollUs: number = DEFAULT_BUSY_POLL_US[mode],
  ) {
    this.#graceMs = busyPollUs / 1000;
    this.#worker = worker;
    this.#hasInflight = hasInflight;
    this.mode = mode;
    this.#afterProgress = afterProgress;
    if (mode === 'manual') return;
    if (!wakeup) {
      throw new InvalidArgumentError(`progressMode '${mode}' needs the context feature 'wakeup'; use 'manual' without it`);
    }
    const fd = new OutCell();
    const status = ucx().ucp_worker_get_efd(worker, fd.reset());
    if (status !== UCS_OK) throw errorFromStatus(status, 'ucp_worker_get_efd');
    this.#poll = pollReadable(fd.i32(), () => this.#onWake());
    this.#poll.unref();
    this.#drainAndArm();
  }

  #passes = 0;

  /** How many progress passes ran (each one or more ucp_worker_progress calls). */
  get passes(): number {
    return this.#passes;
  }

  /** Progresses until UCX reports no more work (bounded); returns how many events were processed. */
  progress(): number {
    return this.#run(MAX_PROGRESS_PER_DRAIN);
  }

  /**
   * One `ucp_worker_progress` call (plus what must run after it), for synchronous spin loops: cheaper
   * than `progress()`, which drains until UCX reports nothing more to do.
   */
  progressOne(): number {
    return this.#run(1);
  }

  /** Up to `maxCalls` progress calls, stopping at one that finds nothing; then the after-progress work. */
  #run(maxCalls: number): number {
    if (this.#closed || this.#inProgress) return 0;
    this.#inProgress = true;
    this.#passes++;
    let total = 0;
    try {
      const fn = ucx().ucp_worker_progress;
      for (let i = 0; i < maxCalls; i++) {
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

  /**
   * Tells the engine whether operations are in flight / a listener is open. Called on every 0 <-> 1
   * change of the in-flight count, i.e. up to twice per operation in a ping-pong, so it only records
   * the state while polling is under way: the fd watch's ref and the watchdog timer follow it when the
   * engine goes to sleep (each is a native call or a timer, which cost more than the operation).
   */
  setBusy(busy: boolean, inflight: boolean): void {
    if (this.#closed) return;
    this.#busy = busy;
    if (busy) {
      if (!this.#refd) {
        this.#refd = true;
        this.#poll?.ref();
      }
    } else if (!this.#spinning) {
      this.#settleIdle();
    }
    if (inflight) this.kick();
  }

  /** Applies an idle state: the fd watch stops keeping the process alive, the watchdog stops. */
  #settleIdle(): void {
    if (!this.#busy && this.#refd) {
      this.#refd = false;
      this.#poll?.unref();
    }
    if (this.#watchdog !== undefined && !this.#hasInflight()) {
      clearInterval(this.#watchdog);
      this.#watchdog = undefined;
    }
  }

  /** Called after an operation went in flight: make sure progress happens soon. */
  kick(): void {
    if (this.#closed || this.mode === 'manual') return;
    this.touch();
    // A safety net for 'event' while operations are in flight, in case a wake-up is missed.
    if (this.mode === 'event' && this.#watchdog === undefined) {
      this.#watchdog = setInterval(this.#onKick, EVENT_WATCHDOG_MS);
      this.#watchdog.unref();
    }
  }

  /**
   * Notes activity (an operation posted, even one that UCX completed at once): polling goes on for the
   * grace period at least, since an answer is likely on its way.
   */
  touch(): void {
    if (this.#closed || this.mode === 'manual') return;
    if (this.#spinning) {
      this.#activeSinceCheck = true; // the next clock read records it
      return;
    }
    this.#lastActivity = performance.now();
    this.#spinning = true;
    setImmediate(this.#spin);
  }

  readonly #onKick = (): void => {
    this.#kickScheduled = false;
    if (!this.#spinning) this.#drainAndArm();
  };

  /** Starts a slice of polling steps (a macrotask: the event loop turned before it). */
  readonly #spin = (): void => {
    if (this.#closed) return;
    const now = performance.now();
    noteLoopTurn(now);
    this.#sliceEnd = now + SLICE_MS;
    this.#step();
  };

  readonly #step = (): void => {
    if (this.#closed) return;
    // Progress calls until one finds work (a drain would add a call that finds nothing), at most
    // EMPTY_CALLS_PER_STEP, and the clock read every STEPS_PER_CHECK steps: both cost more than the
    // step's other work.
    let events = this.progressOne();
    if (events === 0 && ++this.#quietSteps > QUIET_STEPS) {
      for (let i = 1; events === 0 && i < EMPTY_CALLS_PER_STEP && !this.#closed; i++) events = this.progressOne();
    }
    if (events > 0) this.#quietSteps = 0;
    if (this.#closed) return;
    if (events > 0 || (this.mode === 'polling' && this.#hasInflight())) this.#activeSinceCheck = true;
    if ((++this.#steps & (STEPS_PER_CHECK - 1)) !== 0) {
      // After completions, the code awaiting them needs a few microtask hops (the Request's then, the
      // await's continuation) before it posts its next operation: the QUIET_STEPS steps that follow
      // make one call each, so it posts between two of them.
      void RESOLVED.then(this.#step);
      return;
    }
    const now = performance.now();
    if (this.#activeSinceCheck) {
      this.#activeSinceCheck = false;
      this.#lastActivity = now;
    } else if (now - this.#lastActivity >= this.#graceMs) {
      // Quiet for the grace period: arm and sleep until the fd wakes us.
      this.#spinning = false;
      this.#drainAndArm();
      this.#settleIdle();
      return;
    }
    if (now < this.#sliceEnd) void RESOLVED.then(this.#step);
    else setImmediate(this.#spin);
  };

  #onWake(): void {
    if (this.#closed) return;
    if (this.#spinning) {
      // The fd stays readable until the arm protocol drains it; polling is under way anyway.
      this.progress();
      return;
    }
    // Traffic came in: poll for the grace period, as after a local operation. The fd is drained (and
    // the worker armed again) once that period passes quietly.
    this.progress();
    this.touch();
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
      if (status === UCS_OK) {
        this.#poll.armed(); // a relay watch (worker threads) polls the fd again only now
        return;
      }
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
