/**
 * The two sides of a ucxx-perf run: the set-up both share (workers, the plan, worker addresses and the
 * remote key), the server's loop and the client's measurement. What each test does is in tests.ts.
 */
import { performance } from 'node:perf_hooks';
import {
  Context, TimedOutError, createRemoteKeyFromSerialized, type Endpoint, type MemoryHandle, type Request, type Worker,
} from 'ucxx-ts';
import type { Mode, Plan, Result } from './plan.js';
import { describeTransports, printHeader, printRow, ProgressBar, summarize } from './report.js';
import { PERF_TESTS, type ClientRun, type PerfTest, type ServerRun, type Step, type Wait } from './tests.js';
import { Window } from './window.js';

const PLAN_TAG = 0x5045524600000001n; // client -> server: the plan (JSON)
const KEY_TAG = 0x5045524600000002n; // server -> client: serialized key
const ACK_TAG = 0x5045524600000003n; // server -> client: a bandwidth phase is received
const DONE_TAG = 0x5045524600000006n; // client -> server: the plan is done
const ADDRESS_TAG = 0x5045524600000007n; // server -> client: its worker address

/** The plan as the client sends it: with the iterations (warm-up included) per size and its worker address. */
type WirePlan = Plan & { counts: number[]; address: string };

export function testOf(plan: Plan): PerfTest {
  const test = PERF_TESTS.get(plan.test);
  if (test === undefined) throw new Error(`unknown test ${plan.test}`);
  return test;
}

/**
 * Each side has two workers: `worker` carries the measurement, `control` the connection manager's
 * endpoint (listener and connect) used to agree on the plan and exchange worker addresses, as
 * ucx_perftest does over a plain socket. Keeping them apart matters: an endpoint made through the
 * connection manager also opens TCP lanes, and a worker with TCP lanes polls their sockets on every
 * progress call (an epoll_wait each), which added microseconds to every message of the measured
 * endpoint when both shared one worker (docs/performance.md).
 *
 * 'spin' creates its context without the wakeup feature and progresses by hand: with wakeup, UCX's
 * shared-memory transport signals an armed peer through a socket on every message, which costs
 * microseconds that a busy-polling peer does not need.
 */
/** A context and measurement worker for one test, in the plan's progress mode (see open()). */
function openMeasurement(mode: Mode, busyPollUs?: number): { context: Context; worker: Worker } {
  const context = mode === 'spin'
    ? new Context({ features: ['tag', 'stream', 'am', 'rma', 'amo32', 'amo64'] })
    : new Context();
  const worker = context.createWorker({
    progressMode: mode === 'spin' ? 'manual' : mode, ...(busyPollUs === undefined ? {} : { busyPollUs }),
  });
  if (mode === 'spin') {
    // Between measurements something must progress the manual worker; during one the synchronous
    // spin blocks this timer out.
    const pump = setInterval(() => {
      if (worker.closed) clearInterval(pump);
      else worker.progress();
    }, 1);
  }
  return { context, worker };
}

function open(mode: Mode, busyPollUs?: number): { context: Context; worker: Worker; control: Worker } {
  const context = mode === 'spin'
    ? new Context({ features: ['tag', 'stream', 'am', 'rma', 'amo32', 'amo64'] })
    : new Context();
  const worker = context.createWorker({
    progressMode: mode === 'spin' ? 'manual' : mode, ...(busyPollUs === undefined ? {} : { busyPollUs }),
  });
  // The control worker sleeps until it has something to do ('event'), so that it does not compete
  // with the measurement for the CPU.
  const control = context.createWorker({ progressMode: mode === 'spin' ? 'manual' : 'event' });
  if (mode === 'spin') {
    // Between measurements (connecting, exchanging the plan) something must progress the manual
    // workers; during a measurement the synchronous spin blocks this timer out.
    const pump = setInterval(() => {
      if (worker.closed) clearInterval(pump);
      else {
        worker.progress();
        if (!control.closed) control.progress();
      }
    }, 1);
  }
  return { context, worker, control };
}

