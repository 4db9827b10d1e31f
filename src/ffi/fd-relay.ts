/**
 * Watching a UCX worker's event fd from a `worker_threads` thread, safely.
 *
 * On Node's main thread the fd is watched with koffi's libuv poll (`koffi.node.poll`). In a worker thread
 * that is not safe: `worker.terminate()` (and the end of the process, which terminates every thread) stops
 * the thread's JavaScript without running its 'exit' handlers, then Node keeps running the thread's libuv
 * loop while it tears the environment down. A koffi poll handle that is still open fires there when the fd
 * is readable, koffi's callback cannot call into JavaScript any more, and node-addon-api turns that into a
 * FATAL ERROR (`Error::ThrowAsJavaScriptException napi_throw`) that aborts the whole process. Nothing in
 * JavaScript runs between terminate() and that point, so the poll handle cannot be closed in time.
 *
 * So a worker thread has no native handle on its loop that calls JavaScript: a small relay thread (a
 * nested `worker_threads` thread, fd-relay-thread.ts) waits for the fd in a blocking libc `poll()` and
 * signals through a SharedArrayBuffer cell; this thread waits on the cell with `Atomics.waitAsync`, whose
 * resolution is an ordinary V8 task that a dying environment simply drops. Node stops nested threads before
 * it tears their parent down, and the relay never has anything to call back into, so every way a thread
 * can end (return, process.exit(), an uncaught exception, terminate(), the process exiting) is clean.
 *
 * The relay reports readability once and waits for `armed()` (the owner ran ucp_worker_arm successfully)
 * before it polls again: the fd stays readable until the owner drains it, and a level-triggered relay
 * would spin meanwhile. A wake costs an Atomics.notify plus a task on this thread's loop (tens of us).
 */
import { Worker } from 'node:worker_threads';

const ARMED = 0;
const WOKEN = 1;
const STOP = 2;
/** After the relay thread died unexpectedly: poll this often instead (a fallback, never the normal path). */
const FALLBACK_INTERVAL_MS = 1;

/** `Atomics.waitAsync` (V8 has it since Node 16; TypeScript lists it from lib es2024 on). */
const waitAsync = (Atomics as unknown as {
  waitAsync(array: Int32Array, index: number, value: number): { async: boolean; value: Promise<unknown> | string };
}).waitAsync;

/** How many relay threads are running in this thread (a diagnostic for tests and the soak). */
let liveRelays = 0;

/** The number of wake relay threads this thread has running. */
export function liveRelayThreads(): number {
  return liveRelays;
}

/** What both fd watches offer the progress engine. */
export interface FdWatch {
  /** Keep the thread's event loop alive while watching. */
  ref(): void;
  /** Do not keep the loop alive for this watch. */
  unref(): void;
  /** The owner re-armed the UCX worker (ucp_worker_arm returned UCS_OK): watch for the next event. */
  armed(): void;
  /** Stops watching; no callback comes after this returns. Idempotent. */
  close(): void;
}

/** How long a new relay may take to load before its owner goes on without waiting. */
const RELAY_LOAD_WAIT_MS = 5000;

export class RelayWatch implements FdWatch {
  readonly #state = new Int32Array(new SharedArrayBuffer(4));
  readonly #onReadable: () => void;
  readonly #thread: Worker;
  /** Keeps the loop alive while ref'd (a pending Atomics.waitAsync does not). */
  readonly #keepAlive: NodeJS.Timeout;
  #listening = false;
  #closed = false;
  #fallback: NodeJS.Timeout | undefined;
  #refd = false;

  constructor(fd: number, onReadable: () => void) {
    this.#onReadable = onReadable;
    // The relay waits for the first armed() before it polls.
    Atomics.store(this.#state, 0, WOKEN);
    const loaded = new Int32Array(new SharedArrayBuffer(4));
    this.#thread = new Worker(new URL('./fd-relay-thread.js', import.meta.url), {
      workerData: { fd, state: this.#state, loaded },
      // Its own loop holds nothing; keep it small and quiet.
      execArgv: [],
      stdout: false,
      stderr: false,
      resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2 },
    });
    this.#thread.unref();
    liveRelays++;
    this.#thread.once('exit', () => {
      liveRelays--;
      if (!this.#closed) this.#startFallback('exited');
    });
    this.#thread.on('error', (err: Error) => {
      if (!this.#closed) this.#startFallback(err.message);
    });
    this.#keepAlive = setInterval(() => undefined, 1 << 30);
    this.#keepAlive.unref();
    // Wait (this is a worker thread: it may block) until the relay has loaded koffi. A thread stopped
    // while it loads a native module aborts the whole process (node-addon-api throws into an environment
    // that is going away), so the window in which terminate() can do that is kept to this constructor.
    Atomics.wait(loaded, 0, 0, RELAY_LOAD_WAIT_MS);
  }

  ref(): void {
    this.#refd = true;
    this.#keepAlive.ref();
    this.#fallback?.ref();
  }

  unref(): void {
    this.#refd = false;
    this.#keepAlive.unref();
    this.#fallback?.unref();
  }

  armed(): void {
    if (this.#closed) return;
    if (Atomics.exchange(this.#state, 0, ARMED) === WOKEN) Atomics.notify(this.#state, 0);
    this.#listen();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    Atomics.store(this.#state, 0, STOP);
    Atomics.notify(this.#state, 0);
    clearInterval(this.#keepAlive);
    if (this.#fallback !== undefined) clearInterval(this.#fallback);
    // The relay sees STOP within its poll timeout and exits by itself; it is unref'd meanwhile.
  }

  #listen(): void {
    if (this.#listening || this.#closed) return;
    const result = waitAsync(this.#state, 0, ARMED);
    if (result.async) {
      this.#listening = true;
      void (result.value as Promise<unknown>).then(this.#onSignal);
    } else {
      // Already WOKEN (or STOP): handle it on a fresh tick, as a wake-up would be.
      this.#listening = true;
      setImmediate(this.#onSignal);
    }
  }

  readonly #onSignal = (): void => {
    this.#listening = false;
    if (this.#closed) return;
    // WOKEN: the owner drains and re-arms, then armed() listens again. Anything else: listen again.
    if (Atomics.load(this.#state, 0) === WOKEN) this.#onReadable();
    else this.#listen();
  };

  #startFallback(reason: string): void {
    if (this.#fallback !== undefined || this.#closed) return;
    process.emitWarning(`ucxx-ts: the wake relay thread stopped (${reason}); progressing on a timer instead`);
    this.#fallback = setInterval(() => {
      if (!this.#closed) this.#onReadable();
    }, FALLBACK_INTERVAL_MS);
    if (!this.#refd) this.#fallback.unref();
  }
}
