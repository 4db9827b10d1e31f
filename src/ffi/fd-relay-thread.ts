/**
 * The body of a wake relay thread (see fd-relay.ts): waits in libc `poll()` for a UCX worker's event fd
 * and tells its owner thread through one shared Int32 cell. It never registers a callback and never
 * watches anything on its own event loop, so it can be stopped at any point (its owner thread's
 * `worker.terminate()` stops it too) without native code calling into a dying JavaScript environment.
 *
 * The cell: ARMED (0) = the owner has armed the UCX worker, poll the fd; WOKEN (1) = the fd was readable,
 * the owner has not re-armed yet; STOP (2) = exit. Only this thread moves ARMED -> WOKEN (compare-exchange,
 * so a STOP written meanwhile is never overwritten); only the owner moves WOKEN -> ARMED and * -> STOP.
 */
import koffi from 'koffi';
import { workerData } from 'node:worker_threads';

const ARMED = 0;
const WOKEN = 1;
const STOP = 2;
/** poll() timeout: how often STOP is looked at while the fd stays quiet (bounds a terminate's join). */
const POLL_TIMEOUT_MS = 100;
const POLLIN = 0x1;
const POLLERR = 0x8;
const POLLNVAL = 0x20;

const { fd, state, loaded } = workerData as { fd: number; state: Int32Array; loaded: Int32Array };
const libc = koffi.load('libc.so.6');
const poll = libc.func('int poll(void *fds, unsigned long nfds, int timeout)') as
  (fds: Buffer, count: number, timeoutMs: number) => number;
Atomics.store(loaded, 0, 1);
Atomics.notify(loaded, 0);
// struct pollfd { int fd; short events; short revents; }
const pollfd = Buffer.alloc(8);
pollfd.writeInt32LE(fd, 0);
pollfd.writeInt16LE(POLLIN, 4);

for (;;) {
  // Wait for the owner to arm the worker (or to stop us).
  while (Atomics.load(state, 0) === WOKEN) Atomics.wait(state, 0, WOKEN);
  if (Atomics.load(state, 0) === STOP) break;
  pollfd.writeInt16LE(0, 6);
  const ready = poll(pollfd, 1, POLL_TIMEOUT_MS);
  if (ready <= 0) continue; // timeout (look at STOP again) or EINTR
  const revents = pollfd.readInt16LE(6);
  // The fd is gone: the owner destroyed the worker (it sets STOP first; this is the belt to it).
  if ((revents & (POLLNVAL | POLLERR)) !== 0) break;
  if (Atomics.compareExchange(state, 0, ARMED, WOKEN) !== ARMED) break; // STOP
  Atomics.notify(state, 0);
}