/**
 * Waits for a request the fastest way the mode allows: 'spin' progresses synchronously and returns
 * nothing to await (a completed request costs no Promise); the others await the request. Callers await
 * only what it returns: an `await` per operation costs a trip through the microtask queue. The 'await'
 * style is the code the README teaches: every request awaited.
 */
function waiter(worker: Worker, plan: Plan, checkGone?: () => void): Wait {
  const mode = plan.progress;
  if (plan.style === 'await') return (request) => request;
  if (mode === 'spin') {
    return (request) => {
      // The server looks at its client's connection between slices: a client that died never answers.
      if (checkGone === undefined) worker.progressUntil(request);
      while (!request.completed) {
        try {
          worker.progressUntil(request, SPIN_SLICE_MS);
        } catch (err) {
          if (!(err instanceof TimedOutError)) throw err;
          checkGone?.();
        }
      }
      if (request.error !== undefined) throw request.error;
      return undefined;
    };
  }
  // A Request's native Promise: one microtask hop once it settles, where awaiting the Request (a
  // thenable) takes three.
  return (request) => (request.completed && request.error === undefined ? undefined : request.promise);
}

/** How long the server waits for a client that connected to send its plan. */
const PLAN_WAIT_MS = 30_000;
/** How long a server's synchronous wait spins before it looks whether its client is still there. */
const SPIN_SLICE_MS = 200;

function regionSize(plan: Plan): number {
  return Math.max(4096, ...plan.sizes);
}

function createRegion(context: Context, plan: Plan): MemoryHandle {
  const size = regionSize(plan);
  return plan.memory === 'registered' ? context.createMemoryHandle(size, new Uint8Array(size)) : context.createMemoryHandle(size);
}

/** Waits for each request in turn (what `wait` leaves pending is awaited). */
async function waitEach(wait: Wait, requests: readonly Request<unknown>[]): Promise<void> {
  for (const request of requests) {
    const pending = wait(request);
    if (pending !== undefined) await pending;
  }
}

// ---- server -----------------------------------------------------------------------------------------

/**
 * Serves clients one at a time on `port` (with `onListening`: one client, then returns). The listener
 * and the plan's exchange run on a control worker of their own; each client's test runs on a context
 * and worker made for it, in the progress mode (and busy-poll time) the client's plan names, and closed
 * after it: a client that leaves mid-test leaves nothing behind (receives posted for it are cancelled).
 */
export async function serve(port: number, onListening?: (port: number) => void): Promise<void> {
  const context = new Context();
  const control = context.createWorker({ progressMode: 'event' });
  const listener = control.listen({ port });
  onListening?.(listener.port);
  if (onListening === undefined) console.error(`ucxx-perf: server listening on port ${listener.port}`);
  let failed = false;
  for await (const endpoint of listener) {
    failed = false;
    try {
      await serveOne(control, endpoint);
    } catch (err) {
      failed = true;
      console.error(`ucxx-perf server: ${err instanceof ClientGone ? err.message : String(err)}`);
    }
    // The client closes the control connection once its test is done: closing it here at the same
    // moment makes UCX 1.13 log each lane's flush failure as an error (docs/reliability.md), so the
    // server waits for the client's close first.
    if (!failed) await closedBy(endpoint, CLIENT_CLOSE_WAIT_MS);
    await endpoint.close();
    if (onListening !== undefined) break; // --local: one client
    if (failed) console.error('ucxx-perf: server listening again');
  }
  await context.close();
  if (failed) process.exitCode = 1;
}

/** How long a server waits for a client that finished its test to close the control connection. */
const CLIENT_CLOSE_WAIT_MS = 2000;

/** Resolves once `endpoint` is closed (by its peer, typically), or after `ms`. */
function closedBy(endpoint: Endpoint, ms: number): Promise<void> {
  if (endpoint.closed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      endpoint.off('close', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    endpoint.once('close', done);
  });
}

