/**
 * A worker's failure detector: a second ucp_worker of the same context that holds the PEER-mode
 * endpoints of connections whose data takes a fast lane (endpoint/fast-lane.ts). UCX polls the
 * interfaces of every endpoint of a worker in each ucp_worker_progress call, and a TCP interface's poll
 * is an epoll_wait system call: on the worker that carries the data, that alone made each 8-byte round
 * trip over a lane 1.4x NONE's (docs/interoperability.md). Here the TCP endpoints have a worker of
 * their own, which its own progress engine wakes on its event fd: a peer's failure (the socket's end)
 * wakes it at once, a stopped peer is the failure watchdog's, and the data worker never polls TCP.
 *
 * It polls continuously only while a connection is being set up or closed on it (`hold`); it never
 * keeps the process alive by itself (the Endpoint on the data worker does). In a context without the
 * 'wakeup' feature (no event fd) a timer progresses it every DETECTOR_TICK_MS instead.
 */
import { CONSTANTS as K, OutCell, StructBuffer, layouts, ucx } from '../ffi/index.js';
import { check } from '../errors/index.js';
import { ProgressEngine } from '../engine/progress-engine.js';
import { debug } from '../internal/debug-log.js';
import { liveCounts } from '../internal/live-counts.js';

/** Polling after the last activity before the detector sleeps on its event fd (us). */
const DETECTOR_BUSY_POLL_US = 200;
/** Without an event fd: how often the detector is progressed while nothing is set up on it (ms). */
const DETECTOR_TICK_MS = 5;

export class Detector {
  #handle: bigint | null;
  readonly #engine: ProgressEngine;
  /** Setups and closes under way: the engine polls while there is one. */
  #holds = 0;
  /** Without an event fd: the periodic progress, and whether a setImmediate chain polls meanwhile. */
  #tick: NodeJS.Timeout | null = null;
  #polling = false;

  /** `clientId`: the id its connection requests carry (it says "detector": internal/client-id.ts). */
  constructor(contextHandle: bigint, clientId: bigint, wakeup: boolean) {
    const params = new StructBuffer(layouts.ucp_worker_params_t);
    params.setU64('field_mask', K.UCP_WORKER_PARAM_FIELD_THREAD_MODE | K.UCP_WORKER_PARAM_FIELD_CLIENT_ID)
      .setU32('thread_mode', 0).setU64('client_id', clientId);
    const out = new OutCell();
    check(ucx().ucp_worker_create(contextHandle, params.buffer, out.reset()), 'ucp_worker_create (failure detector)');
    const handle = out.ptr() as bigint;
    this.#handle = handle;
    try {
      this.#engine = wakeup
        ? new ProgressEngine(handle, 'polling', true, () => {}, () => this.#holds > 0, DETECTOR_BUSY_POLL_US)
        : new ProgressEngine(handle, 'manual', false, () => {}, () => false);
    } catch (err) {
      ucx().ucp_worker_destroy(handle);
      this.#handle = null;
      throw err;
    }
    liveCounts.detectors++;
    if (!wakeup) {
      this.#tick = setInterval(() => this.progress(), DETECTOR_TICK_MS);
      this.#tick.unref();
    }
    debug('failure detector worker created (%s)', wakeup ? 'woken by its event fd' : `progressed every ${DETECTOR_TICK_MS} ms`);
  }

  /** The ucp_worker_h; null once destroyed. */
  get handle(): bigint | null {
    return this.#handle;
  }

  /** One progress pass (close paths of the data worker call it with theirs). */
  progress(): void {
    if (this.#handle !== null && !this.#engine.inProgress) this.#engine.progress();
  }

  /** Whether a progress call of this worker runs (inside a UCX callback). */
  get inProgress(): boolean {
    return this.#engine.inProgress;
  }

  /** A setup or close starts (+1) or ends (-1): polled continuously meanwhile. */
  hold(delta: 1 | -1): void {
    this.#holds += delta;
    if (delta === 1 && this.#handle !== null) this.kick();
  }

  /** Something was posted on one of its endpoints: progress soon. */
  kick(): void {
    if (this.#handle === null) return;
    if (this.#tick === null) {
      this.#engine.kick();
    } else if (!this.#polling) {
      this.#polling = true;
      setImmediate(this.#poll);
    }
  }

  /** Without an event fd: polls on every turn of the event loop while something is set up. */
  readonly #poll = (): void => {
    this.progress();
    if (this.#holds > 0 && this.#handle !== null) setImmediate(this.#poll);
    else this.#polling = false;
  };

  /** Stops its progress and destroys the worker (after its endpoints are closed and their requests released). */
  destroy(): void {
    const handle = this.#handle;
    if (handle === null) return;
    this.#engine.close();
    if (this.#tick !== null) clearInterval(this.#tick);
    this.#tick = null;
    this.#handle = null;
    ucx().ucp_worker_destroy(handle);
    liveCounts.detectors--;
    debug('failure detector worker destroyed');
  }
}
