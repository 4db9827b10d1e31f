/**
 * Waiting tag probes (`worker.tagProbeWait`): each one is checked after every progress pass of its
 * worker, so it costs nothing while the worker sleeps and wakes with the worker when a message arrives.
 * UCP has no probe request to wait on (ucp_tag_probe_nb only looks), hence the check after progress.
 */
import { UCS_ERR_CANCELED } from '../ffi/index.js';
import { errorFromStatus } from '../errors/index.js';

interface Waiter<T> {
  readonly look: () => T | null;
  readonly resolve: (value: T) => void;
  readonly reject: (err: Error) => void;
}

/** The waiting probes of one worker. */
export class ProbeWaits<T> {
  readonly #waiters = new Set<Waiter<T>>();
  /** Called with +1 when the first waiter starts and -1 when the last ends: it keeps the worker awake. */
  readonly #hold: (delta: number) => void;

  constructor(hold: (delta: number) => void) {
    this.#hold = hold;
  }

  get size(): number {
    return this.#waiters.size;
  }

  /** Waits until `look()` finds something (checked at once, then after each progress pass). */
  wait(look: () => T | null, signal: AbortSignal | undefined): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (signal?.aborted === true) {
        reject(canceled(signal));
        return;
      }
      const found = look();
      if (found !== null) {
        resolve(found);
        return;
      }
      const onAbort = (): void => {
        if (this.#delete(waiter)) reject(canceled(signal));
      };
      const waiter: Waiter<T> = {
        look,
        resolve: (value) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(value);
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.add(waiter);
      if (this.#waiters.size === 1) this.#hold(1);
    });
  }

  /** After a progress pass: hands each message found to its waiter, oldest waiter first. */
  check(): void {
    for (const waiter of this.#waiters) {
      const found = waiter.look();
      if (found === null) continue;
      this.#delete(waiter);
      waiter.resolve(found);
    }
  }

  /** The worker closes: every waiter rejects with CanceledError. */
  cancelAll(): void {
    for (const waiter of [...this.#waiters]) {
      this.#delete(waiter);
      waiter.reject(errorFromStatus(UCS_ERR_CANCELED, 'tagProbeWait: the worker was closed'));
    }
  }

  #delete(waiter: Waiter<T>): boolean {
    if (!this.#waiters.delete(waiter)) return false;
    if (this.#waiters.size === 0) this.#hold(-1);
    return true;
  }
}

/** A CanceledError whose `cause` is the signal's reason (a TimeoutError for AbortSignal.timeout()). */
function canceled(signal: AbortSignal | undefined): Error {
  const err = errorFromStatus(UCS_ERR_CANCELED, `tagProbeWait: aborted (${String(signal?.reason)})`);
  Object.defineProperty(err, 'cause', { value: signal?.reason, configurable: true, writable: true });
  return err;
}
