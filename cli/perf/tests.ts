/**
 * The tests of ucxx-perf, each defined once: what it measures, its ucx_perftest and Node `net`
 * counterparts (which `npm run bench` runs beside it), and its client and server sides. The CLI's
 * `-t` list and the bench's table come from here; docs/performance.md is checked against it.
 */
import type { Endpoint, RemoteKey, Request, Worker } from 'ucxx-ts';
import type { Kind, Plan } from './plan.js';
import { Window } from './window.js';

/** What a step left to wait for: nothing (it is done), or a Promise to await. */
export type Pending = PromiseLike<unknown> | undefined;

/**
 * Waits for a request: in the 'tuned' style the fastest way the mode allows ('spin': progress until it
 * completes, nothing to await; otherwise its Promise, or nothing when it is already complete); in the
 * 'await' style the request itself, awaited whatever its state.
 */
export type Wait = (request: Request<unknown>) => Pending;

/** One step of a latency iteration; the iteration waits for what a step returns before the next. */
export type Step = () => Pending;

/** What a client side works with, for one message size. */
export interface ClientRun {
  readonly plan: Plan;
  readonly worker: Worker;
  readonly endpoint: Endpoint;
  /** The server's region. */
  readonly key: RemoteKey;
  /** The message: `size` bytes of the client's local buffer. */
  readonly data: Uint8Array;
  readonly wait: Wait;
}

/** What a server side works with, for the whole plan. */
export interface ServerRun {
  readonly plan: Plan;
  readonly worker: Worker;
  readonly endpoint: Endpoint;
  /** Where messages land: the server's region (of the plan's memory kind), as large as the largest size. */
  readonly region: Uint8Array;
  /** A receive buffer outside the region, as large as the largest size (active-message payloads). */
  readonly scratch: Uint8Array;
  readonly wait: Wait;
  /** One turn of progress: 'spin' progresses the worker once; the other modes yield to the event loop. */
  readonly yieldOnce: () => Pending;
}

/** A latency test's client: the steps of one timed iteration. */
export interface LatencyClient {
  readonly steps: readonly Step[];
  /** After the last iteration (handlers to remove). */
  close?(): void;
}

/** A bandwidth or rate test's client: posts one operation; the loop keeps `-O` of them in flight. */
export interface StreamingClient {
  post(): Request<unknown>;
}

/** A server's part in a test; every member is optional (one-sided tests need nothing from the server). */
export interface ServerSession {
  /** Receives one size's `total` messages; for 'ack' tests the server acknowledges once this is done. */
  receive?(buffer: Uint8Array, total: number): Promise<void> | void;
  /** Called on every turn of the server's wait for the client's DONE (finishing deferred work). */
  poll?(): Promise<void> | void;
  close?(): void;
}

interface TestBase {
  /** The `-t` name. */
  readonly name: string;
  /** One line for `--help`. */
  readonly summary: string;
  /**
   * The ucx_perftest test the bench runs beside it, and its `-O`: 1, or the same as ucxx-perf's
   * (`'same'`).
   */
  readonly ucxPerftest: { readonly test: string; readonly outstanding: 1 | 'same' };
  /** The bench's Node `net` counterpart: a ping-pong ('lat'), a one-way stream ('bw'), or none with why. */
  readonly net: { readonly mode: 'lat' | 'bw' } | { readonly mode: null; readonly why: string };
  /** Where the definitions of ucxx-perf and ucx_perftest differ (the bench prints it with the figures). */
  readonly note?: string;
  /** The only sizes the bench runs the test at (atomics: 8, the size their operation has). */
  readonly sizes?: readonly number[];
  /**
   * The server sleeps (looks for DONE once a millisecond) instead of polling while the client runs,
   * when the memory is UCX-allocated: ucx_perftest's server does in this test's counterpart.
   */
  readonly serverSleeps?: boolean;
  readonly server?: (run: ServerRun) => ServerSession;
}

