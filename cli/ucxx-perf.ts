#!/usr/bin/env node
/**
 * ucxx-perf: ucx_perftest for ucxx-ts.
 *
 *   ucxx-perf [options]              server: waits for one client at a time
 *   ucxx-perf HOST [options]         client: runs the test against HOST's server
 *   ucxx-perf --local [options]      starts a server process and runs the client against it
 *
 * Every byte goes through ucxx-ts (and so libucp); the server and the client agree on the test with a
 * tag message. See docs/performance.md for what each test measures.
 */
import { fork } from 'node:child_process';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import {
  Context, createRemoteKeyFromSerialized, type Endpoint, type MemoryHandle, type RemoteKey, type Request, type Worker,
} from 'ucxx-ts';

const TESTS = [
  'put_lat', 'put_bw', 'get_lat', 'get_bw', 'tag_lat', 'tag_bw', 'stream_bw', 'am_lat', 'am_bw', 'atomic_lat',
  'atomic_rate',
] as const;
type Test = (typeof TESTS)[number];
type Mode = 'event' | 'polling' | 'spin';

interface Plan {
  test: Test;
  sizes: number[];
  iterations: number;
  warmup: number;
  outstanding: number;
  /** put_bw/atomic_rate: a flush after every this many operations (0: only at the end, as ucx_perftest). */
  flushEvery: number;
  memory: 'allocated' | 'registered';
  progress: Mode;
  /** Peer failure detection on the measured endpoints (ucx_perftest's -e). */
  errorHandling: boolean;
  /** 'event'/'polling': the worker's busyPollUs (undefined: its default). */
  busyPollUs?: number;
}

interface Result {
  tool: 'ucxx-perf';
  test: Test;
  size: number;
  iterations: number;
  latency_us: { p50: number; p90: number; avg: number; p99: number; p999: number };
  bandwidth_MBps: number;
  message_rate: number;
  memory: string;
  progress: Mode;
  error_handling: boolean;
}

const USAGE = `usage: ucxx-perf [HOST] [options]   (no HOST: server; --local: both)
  -t, --test NAME         ${TESTS.join(' ')}  (default put_lat)
  -s, --size SIZES        a list (8,4K,1M) or a range of powers of two (8:64M); default 8
  -n, --iterations N      measured iterations per size (default: by test and size)
  -w, --warmup N          warm-up iterations (default: n/10, at least 10)
  -m, --memory KIND       allocated (UCX allocates the target region) | registered (default allocated)
  -P, --progress MODE     spin (synchronous busy-poll) | polling | event (default spin)
  -O, --outstanding N     operations in flight before waiting (bandwidth tests, default 16)
  -F, --flush-every N     put_bw, atomic_rate: flush after every N operations (default 0: once, at the end)
  -B, --busy-poll US      'event'/'polling': microseconds of polling after the last activity before
                          the worker sleeps (default 50 for event, 1000 for polling; 0: sleep at once)
  -e, --error-handling    measured endpoints use peer error handling ('peer', ucxx-ts's 'auto' choice
                          between hosts); off here ('none'), as in ucx_perftest, whose -e it mirrors
  -p, --port N            server port (default 13337; 0 with --local picks one)
      --local             run a server in a child process and the client here
      --json              one JSON object per size instead of the table
  -h, --help              this text`;

class UsageError extends Error {}

function parseSize(text: string): number {
  const match = /^(\d+)([kKmMgG]?)[bB]?$/.exec(text.trim());
  if (match === null) throw new UsageError(`bad size: ${JSON.stringify(text)}`);
  const unit = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[(match[2] ?? '').toLowerCase()] ?? 1;
  const size = Number(match[1]) * unit;
  if (!Number.isSafeInteger(size) || size > 1024 ** 3) throw new UsageError(`size out of range: ${text}`);
  return size;
}

function parseSizes(text: string): number[] {
  if (text.includes(':')) {
    const [lo, hi] = text.split(':').map(parseSize) as [number, number];
    if (lo < 1 || hi < lo) throw new UsageError(`bad size range: ${text}`);
    const sizes: number[] = [];
    for (let s = lo; s <= hi; s *= 2) sizes.push(s);
    return sizes;
  }
  return text.split(',').map(parseSize);
}

function positive(text: string | undefined, what: string, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) throw new UsageError(`${what} must be a non-negative integer, got ${text}`);
  return n;
}

