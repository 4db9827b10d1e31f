/**
 * An endpoint's failure watchdog: while an operation is in flight, a look every tenth of failureTimeout.
 * When only sends are in flight and nothing settled since the last look, it posts a flush (the probe):
 * on a live connection it completes as soon as UCX has handed everything to the transport (a rendezvous
 * waiting for the peer's receive does not hold it), on a dead one it stalls. When a watched operation
 * (RMA, atomics, flush, the probe) is in flight and no operation of the endpoint has settled for
 * failureTimeout, the peer is taken for failed. It stops at the first look that finds nothing in flight.
 */
import { kOnSettle } from '../internal/symbols.js';
import type { Request } from '../request.js';

/** What the watchdog needs from its endpoint. */
export interface WatchdogHost {
  /** Whether the endpoint is still open: the watchdog stops once it is not. */
  isOpen(): boolean;
  /** Posts the probe (a flush of the endpoint); null when there is nothing to flush on. */
  probe(): Request<void> | null;
  /** No operation settled for `stalledMs` while a watched one was in flight: the peer is taken for failed. */
  stalled(stalledMs: number): void;
}

export class FailureWatchdog {
  /** Operations in flight that only the peer's UCX has to answer (RMA, atomics, flush): they arm it. */
  armed = 0;
  /** Sends in flight (not watched themselves: a live peer may hold one as long as it likes). */
  sending = 0;
  readonly #host: WatchdogHost;
  /** The context's failureTimeout (ms; Infinity: no watchdog). */
  readonly #timeout: number;
  /** The probe, while in flight. */
  #probe: Request<void> | null = null;
  /** Operations settled so far: the sign of life. */
  #progress = 0;
  /** #progress at the last look, and since when it has not moved. */
  #seen = -1;
  #stallSince = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(host: WatchdogHost, failureTimeout: number) {
    this.#host = host;
    this.#timeout = failureTimeout;
  }

  /** Something of the endpoint is in flight. */
  get busy(): boolean {
    return this.armed > 0 || this.sending > 0;
  }

  /** An operation went in flight; `watched` ones arm the watchdog. */
  started(watched: boolean): void {
    if (watched) this.armed++;
    else this.sending++;
    if (this.#timer === null) this.#start();
  }

  /** An operation settled (`completed`: by UCX's completion, a sign of life). */
  settled(watched: boolean, completed: boolean): void {
    if (completed) this.#progress++;
    if (watched) this.armed--;
    else this.sending--;
  }

  stop(): void {
    if (this.#timer === null) return;
    clearInterval(this.#timer);
    this.#timer = null;
  }

  #start(): void {
    if (!Number.isFinite(this.#timeout) || !this.#host.isOpen()) return;
    this.#seen = -1;
    this.#timer = setInterval(() => this.#look(), Math.max(10, Math.floor(this.#timeout / 10)));
    this.#timer.unref();
  }

  #look(): void {
    if (!this.#host.isOpen() || !this.busy) {
      this.stop();
      return;
    }
    const now = performance.now();
    if (this.#progress !== this.#seen) {
      this.#seen = this.#progress;
      this.#stallSince = now;
      return;
    }
    if (this.armed <= 0) {
      if (this.#probe === null) {
        const probe = this.#host.probe();
        if (probe === null || probe.error !== undefined) return; // no handle, or the worker is closing
        if (probe.completed) this.#progress++;
        else {
          this.#probe = probe;
          probe[kOnSettle] = () => {
            this.#probe = null;
          };
        }
      }
      return;
    }
    if (now - this.#stallSince < this.#timeout) return;
    this.stop();
    this.#host.stalled(Math.round(now - this.#stallSince));
  }
}