/** The client's control connection closed or failed while the server waited on the test. */
class ClientGone extends Error {
  constructor() {
    super('the client left mid-test (its connection closed); the test was abandoned');
  }
}

async function serveOne(controlWorker: Worker, control: Endpoint): Promise<void> {
  // The measurement endpoint has no error handling (as ucx_perftest's): a client that dies is seen on
  // the control connection, whose 'close' ends every wait below.
  let leave!: (err: ClientGone) => void;
  const left = new Promise<never>((_, reject) => { leave = reject; });
  left.catch(() => undefined);
  const onGone = (): void => leave(new ClientGone());
  control.once('close', onGone);
  control.once('error', onGone);
  if (control.closed) onGone();
  const unlessGone = <T>(promise: Promise<T>): Promise<T> => Promise.race([promise, left]);
  const planBuffer = new Uint8Array(8192);
  let planInfo;
  try {
    planInfo = await unlessGone(controlWorker.tagRecv(planBuffer, PLAN_TAG, undefined, { signal: AbortSignal.timeout(PLAN_WAIT_MS) }).promise);
  } finally {
    if (planInfo === undefined) {
      control.off('close', onGone);
      control.off('error', onGone);
    }
  }
  const plan = JSON.parse(Buffer.from(planBuffer.subarray(0, planInfo.length)).toString()) as WirePlan;
  const test = testOf(plan);
  const { context, worker } = openMeasurement(plan.progress, plan.busyPollUs);
  try {
    await serveTest(plan, test, context, worker, control, unlessGone, () => {
      // In 'spin' nothing else runs meanwhile: look at the control connection from here.
      controlWorker.progress();
      if (control.closed) throw new ClientGone();
    });
  } finally {
    control.off('close', onGone);
    control.off('error', onGone);
    await context.close();
  }
}