function parseCommandLine(argv: string[]): { host?: string; local: boolean; json: boolean; port: number; plan: Plan; iterationsGiven: boolean } {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      test: { type: 'string', short: 't' },
      size: { type: 'string', short: 's' },
      iterations: { type: 'string', short: 'n' },
      warmup: { type: 'string', short: 'w' },
      memory: { type: 'string', short: 'm' },
      progress: { type: 'string', short: 'P' },
      outstanding: { type: 'string', short: 'O' },
      'flush-every': { type: 'string', short: 'F' },
      'error-handling': { type: 'boolean', short: 'e' },
      'busy-poll': { type: 'string', short: 'B' },
      port: { type: 'string', short: 'p' },
      local: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    console.log(USAGE);
    process.exit(0);
  }
  if (positionals.length > 1) throw new UsageError(`one HOST at most, got ${positionals.join(' ')}`);
  const test = (values.test ?? 'put_lat') as Test;
  if (!TESTS.includes(test)) throw new UsageError(`unknown test ${test}; one of ${TESTS.join(' ')}`);
  const memory = values.memory ?? 'allocated';
  if (memory !== 'allocated' && memory !== 'registered') throw new UsageError(`memory must be allocated or registered`);
  const progress = (values.progress ?? 'spin') as Mode;
  if (!['spin', 'polling', 'event'].includes(progress)) throw new UsageError('progress must be spin, polling or event');
  const sizes = parseSizes(values.size ?? '8');
  const iterations = positive(values.iterations, 'iterations', 0);
  const outstanding = Math.max(1, positive(values.outstanding, 'outstanding', 16));
  const port = positive(values.port, 'port', values.local === true ? 0 : 13337);
  if (port > 65535) throw new UsageError('port must be <= 65535');
  const warmup = positive(values.warmup, 'warmup', -1);
  const busyPoll = values['busy-poll'] === undefined ? undefined : positive(values['busy-poll'], 'busy-poll', 0);
  if (busyPoll !== undefined && progress === 'spin') throw new UsageError('--busy-poll applies to --progress event or polling');
  const host = positionals[0];
  if (host !== undefined && values.local === true) throw new UsageError('--local runs its own server: no HOST');
  return {
    ...(host === undefined ? {} : { host }),
    local: values.local === true,
    json: values.json === true,
    port,
    iterationsGiven: iterations > 0,
    plan: {
      test, sizes, iterations, warmup, outstanding, memory, progress, errorHandling: values['error-handling'] === true,
      flushEvery: positive(values['flush-every'], 'flush-every', 0),
      ...(busyPoll === undefined ? {} : { busyPollUs: busyPoll }),
    },
  };
}

/** Default iterations: enough for a stable figure, bounded by bytes moved. */
function iterationsFor(plan: Plan, size: number): number {
  if (plan.iterations > 0) return plan.iterations;
  const latency = plan.test.endsWith('_lat');
  const cap = latency ? 20_000 : 100_000;
  const byBytes = Math.floor((latency ? 256 : 2048) * 1024 * 1024 / Math.max(size, 1));
  return Math.max(latency ? 50 : 20, Math.min(cap, byBytes));
}

function warmupFor(plan: Plan, iterations: number): number {
  return plan.warmup >= 0 ? plan.warmup : Math.max(10, Math.floor(iterations / 10));
}

// ---- shared set-up ----------------------------------------------------------------------------------

const PLAN_TAG = 0x5045524600000001n; // client -> server: the plan (JSON)
const KEY_TAG = 0x5045524600000002n; // server -> client: serialized key
const ACK_TAG = 0x5045524600000003n; // server -> client: a bandwidth phase is received
const PING_TAG = 0x5045524600000004n;
const PONG_TAG = 0x5045524600000005n;
const AM_PING = 101;
const AM_PONG = 102;
const DONE_TAG = 0x5045524600000006n;
/**
 * The tests in which ucx_perftest's server sleeps (its counterpart is `ucp_get`, whose server process shows
 * no CPU time in a profile): on UCX-allocated memory ucxx-perf's sleeps too. In every other test, the
 * one-sided puts and atomics included, ucx_perftest's server polls its worker, and so does ucxx-perf's.
 */
const SERVER_SLEEPS: ReadonlySet<string> = new Set(['get_lat', 'get_bw']);
const ADDRESS_TAG = 0x5045524600000007n; // server -> client: its worker address