export interface LatencyTest extends TestBase {
  readonly kind: 'latency';
  /** A ping-pong: the reported latency is half the round trip, as ucx_perftest's. */
  readonly halfRoundTrip: boolean;
  readonly client: (run: ClientRun) => LatencyClient;
}

export interface StreamingTest extends TestBase {
  readonly kind: Exclude<Kind, 'latency'>;
  /**
   * How the client knows everything arrived: a flush (one-sided operations, which also honour `-F`),
   * or the server's acknowledgement once its `receive` is done.
   */
  readonly completion: 'flush' | 'ack';
  readonly client: (run: ClientRun) => StreamingClient;
}

export type PerfTest = LatencyTest | StreamingTest;

export const PING_TAG = 0x5045524600000004n;
export const PONG_TAG = 0x5045524600000005n;
const AM_PING = 101;
const AM_PONG = 102;

const ONE_SIDED_NO_NET = { mode: null, why: 'no net equivalent (one-sided get)' } as const;

/** The client of the stream bandwidth tests: `-O` streamSends in flight. */
function streamSendClient({ endpoint, data }: ClientRun): StreamingClient {
  return { post: () => endpoint.streamSend(data) };
}

/** Receives `total` messages with `receive`, keeping `outstanding` posted (the oldest waited before reuse). */
async function receiveRing(wait: Wait, outstanding: number, total: number, receive: () => Request<unknown>): Promise<void> {
  const ring = new Window(outstanding);
  for (let k = 0; k < total; k++) {
    const oldest = ring.oldest();
    if (oldest !== null) {
      const pending = wait(oldest);
      if (pending !== undefined) await pending;
    }
    ring.push(receive());
  }
  for (const request of ring.drain()) {
    const pending = wait(request);
    if (pending !== undefined) await pending;
  }
}