async function serveTest(
  plan: WirePlan, test: PerfTest, context: Context, worker: Worker, control: Endpoint,
  unlessGone: <T>(promise: Promise<T>) => Promise<T>, checkGone: () => void,
): Promise<void> {
  // Measurements run on endpoints created from worker addresses, as ucx_perftest's: UCX pairs the two
  // endpoints the sides create to each other (see open() for why not the control endpoint).
  // With the fast lane: a connection through a listener of the measurement worker instead (the lane is
  // set up by connect(); its port goes where the address would).
  let endpoint: Endpoint;
  if (plan.fastLane) {
    const listener = worker.listen({ port: 0 });
    try {
      const accepted = listener[Symbol.asyncIterator]().next();
      await control.tagSend(Buffer.from(String(listener.port)), ADDRESS_TAG);
      const next = await unlessGone(accepted);
      if (next.done === true) throw new ClientGone();
      endpoint = next.value;
    } finally {
      listener.close();
    }
  } else {
    await control.tagSend(Buffer.from(worker.getAddress()), ADDRESS_TAG);
    endpoint = worker.connectToAddress(Buffer.from(plan.address, 'hex'), { errorHandling: plan.errorHandling });
    await unlessGone(endpoint.flush().promise);
  }
  const region = createRegion(context, plan);
  await endpoint.tagSend(region.createRemoteKey().serialize(), KEY_TAG);
  const wait = waiter(worker, plan, checkGone);
  const spin = plan.progress === 'spin';
  const run: ServerRun = {
    plan, worker, endpoint, wait,
    // Messages land in the region (as ucx_perftest receives into its UCX-allocated buffer): the memory
    // kind applies to both sides' buffers, and no RMA targets the region during a messaging test.
    region: region.view(),
    // One receive buffer for every active-message payload, as ucx_perftest has (no allocation per message).
    scratch: new Uint8Array(Math.max(1, ...plan.sizes)),
    yieldOnce: spin
      ? () => { worker.progress(); return undefined; }
      : () => new Promise((resolve) => setImmediate(resolve)),
  };
  const session = test.server?.(run) ?? {};
  try {
    for (const [i, size] of plan.sizes.entries()) {
      if (session.receive === undefined) break; // RMA and atomics need nothing from the server's code
      await unlessGone(Promise.resolve(session.receive(run.region.subarray(0, size), plan.counts[i] as number)));
      if (test.kind !== 'latency' && test.completion === 'ack') await unlessGone(waitEach(wait, [endpoint.tagSend(new Uint8Array(1), ACK_TAG)]));
    }
    if (plan.memory === 'allocated' && test.serverSleeps === true) {
      // A get from UCX-allocated (shared) memory is one-sided: the client's loads need nothing from this
      // process. Look for the client's DONE once a millisecond and sleep in between, as ucx_perftest's
      // server does in `ucp_get`: a busy-polling server would take the second core (on a 2-vCPU VM, maybe
      // the client core's sibling) and make the comparison unfair.
      const doneBuffer = new Uint8Array(1);
      for (;;) {
        const receive = worker.tagProbe(DONE_TAG, undefined, { remove: true })?.receive;
        if (receive) {
          const received = receive(doneBuffer);
          if (!received.completed) wait(received);
          break;
        }
        checkGone();
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      return;
    }
    // RMA into registered memory (emulated with active messages), the messaging tests and am_lat are
    // served by this worker's progress: keep progressing (spinning in 'spin' mode) until the client says
    // it is done.
    const done = worker.tagRecv(new Uint8Array(1), DONE_TAG);
    if (spin) {
      for (let i = 1; !done.completed; i++) {
        worker.progress();
        await session.poll?.();
        if (i % 4096 === 0) checkGone();
      }
    } else {
      // The worker's own progress serves the client meanwhile, as in a user's server.
      await unlessGone(done.promise);
    }
  } finally {
    session.close?.();
    region.close();
    await endpoint.close();
  }
}

// ---- client -----------------------------------------------------------------------------------------

/** Default iterations: enough for a stable figure, bounded by bytes moved. */
function iterationsFor(plan: Plan, size: number): number {
  if (plan.iterations > 0) return plan.iterations;
  const latency = testOf(plan).kind === 'latency';
  const cap = latency ? 20_000 : 100_000;
  const byBytes = Math.floor((latency ? 256 : 2048) * 1024 * 1024 / Math.max(size, 1));
  return Math.max(latency ? 50 : 20, Math.min(cap, byBytes));
}

function warmupFor(plan: Plan, iterations: number): number {
  return plan.warmup >= 0 ? plan.warmup : Math.max(10, Math.floor(iterations / 10));
}

/** Runs the plan against the server at host:port, printing a row (or a JSON line) per size. */
export async function runClient(host: string, port: number, plan: Plan, json: boolean): Promise<Result[]> {
  const { context, worker, control: controlWorker } = open(plan.progress, plan.busyPollUs);
  const results: Result[] = [];
  try {
    const control = await controlWorker.connect(host, port);
    const counts = plan.sizes.map((s) => iterationsFor(plan, s));
    const warmups = counts.map((n) => warmupFor(plan, n));
    const totals = counts.map((n, i) => n + (warmups[i] as number));
    const address = Buffer.from(worker.getAddress()).toString('hex');
    const peerAddress = new Uint8Array(8192);
    const addressInfo = controlWorker.tagRecv(peerAddress, ADDRESS_TAG);
    const wirePlan: WirePlan = { ...plan, counts: totals, address };
    await control.tagSend(Buffer.from(JSON.stringify(wirePlan)), PLAN_TAG);
    const sent = peerAddress.subarray(0, (await addressInfo).length);
    const endpoint = plan.fastLane
      ? await worker.connect(host, Number(Buffer.from(sent).toString()), { errorHandling: 'peer' })
      : worker.connectToAddress(sent, { errorHandling: plan.errorHandling });
    if (plan.fastLane && !endpoint.fastLane) throw new Error('-L: the server offered no fast lane (another host, or a server without it)');
    await endpoint.flush();
    const keyBuffer = new Uint8Array(1024);
    const info = await worker.tagRecv(keyBuffer, KEY_TAG);
    const key = createRemoteKeyFromSerialized(endpoint, keyBuffer.subarray(0, info.length));
    // The local buffer is of the same memory kind as the target, as ucx_perftest allocates both with
    // ucp_mem_map: the copy a put, get or rendezvous makes then runs between the same kinds of pages in
    // both tools.
    const local = createRegion(context, plan);
    const progressBar = !json && process.stderr.isTTY === true ? new ProgressBar(plan.sizes.length) : null;
    if (!json) printHeader(plan, describeTransports(endpoint));
    const wait = waiter(worker, plan);
    for (const [i, size] of plan.sizes.entries()) {
      const data = local.view().subarray(0, size).fill(0x5a);
      const run: ClientRun = { plan, worker, endpoint, key, data, wait };
      const result = await measure(run, counts[i] as number, warmups[i] as number);
      results.push(result);
      progressBar?.tick();
      if (json) console.log(JSON.stringify(result));
      else printRow(result);
    }
    // The server closes its side once it has DONE: flush errors after that are expected, and close()
    // handles them.
    await endpoint.tagSend(new Uint8Array(1), DONE_TAG);
    key.close();
    local.close();
    await endpoint.close();
    await control.close();
  } finally {
    await context.close();
  }
  return results;
}

async function measure(run: ClientRun, iterations: number, warmup: number): Promise<Result> {
  const { plan, worker, endpoint, wait } = run;
  const test = testOf(plan);
  const size = run.data.length;
  const total = iterations + warmup;
  if (test.kind === 'latency') {
    // One operation at a time, each timed.
    const samples = new Float64Array(iterations);
    const { steps, close } = test.client(run);
    for (let k = 0; k < total; k++) {
      const t0 = performance.now();
      for (let s = 0; s < steps.length; s++) {
        const pending = (steps[s] as Step)();
        if (pending !== undefined) await pending;
      }
      if (k >= warmup) samples[k - warmup] = (performance.now() - t0) * 1000;
    }
    close?.();
    // ucx_perftest reports half the round trip for ping-pong tests.
    if (test.halfRoundTrip) for (let k = 0; k < samples.length; k++) samples[k] = (samples[k] as number) * 0.5;
    return summarize(plan, size, { samples });
  }
  // Bandwidth and rate tests: `outstanding` operations in flight, then wait; the whole run is timed.
  const { post } = test.client(run);
  const window = new Window(plan.outstanding);
  const oneSided = test.completion === 'flush';
  const flushEvery = oneSided ? plan.flushEvery : 0;
  let start = 0;
  for (let k = 0; k < total; k++) {
    if (k === warmup) {
      await waitEach(wait, window.drain());
      if (oneSided) await waitEach(wait, [endpoint.flush()]);
      start = performance.now();
    }
    // Requests complete in order per endpoint: waiting for the oldest keeps at most `outstanding` in
    // flight (operations that UCX completed at once do not count, as in ucx_perftest).
    const oldest = window.oldest();
    if (oldest !== null && !oldest.completed) {
      const pending = wait(oldest);
      if (pending !== undefined) await pending;
    }
    window.push(post());
    if (flushEvery > 0 && (k + 1) % flushEvery === 0) {
      const pending = wait(endpoint.flush());
      if (pending !== undefined) await pending;
    }
  }
  await waitEach(wait, window.drain());
  await waitEach(wait, [oneSided ? endpoint.flush() : worker.tagRecv(new Uint8Array(1), ACK_TAG)]);
  const seconds = (performance.now() - start) / 1000;
  return summarize(plan, size, { seconds, iterations });
}