/**
 * Each side has two workers: `worker` carries the measurement, `control` the connection manager's
 * endpoint (listener and connect) used to agree on the plan and exchange worker addresses, as
 * ucx_perftest does over a plain socket. Keeping them apart matters: an endpoint made through the
 * connection manager also opens TCP lanes, and a worker with TCP lanes polls their sockets on every
 * progress call (an epoll_wait each, about 1.5 us on these machines), which added ~8 us to every
 * message of the measured endpoint when both shared one worker.
 *
 * 'spin' creates its context without the wakeup feature and progresses by hand: with wakeup, UCX's
 * shared-memory transport signals an armed peer through a socket on every message, which costs
 * microseconds that a busy-polling peer does not need.
 */
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
 * only what it returns: an `await` per operation costs a trip through the microtask queue.
 */
function waiter(worker: Worker, mode: Mode): (request: Request<unknown>) => Promise<unknown> | undefined {
  if (mode === 'spin') {
    return (request) => {
      if (!request.completed) worker.progressUntil(request);
      if (request.error !== undefined) throw request.error;
      return undefined;
    };
  }
  // A Request's native Promise: one microtask hop once it settles, where awaiting the Request (a
  // thenable) takes three.
  return (request) => (request.completed && request.error === undefined ? undefined : request.promise);
}

function regionSize(plan: Plan): number {
  return Math.max(4096, ...plan.sizes) ;
}

/** The last `size` requests posted, in a fixed ring (no allocation per operation). */
class Window {
  readonly #ring: (Request<unknown> | null)[];
  #next = 0;
  #count = 0;
  constructor(size: number) {
    this.#ring = new Array<Request<unknown> | null>(size).fill(null);
  }