const tests: readonly PerfTest[] = [
  {
    name: 'put_lat',
    summary: 'memPut + flush, one at a time (until the data is at the target)',
    kind: 'latency',
    halfRoundTrip: false,
    ucxPerftest: { test: 'ucp_put_lat', outstanding: 1 },
    net: { mode: null, why: 'no net equivalent (one-sided put + flush)' },
    note: 'ucxx-ts times put + flush (a full round trip to the target); ucp_put_lat is half a put ping-pong',
    client: ({ endpoint, key, data, wait }) => ({
      steps: [() => wait(endpoint.memPut(data, key, 0)), () => wait(endpoint.flush())],
    }),
  },
  {
    name: 'put_bw',
    summary: 'memPut with -O in flight, one flush at the end (-F: also every N)',
    kind: 'bandwidth',
    completion: 'flush',
    ucxPerftest: { test: 'ucp_put_bw', outstanding: 'same' },
    net: { mode: 'bw' },
    client: ({ endpoint, key, data }) => ({ post: () => endpoint.memPut(data, key, 0) }),
  },
  {
    name: 'get_lat',
    summary: 'memGet, one at a time',
    kind: 'latency',
    halfRoundTrip: false,
    ucxPerftest: { test: 'ucp_get', outstanding: 1 },
    net: ONE_SIDED_NO_NET,
    serverSleeps: true,
    client: ({ endpoint, key, data, wait }) => ({ steps: [() => wait(endpoint.memGet(data, key, 0))] }),
  },
  {
    name: 'get_bw',
    summary: 'memGet with -O in flight, one flush at the end',
    kind: 'bandwidth',
    completion: 'flush',
    ucxPerftest: { test: 'ucp_get', outstanding: 'same' },
    net: ONE_SIDED_NO_NET,
    serverSleeps: true,
    client: ({ endpoint, key, data }) => ({ post: () => endpoint.memGet(data, key, 0) }),
  },
  {
    name: 'tag_lat',
    summary: 'tag ping-pong, half the round trip',
    kind: 'latency',
    halfRoundTrip: true,
    ucxPerftest: { test: 'tag_lat', outstanding: 1 },
    net: { mode: 'lat' },
    client: ({ worker, endpoint, data, wait }) => {
      let pong: Request<unknown> | null = null;
      return {
        steps: [
          () => {
            pong = worker.tagRecv(data, PONG_TAG);
            return wait(endpoint.tagSend(data, PING_TAG));
          },
          () => wait(pong as Request<unknown>),
        ],
      };
    },
    server: ({ worker, endpoint, wait }) => ({
      async receive(buffer, total) {
        for (let k = 0; k < total; k++) {
          const ping = wait(worker.tagRecv(buffer, PING_TAG));
          if (ping !== undefined) await ping;
          const pong = wait(endpoint.tagSend(buffer, PONG_TAG));
          if (pong !== undefined) await pong;
        }
      },
    }),
  },
  {
    name: 'tag_bw',
    summary: 'tagSend with -O in flight; the server keeps -O receives posted',
    kind: 'bandwidth',
    completion: 'ack',
    ucxPerftest: { test: 'tag_bw', outstanding: 'same' },
    net: { mode: 'bw' },
    client: ({ endpoint, data }) => ({ post: () => endpoint.tagSend(data, PING_TAG) }),
    server: ({ plan, worker, wait }) => ({
      receive: (buffer, total) => receiveRing(wait, plan.outstanding, total, () => worker.tagRecv(buffer, PING_TAG)),
    }),
  },
  {
    name: 'stream_bw',
    summary: 'streamSend with -O in flight; the server receives each message whole (waitAll)',
    kind: 'bandwidth',
    completion: 'ack',
    ucxPerftest: { test: 'stream_bw', outstanding: 'same' },
    net: { mode: 'bw' },
    client: streamSendClient,
    server: ({ endpoint, wait }) => ({
      async receive(buffer, total) {
        for (let k = 0; k < total; k++) {
          const pending = wait(endpoint.streamRecv(buffer, { waitAll: true }));
          if (pending !== undefined) await pending;
        }
      },
    }),
  },
  {
    name: 'stream_poll_bw',
    summary: 'stream_bw, the server taking what arrived without a receive (streamReadyEndpoints, streamRecvAvailable)',
    kind: 'bandwidth',
    completion: 'ack',
    ucxPerftest: { test: 'stream_bw', outstanding: 'same' },
    net: { mode: 'bw' },
    sizes: [8, 64 * 1024, 1024 * 1024],
    client: streamSendClient,
    server: ({ worker, endpoint, yieldOnce }) => ({
      async receive(buffer, total) {
        const expected = total * buffer.byteLength;
        let received = 0;
        while (received < expected) {
          for (const ready of worker.streamReadyEndpoints()) {
            if (ready !== endpoint) continue;
            let n: number;
            while ((n = ready.streamRecvAvailable(buffer.subarray(0, Math.min(buffer.byteLength, expected - received)))) > 0) {
              received += n;
              if (received === expected) break;
            }
          }
          if (received < expected) {
            const pending = yieldOnce();
            if (pending !== undefined) await pending;
          }
        }
      },
    }),
  },
  {
    name: 'am_lat',
    summary: 'active-message ping-pong (the server\'s handler answers), half the round trip',
    kind: 'latency',
    halfRoundTrip: true,
    ucxPerftest: { test: 'ucp_am_lat', outstanding: 1 },
    net: { mode: 'lat' },
    client: ({ plan, worker, endpoint, data, wait }) => {
      // The pong handler runs inside progress; it counts, and fetches rendezvous payloads (a
      // rendezvous send completes only once its receiver fetched it).
      let pongs = 0;
      let target = 0;
      let pongData: Request<unknown> | null = null;
      let sent: Request<unknown> | null = null;
      let onPong: (() => void) | null = null;
      const pongBuffer = new Uint8Array(Math.max(1, data.length));
      worker.setAmHandler(AM_PONG, (message) => {
        pongData = message.rendezvous ? message.receive(pongBuffer) : null;
        pongs++;
        onPong?.();
      });
      const spin = plan.progress === 'spin';
      return {
        steps: [
          () => {
            target = pongs + 1;
            sent = endpoint.amSend(AM_PING, null, data, { reply: true });
            if (spin) {
              while (pongs < target) worker.progress();
              return undefined;
            }
            return pongs < target ? new Promise<void>((resolve) => { onPong = resolve; }) : undefined;
          },
          () => {
            onPong = null;
            return pongData === null ? undefined : wait(pongData);
          },
          () => wait(sent as Request<unknown>),
        ],
        close: () => worker.setAmHandler(AM_PONG, null),
      };
    },
    server: ({ plan, worker, scratch }) => {
      // Echo the payload: eager messages at once, rendezvous ones once fetched (in 'spin', checked by
      // poll(): no Promise continuation runs while the server spins).
      const fetching: { request: Request<Uint8Array>; reply: Endpoint }[] = [];
      const spin = plan.progress === 'spin';
      worker.setAmHandler(AM_PING, (message) => {
        const reply = message.replyEndpoint;
        if (reply === null) return;
        if (!message.rendezvous) void reply.amSend(AM_PONG, null, message.data ?? new Uint8Array(0));
        else if (spin) fetching.push({ request: message.receive(scratch), reply });
        else void message.receive(scratch).promise.then((data) => reply.amSend(AM_PONG, null, data));
      });
      return {
        async poll() {
          while (fetching.length > 0 && (fetching[0] as { request: Request<Uint8Array> }).request.completed) {
            const next = fetching.shift() as { request: Request<Uint8Array>; reply: Endpoint };
            void next.reply.amSend(AM_PONG, null, await next.request.promise);
          }
        },
        close: () => worker.setAmHandler(AM_PING, null),
      };
    },
  },
  {
    name: 'am_bw',
    summary: 'amSend with -O in flight; the server\'s handler counts (fetching rendezvous data)',
    kind: 'bandwidth',
    completion: 'ack',
    ucxPerftest: { test: 'ucp_am_bw', outstanding: 'same' },
    net: { mode: 'bw' },
    client: ({ endpoint, data }) => ({ post: () => endpoint.amSend(AM_PING, null, data) }),
    server: ({ worker, scratch, yieldOnce }) => {
      let received = 0;
      // Rendezvous payloads count once fetched (checked in the loop: no Promise continuation runs
      // while 'spin' spins).
      const fetches: Request<Uint8Array>[] = [];
      worker.setAmHandler(AM_PING, (message) => {
        if (message.rendezvous) fetches.push(message.receive(scratch));
        else received++;
      });
      return {
        async receive(_buffer, total) {
          while (received < total) {
            const pending = yieldOnce();
            if (pending !== undefined) await pending;
            while (fetches.length > 0 && (fetches[0] as Request<Uint8Array>).completed) {
              fetches.shift();
              received++;
            }
          }
          received = 0;
        },
        close: () => worker.setAmHandler(AM_PING, null),
      };
    },
  },
  {
    name: 'atomic_lat',
    summary: '64-bit fetchAdd, one at a time (8 bytes)',
    kind: 'latency',
    halfRoundTrip: false,
    ucxPerftest: { test: 'ucp_fadd', outstanding: 1 },
    net: { mode: null, why: 'no net equivalent (remote atomic)' },
    sizes: [8],
    client: ({ endpoint, key, wait }) => ({ steps: [() => wait(endpoint.fetchAdd(key, 0, 1n))] }),
  },
  {
    name: 'atomic_rate',
    summary: '64-bit non-fetching add with -O in flight, one flush at the end (-F: also every N)',
    kind: 'rate',
    completion: 'flush',
    ucxPerftest: { test: 'ucp_add', outstanding: 'same' },
    net: { mode: null, why: 'no net equivalent (remote atomic)' },
    sizes: [8],
    client: ({ endpoint, key }) => ({ post: () => endpoint.atomic('add', key, 0, 1n) }),
  },
];

/** Every test, by its `-t` name, in the order `--help` and the bench list them. */
export const PERF_TESTS: ReadonlyMap<string, PerfTest> = new Map(tests.map((t) => [t.name, t]));