  push(request: Request<unknown>): void {
    this.#ring[this.#next] = request;
    this.#next = (this.#next + 1) % this.#ring.length;
    if (this.#count < this.#ring.length) this.#count++;
  }

  full(): boolean {
    return this.#count === this.#ring.length;
  }

  /** When full: the request the next push replaces (the oldest); otherwise null. */
  oldest(): Request<unknown> | null {
    return this.full() ? this.#ring[this.#next] ?? null : null;
  }

  /** Empties the window, returning its requests oldest first. */
  drain(): Request<unknown>[] {
    const out: Request<unknown>[] = [];
    const start = (this.#next - this.#count + this.#ring.length) % this.#ring.length;
    for (let i = 0; i < this.#count; i++) out.push(this.#ring[(start + i) % this.#ring.length] as Request<unknown>);
    this.#ring.fill(null);
    this.#next = 0;
    this.#count = 0;
    return out;
  }
}

// ---- server -----------------------------------------------------------------------------------------

async function serve(port: number, mode: Mode, busyPollUs?: number, onListening?: (port: number) => void): Promise<void> {
  const { context, worker, control } = open(mode, busyPollUs);
  const listener = control.listen({ port });
  onListening?.(listener.port);
  if (onListening === undefined) console.error(`ucxx-perf: server listening on port ${listener.port}`);
  for await (const endpoint of listener) {
    try {
      await serveOne(context, worker, control, endpoint);
    } catch (err) {
      console.error(`ucxx-perf server: ${String(err)}`);
    }
    await endpoint.close();
    if (onListening !== undefined) break; // --local: one client
  }
  await context.close();
}

async function serveOne(context: Context, worker: Worker, controlWorker: Worker, control: Endpoint): Promise<void> {
  const planBuffer = new Uint8Array(8192);
  const planInfo = await controlWorker.tagRecv(planBuffer, PLAN_TAG);
  const plan = JSON.parse(Buffer.from(planBuffer.subarray(0, planInfo.length)).toString()) as
    Plan & { counts: number[]; address: string };
  // Measurements run on endpoints created from worker addresses, as ucx_perftest's: UCX pairs the two
  // endpoints the sides create to each other (see open() for why not the control endpoint).
  await control.tagSend(Buffer.from(worker.getAddress()), ADDRESS_TAG);
  const endpoint = worker.connectToAddress(Buffer.from(plan.address, 'hex'), { errorHandling: plan.errorHandling });
  await endpoint.flush();
  const size = regionSize(plan);
  const region: MemoryHandle = plan.memory === 'registered'
    ? context.createMemoryHandle(size, new Uint8Array(size))
    : context.createMemoryHandle(size);
  await endpoint.tagSend(region.createRemoteKey().serialize(), KEY_TAG);
  const wait = waiter(worker, plan.progress);
  // One receive buffer for every payload, as ucx_perftest does (no allocation per message).
  const amBuffer = new Uint8Array(Math.max(1, ...plan.sizes));
  // Rendezvous payloads being fetched, and what to do once they are: checked by the loop below (in
  // 'spin' mode no Promise continuation runs while the loop spins).
  const fetching: { request: Request<Uint8Array>; then: (data: Uint8Array) => void }[] = [];
  if (plan.test === 'am_lat') {
    // Echo the payload: eager messages at once, rendezvous ones once fetched.
    worker.setAmHandler(AM_PING, (message) => {
      const reply = message.replyEndpoint;
      if (reply === null) return;
      if (message.rendezvous) {
        fetching.push({ request: message.receive(amBuffer), then: (data) => void reply.amSend(AM_PONG, null, data) });
      } else void reply.amSend(AM_PONG, null, message.data ?? new Uint8Array(0));
    });
  }
  let amReceived = 0;
  const amFetches: Request<Uint8Array>[] = [];
  if (plan.test === 'am_bw') {
    worker.setAmHandler(AM_PING, (message) => {
      // Rendezvous payloads count once fetched (checked in the loop: no Promise continuation runs
      // while 'spin' spins).
      if (message.rendezvous) amFetches.push(message.receive(amBuffer));
      else amReceived++;
    });
  }
  // Messages land in the region (as ucx_perftest receives into its UCX-allocated buffer): the memory kind
  // applies to both sides' buffers, and no RMA targets the region during a messaging test.
  const regionView = region.view();
  for (const [i, s] of plan.sizes.entries()) {
    const total = plan.counts[i] as number;
    const buffer = regionView.subarray(0, Math.max(s, 1));
    switch (plan.test) {
      case 'tag_lat':
        for (let k = 0; k < total; k++) {
          { const pending = wait(worker.tagRecv(buffer.subarray(0, s), PING_TAG)); if (pending !== undefined) await pending; }
          { const pending = wait(endpoint.tagSend(buffer.subarray(0, s), PONG_TAG)); if (pending !== undefined) await pending; }
        }
        break;
      case 'tag_bw': {
        // A ring of `outstanding` receives: slot k % outstanding is waited for before it is reused.
        const ring = new Window(plan.outstanding);
        const target = buffer.subarray(0, s);
        for (let k = 0; k < total; k++) {
          const oldest = ring.oldest();
          if (oldest !== null) { const pending = wait(oldest); if (pending !== undefined) await pending; }
          ring.push(worker.tagRecv(target, PING_TAG));
        }
        for (const r of ring.drain()) { const pending = wait(r); if (pending !== undefined) await pending; }
        { const pending = wait(endpoint.tagSend(new Uint8Array(1), ACK_TAG)); if (pending !== undefined) await pending; }
        break;
      }
      case 'stream_bw':
        for (let k = 0; k < total; k++) { const pending = wait(endpoint.streamRecv(buffer.subarray(0, s), { waitAll: true })); if (pending !== undefined) await pending; }
        { const pending = wait(endpoint.tagSend(new Uint8Array(1), ACK_TAG)); if (pending !== undefined) await pending; }
        break;
      case 'am_bw':
        while (amReceived < total) {
          if (plan.progress === 'spin') worker.progress();
          else await new Promise((resolve) => setImmediate(resolve));
          while (amFetches.length > 0 && (amFetches[0] as Request<Uint8Array>).completed) {
            amFetches.shift();
            amReceived++;
          }
        }
        amReceived = 0;
        { const pending = wait(endpoint.tagSend(new Uint8Array(1), ACK_TAG)); if (pending !== undefined) await pending; }
        break;
      default:
        break; // RMA, atomics and am_lat need nothing from the server's code: UCX (and the handler) do it
    }
  }
  if (plan.memory === 'allocated' && SERVER_SLEEPS.has(plan.test)) {
    // A get from UCX-allocated (shared) memory is one-sided: the client's loads need nothing from this
    // process. Look for the client's DONE once a millisecond and sleep in between, as ucx_perftest's server
    // does in `ucp_get`: a busy-polling server would take the second core (on a 2-vCPU VM, maybe the client
    // core's sibling) and make the comparison unfair.
    const doneBuffer = new Uint8Array(1);
    for (;;) {
      const receive = worker.tagProbe(DONE_TAG, undefined, { remove: true })?.receive;
      if (receive) {
        const received = receive(doneBuffer);
        if (!received.completed) worker.progressUntil(received);
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    region.close();
    await endpoint.close();
    return;
  }
  // RMA into registered memory (emulated with active messages), tag/stream/AM tests and am_lat are served
  // by this worker's progress: keep progressing (spinning in 'spin' mode) until the client says it is done.
  const done = worker.tagRecv(new Uint8Array(1), DONE_TAG);
  while (!done.completed) {
    if (plan.progress === 'spin') worker.progress();
    else await new Promise((resolve) => setImmediate(resolve));
    while (fetching.length > 0 && (fetching[0] as { request: Request<Uint8Array> }).request.completed) {
      const next = fetching.shift() as { request: Request<Uint8Array>; then: (data: Uint8Array) => void };
      const data = await next.request.promise;
      next.then(data);
    }
  }
  worker.setAmHandler(AM_PING, null);
  region.close();
  await endpoint.close();
}

// ---- client -----------------------------------------------------------------------------------------

async function runClient(host: string, port: number, plan: Plan, json: boolean): Promise<Result[]> {
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
    await control.tagSend(Buffer.from(JSON.stringify({ ...plan, counts: totals, address })), PLAN_TAG);
    const endpoint = worker.connectToAddress(peerAddress.subarray(0, (await addressInfo).length), {
      errorHandling: plan.errorHandling,
    });
    await endpoint.flush();
    const keyBuffer = new Uint8Array(1024);
    const info = await worker.tagRecv(keyBuffer, KEY_TAG);
    const key = createRemoteKeyFromSerialized(endpoint, keyBuffer.subarray(0, info.length));
    // The local buffer is of the same memory kind as the target, as ucx_perftest allocates both with
    // ucp_mem_map: the copy a put, get or rendezvous makes then runs between the same kinds of pages in
    // both tools.
    const localSize = regionSize(plan);
    const local: MemoryHandle = plan.memory === 'registered'
      ? context.createMemoryHandle(localSize, new Uint8Array(localSize))
      : context.createMemoryHandle(localSize);
    const progressBar = !json && process.stderr.isTTY === true ? new ProgressBar(plan.sizes.length) : null;
    if (!json) printHeader(plan);
    for (const [i, size] of plan.sizes.entries()) {
      const result = await measure(plan, worker, endpoint, key, local.view(), size, counts[i] as number, warmups[i] as number);
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

async function measure(
  plan: Plan, worker: Worker, endpoint: Endpoint, key: RemoteKey, local: Uint8Array, size: number, iterations: number,
  warmup: number,
): Promise<Result> {
  const wait = waiter(worker, plan.progress);
  const data = local.subarray(0, size).fill(0x5a);
  const samples = new Float64Array(iterations);
  const test = plan.test;
  const total = iterations + warmup;
  let start = 0;
  const latencyTest = test.endsWith('_lat');
  // Latency tests: one operation at a time, timed one by one.
  if (latencyTest) {
    // am_lat: the pong handler runs inside progress; it counts, and fetches rendezvous payloads (a
    // rendezvous send completes only once its receiver fetched it).
    let pongs = 0;
    let pongData: Request<Uint8Array> | null = null;
    const pongBuffer = new Uint8Array(Math.max(1, size));
    let onPong: (() => void) | null = null;
    if (test === 'am_lat') {
      worker.setAmHandler(AM_PONG, (message) => {
        pongData = message.rendezvous ? message.receive(pongBuffer) : null;
        pongs++;
        onPong?.();
      });
    }
    for (let k = 0; k < total; k++) {
      const t0 = performance.now();
      switch (test) {
        case 'put_lat':
          { const pending = wait(endpoint.memPut(data, key, 0)); if (pending !== undefined) await pending; }
          { const pending = wait(endpoint.flush()); if (pending !== undefined) await pending; }
          break;
        case 'get_lat':
          { const pending = wait(endpoint.memGet(data, key, 0)); if (pending !== undefined) await pending; }
          break;
        case 'tag_lat': {
          const pong = worker.tagRecv(data, PONG_TAG);
          { const pending = wait(endpoint.tagSend(data, PING_TAG)); if (pending !== undefined) await pending; }
          { const pending = wait(pong); if (pending !== undefined) await pending; }
          break;
        }
        case 'am_lat': {
          const target = pongs + 1;
          const sent = endpoint.amSend(AM_PING, null, data, { reply: true });
          if (plan.progress === 'spin') {
            while (pongs < target) worker.progress();
            if (pongData !== null) { const pending = wait(pongData); if (pending !== undefined) await pending; }
            { const pending = wait(sent); if (pending !== undefined) await pending; }
          } else {
            if (pongs < target) await new Promise<void>((resolve) => { onPong = resolve; });
            onPong = null;
            if (pongData !== null) await (pongData as Request<Uint8Array>).promise;
            { const pending = wait(sent); if (pending !== undefined) await pending; }
          }
          break;
        }
        case 'atomic_lat':
          { const pending = wait(endpoint.fetchAdd(key, 0, 1n)); if (pending !== undefined) await pending; }
          break;
        default:
          break;
      }
      if (k >= warmup) samples[k - warmup] = (performance.now() - t0) * 1000;
    }
    if (test === 'am_lat') worker.setAmHandler(AM_PONG, null);
    // ucx_perftest reports half the round trip for ping-pong tests.
    const half = test === 'tag_lat' || test === 'am_lat' ? 0.5 : 1;
    for (let k = 0; k < samples.length; k++) samples[k] = (samples[k] as number) * half;
    return summarize(plan, size, samples, null);
  }
  // Bandwidth and rate tests: `outstanding` operations in flight, then wait; the whole run is timed.
  const window = new Window(plan.outstanding);
  const ackBuffer = new Uint8Array(1);
  const flushEvery = test === 'put_bw' || test === 'atomic_rate' ? plan.flushEvery : 0;
  for (let k = 0; k < total; k++) {
    if (k === warmup) {
      for (const r of window.drain()) { const pending = wait(r); if (pending !== undefined) await pending; }
      if (test === 'put_bw' || test === 'get_bw' || test === 'atomic_rate') { const pending = wait(endpoint.flush()); if (pending !== undefined) await pending; }
      start = performance.now();
    }
    // Requests complete in order per endpoint: waiting for the oldest keeps at most `outstanding` in
    // flight (operations that UCX completed at once do not count, as in ucx_perftest).
    const oldest = window.oldest();
    if (oldest !== null && !oldest.completed) { const pending = wait(oldest); if (pending !== undefined) await pending; }
    switch (test) {
      case 'put_bw':
        window.push(endpoint.memPut(data, key, 0));
        break;
      case 'get_bw':
        window.push(endpoint.memGet(data, key, 0));
        break;
      case 'tag_bw':
        window.push(endpoint.tagSend(data, PING_TAG));
        break;
      case 'stream_bw':
        window.push(endpoint.streamSend(data));
        break;
      case 'am_bw':
        window.push(endpoint.amSend(AM_PING, null, data));
        break;
      case 'atomic_rate':
        window.push(endpoint.atomic('add', key, 0, 1n));
        break;
      default:
        break;
    }
    if (flushEvery > 0 && (k + 1) % flushEvery === 0) { const pending = wait(endpoint.flush()); if (pending !== undefined) await pending; }
  }
  for (const r of window.drain()) { const pending = wait(r); if (pending !== undefined) await pending; }
  if (test === 'put_bw' || test === 'get_bw' || test === 'atomic_rate') { const pending = wait(endpoint.flush()); if (pending !== undefined) await pending; }
  if (test === 'tag_bw' || test === 'stream_bw' || test === 'am_bw') { const pending = wait(worker.tagRecv(ackBuffer, ACK_TAG)); if (pending !== undefined) await pending; }
  const seconds = (performance.now() - start) / 1000;
  return summarize(plan, size, null, { seconds, iterations });
}

function summarize(plan: Plan, size: number, samples: Float64Array | null, run: { seconds: number; iterations: number } | null): Result {
  let avg: number;
  let iterations: number;
  let at: (q: number) => number;
  if (samples !== null) {
    const sorted = Float64Array.from(samples).sort();
    iterations = sorted.length;
    at = (q) => sorted[Math.min(iterations - 1, Math.floor(iterations * q))] as number;
    avg = sorted.reduce((a, b) => a + b, 0) / iterations;
  } else {
    // A bandwidth or rate run has no per-operation times: every figure is the mean.
    const r = run as { seconds: number; iterations: number };
    iterations = r.iterations;
    avg = (r.seconds * 1e6) / iterations;
    at = () => avg;
  }
  const perOpSeconds = avg / 1e6;
  return {
    tool: 'ucxx-perf',
    test: plan.test,
    size,
    iterations,
    latency_us: { p50: round(at(0.5)), p90: round(at(0.9)), avg: round(avg), p99: round(at(0.99)), p999: round(at(0.999)) },
    bandwidth_MBps: round(size / perOpSeconds / 1e6),
    message_rate: Math.round(1 / perOpSeconds),
    memory: plan.memory,
    progress: plan.progress,
    error_handling: plan.errorHandling,
  };
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

// ---- output -----------------------------------------------------------------------------------------

const COLUMNS = [
  'size', 'iterations', '50.0%ile (us)', '90.0%ile (us)', 'average (us)', '99.0%ile (us)', '99.9%ile (us)', 'bandwidth (MB/s)',
  'msg rate (1/s)',
];

function printHeader(plan: Plan): void {
  console.log(`ucxx-perf ${plan.test}: memory ${plan.memory}, progress ${plan.progress}, outstanding ${plan.outstanding}, `
    + (plan.flushEvery > 0 ? `flush every ${plan.flushEvery}, ` : '')
    + `error handling ${plan.errorHandling ? 'on' : 'off'}`);
  console.log(COLUMNS.map((c) => c.padStart(16)).join(' '));
}

function printRow(r: Result): void {
  const cells = [
    String(r.size), String(r.iterations), r.latency_us.p50.toFixed(3), r.latency_us.p90.toFixed(3), r.latency_us.avg.toFixed(3),
    r.latency_us.p99.toFixed(3), r.latency_us.p999.toFixed(3), r.bandwidth_MBps.toFixed(2), String(r.message_rate),
  ];
  console.log(cells.map((c) => c.padStart(16)).join(' '));
}

class ProgressBar {
  #done = 0;
  readonly #total: number;
  readonly #started = performance.now();
  constructor(total: number) {
    this.#total = total;
  }
  tick(): void {
    this.#done++;
    if (performance.now() - this.#started < 1000 && this.#done < this.#total) return;
    const width = 30;
    const filled = Math.round((this.#done / this.#total) * width);
    process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${this.#done}/${this.#total}`);
    if (this.#done === this.#total) process.stderr.write('\n');
  }
}

// ---- main -------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  if (process.argv[2] === '--serve-child') {
    const port = Number(process.argv[3]);
    const busyPoll = process.argv[5] === undefined || process.argv[5] === '' ? undefined : Number(process.argv[5]);
    await serve(port, (process.argv[4] ?? 'spin') as Mode, busyPoll, (bound) => process.send?.({ port: bound }));
    process.exit(0);
  }
  let options;
  try {
    options = parseCommandLine(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true) {
      console.error(`ucxx-perf: ${(err as Error).message}\n${USAGE}`);
      process.exit(2);
    }
    throw err;
  }
  if (options.local) {
    const child = fork(fileURLToPath(import.meta.url), ['--serve-child', String(options.port), options.plan.progress, String(options.plan.busyPollUs ?? '')], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const killer = setTimeout(() => child.kill('SIGKILL'), 10 * 60 * 1000);
    killer.unref();
    try {
      const port = await new Promise<number>((resolve, reject) => {
        child.once('message', (m: { port: number }) => resolve(m.port));
        child.once('exit', (code) => reject(new Error(`the server exited early (status ${code})`)));
      });
      await runClient('127.0.0.1', port, options.plan, options.json);
      await new Promise<void>((resolve) => {
        if (child.exitCode !== null) resolve();
        else child.once('exit', () => resolve());
        setTimeout(() => {
          child.kill('SIGKILL');
          resolve();
        }, 10_000).unref();
      });
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    return;
  }
  if (options.host === undefined) {
    await serve(options.port, options.plan.progress, options.plan.busyPollUs);
    return;
  }
  await runClient(options.host, options.port, options.plan, options.json);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`ucxx-perf: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    process.exit(1);
  },
);
