/**
 * Load-and-leak soak: `npm run soak` (long) or `npm run soak -- --short` (under a minute, for CI).
 *
 * Two processes, this driver and a peer it forks (the same script with `peer`), both with event-mode
 * workers. Phases, each with a stated bound that fails the run (exit 1) when exceeded:
 *
 *   mixed        every API between the processes for a duration (long 600 s, short 20 s): tag, stream and
 *                active-message echoes, put/get checked byte-exact, fetch-add and compare-and-swap, endpoint
 *                and worker flushes; sizes vary from 8 B to 256 KiB.
 *   connect      connect / tag message / close cycles (long 10,000, short 500), peer error mode, so the peer
 *                closes its side when the client goes.
 *   memory       create, view, pack a key, close: 1 MiB memory handles (long 2,000, short 200), UCX-allocated
 *                and registered in turn.
 *   endpoints    N endpoints open at once on one listener (long 500, short 100), a message on each, all closed;
 *                rounds (long 5, short 3).
 *   receives     N tag receives in flight on one worker (long 20,000, short 2,000): half matched by messages,
 *                half cancelled; rounds (long 5, short 3).
 *
 * Sampled in both processes: RSS (after glibc's malloc_trim(0): free chunks that the allocator keeps
 * in its arenas are no growth of what the process holds; a leak stays in use and still shows), V8 heap
 * used (after a full GC: run with --expose-gc, as `npm run soak`
 * does), open file descriptors (/proc/self/fd), and ucxx-ts's live object counts (getDiagnostics()).
 * The growth figure of a phase is the least-squares slope over the second half of its samples (after the
 * warm-up), per 1,000 cycles (per minute for 'mixed'). Writes bench/results/soak-<date>.json (or --out FILE).
 *
 * Options: --short, --mixed-seconds S, --scale F (multiplies every cycle count), --out FILE.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import koffi from 'koffi';
import {
  Context, createRemoteKeyFromSerialized, getDiagnostics, type Endpoint, type RemoteKey, type UcxxDiagnostics,
  type Worker,
} from 'ucxx-ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const MiB = 1024 * 1024;

// Active-message ids and tags between driver and peer.
const AM_KEY_REQUEST = 10;
const AM_KEY_REPLY = 11;
const AM_ECHO = 12;
const AM_ECHO_REPLY = 13;
const AM_MIXED_HELLO = 14;
const TAG_ECHO = 1n;
const TAG_ECHO_REPLY = 2n;
const TAG_PING = 7n;
const REGION_BYTES = 4 * MiB;
/** Atomic counters live in the last page of the peer's region. */
const ATOMIC_OFFSET = REGION_BYTES - 4096;

interface Sample {
  /** Seconds since the phase started. */
  t: number;
  /** Cycles done in the phase when sampled (mixed: operations). */
  cycles: number;
  rssMiB: number;
  heapMiB: number;
  fds: number;
  objects: UcxxDiagnostics;
}

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

function openFds(): number {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return -1;
  }
}

/** A full GC, a turn of the loop (finalizers of collected views run), another GC, then the figures. */
/** glibc's malloc_trim: gives the free pages of every malloc arena back to the system. */
const mallocTrim = koffi.load('libc.so.6').func('int malloc_trim(size_t pad)') as (pad: number) => number;

async function sample(t: number, cycles: number): Promise<Sample> {
  gc();
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  mallocTrim(0);
  const memory = process.memoryUsage();
  return {
    t, cycles, rssMiB: memory.rss / MiB, heapMiB: memory.heapUsed / MiB, fds: openFds(), objects: getDiagnostics(),
  };
}

/**
 * The figures once closed contexts are cleaned up: a context waits for its memory handles' last views,
 * whose finalizers run on a turn after the GC that collects them (V8 runs each finalization registry's
 * cleanup as a task of its own), so up to SETTLE_SAMPLES samples are taken until none is left. A context
 * that never cleans up still fails the check.
 */
const SETTLE_SAMPLES = 20;
async function settledSample(cycles: number): Promise<Sample> {
  let s = await sample(0, cycles);
  let samples = 1;
  for (; samples < SETTLE_SAMPLES && (s.objects.contexts > 0 || s.objects.memoryMappings > 0); samples++) s = await sample(0, cycles);
  if (samples > 1) console.log(`soak: cleanup settled after ${samples} samples (pid ${process.pid})`);
  return s;
}

/** Least-squares slope of y over x for the second half of the points (at least 3 of them; 0 with fewer). */
function slope(points: readonly [number, number][]): number {
  const half = points.slice(Math.min(Math.floor(points.length / 2), Math.max(0, points.length - 3)));
  if (half.length < 3) return 0;
  const n = half.length;
  const mx = half.reduce((s, p) => s + p[0], 0) / n;
  const my = half.reduce((s, p) => s + p[1], 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of half) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

function pattern(seed: number, length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    bytes[i] = x >>> 24;
  }
  return bytes;
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  return Buffer.from(a.buffer, a.byteOffset, a.length).equals(Buffer.from(b.buffer, b.byteOffset, b.length));
}

// ---------------------------------------------------------------------------------------------------------
// The peer process
// ---------------------------------------------------------------------------------------------------------

async function peer(): Promise<void> {
  const context = new Context();
  const worker = context.createWorker();
  const region = context.createMemoryHandle(REGION_BYTES);
  region.view().fill(0);
  const key = region.createRemoteKey().serialize();
  worker.setAmHandler(AM_KEY_REQUEST, (message) => {
    void message.replyEndpoint?.amSend(AM_KEY_REPLY, null, key);
  });
  worker.setAmHandler(AM_ECHO, async (message) => {
    const data = await message.receive();
    await message.replyEndpoint?.amSend(AM_ECHO_REPLY, message.header, data);
  });
  // The mixed-phase client: tag and stream echoes on its endpoint.
  worker.setAmHandler(AM_MIXED_HELLO, (message) => {
    const endpoint = message.replyEndpoint;
    if (endpoint === null) return;
    void (async () => {
      const buffer = new Uint8Array(256 * 1024);
      try {
        for (;;) {
          const { length } = await worker.tagRecv(buffer, TAG_ECHO);
          await endpoint.tagSend(buffer.subarray(0, length), TAG_ECHO_REPLY);
        }
      } catch { /* closed */ }
    })();
    void (async () => {
      const buffer = new Uint8Array(256 * 1024);
      try {
        for (;;) {
          const n = await endpoint.streamRecv(buffer);
          await endpoint.streamSend(buffer.slice(0, n));
        }
      } catch { /* closed */ }
    })();
  });
  // Pings of the connect cycles and of the endpoints phase: counted, nothing else.
  let pings = 0;
  void (async () => {
    const buffer = new Uint8Array(64);
    try {
      for (;;) {
        await worker.tagRecv(buffer, TAG_PING);
        pings++;
      }
    } catch { /* closed */ }
  })();
  // Peer error mode: an accepted endpoint fails (and is closed) when its client goes away.
  const listener = worker.listen({ host: '127.0.0.1', port: 0, endpoint: { errorHandling: 'peer' } }, (endpoint) => {
    endpoint.on('error', () => undefined);
  });
  const send = (message: unknown): void => {
    process.send?.(message);
  };
  let phase = 'start';
  let started = performance.now();
  const samples: Sample[] = [];
  process.on('message', (message: { type: string; phase?: string; everyMs?: number }) => {
    if (message.type === 'phase') {
      phase = message.phase ?? phase;
      started = performance.now();
      samples.length = 0;
    } else if (message.type === 'sample') {
      void sample((performance.now() - started) / 1000, pings).then((s) => {
        samples.push(s);
        send({ type: 'sample', phase, sample: s });
      });
    } else if (message.type === 'stop') {
      listener.close();
      void context.close().then(async () => {
        send({ type: 'stopped', sample: await settledSample(pings) });
        process.disconnect();
      });
    }
  });
  send({ type: 'ready', port: listener.port });
}

// ---------------------------------------------------------------------------------------------------------
// The driver
// ---------------------------------------------------------------------------------------------------------

class PeerProcess {
  readonly child: ChildProcess;
  readonly samples: { phase: string; sample: Sample }[] = [];
  #waiters = new Map<string, (message: Record<string, unknown>) => void>();

  constructor() {
    this.child = fork(fileURLToPath(import.meta.url), ['peer'], {
      execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (message: Record<string, unknown>) => {
      if (message['type'] === 'sample') this.samples.push(message as { phase: string; sample: Sample });
      const waiter = this.#waiters.get(message['type'] as string);
      if (waiter !== undefined) {
        this.#waiters.delete(message['type'] as string);
        waiter(message);
      }
    });
  }

  next(type: string): Promise<Record<string, unknown>> {
    return new Promise((resolve) => this.#waiters.set(type, resolve));
  }

  send(message: unknown): void {
    this.child.send(message as never);
  }

  /** One sample from the peer, now. */
  async sample(): Promise<Sample> {
    const reply = this.next('sample');
    this.send({ type: 'sample' });
    return (await reply)['sample'] as Sample;
  }
}

interface PhaseResult {
  phase: string;
  cycles: number;
  seconds: number;
  unit: string;
  samples: Sample[];
  peerSamples: Sample[];
  rssSlope: number;
  peerRssSlope: number;
  heapSlope: number;
  fdsStart: number;
  fdsEnd: number;
  peerFdsStart: number;
  peerFdsEnd: number;
  objectsAfter: UcxxDiagnostics;
  peerObjectsAfter: UcxxDiagnostics;
  bounds: Record<string, string>;
  failures: string[];
}

interface Bounds {
  /** Max RSS growth (MiB per unit) in the driver. */
  rssSlope: number;
  /** Max RSS growth (MiB per unit) in the peer; null where the peer has no part in the phase. */
  peerRssSlope: number | null;
  /** Max V8 heap growth (MiB per unit) in the driver. */
  heapSlope: number;
  /** Max open fds above the phase's start, after the phase. */
  fds: number;
}

/** What a phase's work function reports. */
interface PhaseWork {
  /** Runs until done; awaits tick(cycles) as it goes (a sample is taken there when one is due). */
  run(tick: (cycles: number) => Promise<void>): Promise<void>;
}

async function runPhase(
  peerProcess: PeerProcess, name: string, unit: string, perUnit: number, samplesWanted: number,
  expectedCycles: number | null, durationMs: number | null, bounds: Bounds, work: PhaseWork,
): Promise<PhaseResult> {
  peerProcess.send({ type: 'phase', phase: name });
  const samples: Sample[] = [];
  const peerSamples: Sample[] = [];
  const started = performance.now();
  let cycles = 0;
  // Sample at evenly spaced cycle counts (or times), so the slope has points over the whole phase.
  const every = expectedCycles !== null ? Math.max(1, Math.floor(expectedCycles / samplesWanted)) : 0;
  let nextAt = every;
  const takeSample = async (): Promise<void> => {
    samples.push(await sample((performance.now() - started) / 1000, cycles));
    peerSamples.push(await peerProcess.sample());
  };
  await takeSample();
  let sampling: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  if (durationMs !== null) {
    timer = setInterval(() => {
      sampling = sampling.then(takeSample);
    }, durationMs / samplesWanted);
  }
  await work.run(async (n) => {
    cycles = n;
    if (every > 0 && cycles >= nextAt) {
      nextAt += every;
      await takeSample();
    }
  });
  if (timer !== undefined) clearInterval(timer);
  await sampling;
  // Let closes settle on both sides (the peer notices closed clients through its error handler).
  await new Promise((resolve) => setTimeout(resolve, 1500));
  await takeSample();
  const seconds = (performance.now() - started) / 1000;
  const x = (s: Sample): number => (unit === 'min' ? s.t / 60 : s.cycles / perUnit);
  // The final sample (after the settle) is out of the slope: its x repeats the last one's.
  const fit = samples.slice(0, -1);
  const peerFit = peerSamples.slice(0, -1);
  const result: PhaseResult = {
    phase: name,
    cycles,
    seconds,
    unit,
    samples,
    peerSamples,
    rssSlope: slope(fit.map((s) => [x(s), s.rssMiB])),
    peerRssSlope: slope(peerFit.map((s, i) => [x(fit[i] ?? s), s.rssMiB])),
    heapSlope: slope(fit.map((s) => [x(s), s.heapMiB])),
    fdsStart: samples[0]?.fds ?? 0,
    fdsEnd: samples.at(-1)?.fds ?? 0,
    peerFdsStart: peerSamples[0]?.fds ?? 0,
    peerFdsEnd: peerSamples.at(-1)?.fds ?? 0,
    objectsAfter: (samples.at(-1) as Sample).objects,
    peerObjectsAfter: (peerSamples.at(-1) as Sample).objects,
    bounds: {
      rss: `driver < ${bounds.rssSlope} MiB per ${unit}` +
        (bounds.peerRssSlope === null ? '' : `, peer < ${bounds.peerRssSlope} MiB per ${unit}`),
      heap: `< ${bounds.heapSlope} MiB per ${unit}`,
      fds: `<= start + ${bounds.fds} (both processes)`,
      objects: 'after the phase, no more live objects than before it (getDiagnostics(), both processes)',
    },
    failures: [],
  };
  const fail = (text: string): void => {
    result.failures.push(text);
  };
  if (result.rssSlope > bounds.rssSlope) fail(`driver RSS grows ${result.rssSlope.toFixed(2)} MiB/${unit}`);
  if (bounds.peerRssSlope !== null && result.peerRssSlope > bounds.peerRssSlope) fail(`peer RSS grows ${result.peerRssSlope.toFixed(2)} MiB/${unit}`);
  if (result.heapSlope > bounds.heapSlope) fail(`driver heap grows ${result.heapSlope.toFixed(2)} MiB/${unit}`);
  if (result.fdsEnd > result.fdsStart + bounds.fds) fail(`driver fds ${result.fdsStart} -> ${result.fdsEnd}`);
  if (result.peerFdsEnd > result.peerFdsStart + bounds.fds) fail(`peer fds ${result.peerFdsStart} -> ${result.peerFdsEnd}`);
  return result;
}

/** The driver's long-lived objects: one context and worker, one "mixed" connection. */
interface Setup {
  context: Context;
  worker: Worker;
  port: number;
}

function objectChecks(result: PhaseResult, baseline: UcxxDiagnostics, peerBaseline: UcxxDiagnostics): void {
  const d = result.objectsAfter;
  const p = result.peerObjectsAfter;
  for (const field of ['endpoints', 'listeners', 'requestsInFlight', 'remoteKeys', 'memoryMappings', 'workers', 'contexts'] as const) {
    if (d[field] > baseline[field]) result.failures.push(`driver ${field}: ${baseline[field]} before, ${d[field]} after`);
  }
  for (const field of ['endpoints', 'remoteKeys', 'memoryMappings'] as const) {
    if (p[field] > peerBaseline[field]) result.failures.push(`peer ${field}: ${peerBaseline[field]} before, ${p[field]} after`);
  }
}

async function mixed(setup: Setup, durationMs: number): Promise<PhaseWork> {
  const { worker } = setup;
  return {
    async run(tick): Promise<void> {
      const endpoint = await worker.connect('127.0.0.1', setup.port);
      const keyReplies = worker.amMessages(AM_KEY_REPLY)[Symbol.asyncIterator]();
      await endpoint.amSend(AM_KEY_REQUEST, null, null, { reply: true });
      const keyMessage = (await keyReplies.next()).value as { receive(): Promise<Uint8Array> };
      const key: RemoteKey = createRemoteKeyFromSerialized(endpoint, await keyMessage.receive());
      await keyReplies.return?.();
      await endpoint.amSend(AM_MIXED_HELLO, null, null, { reply: true });
      const amReplies = worker.amMessages(AM_ECHO_REPLY)[Symbol.asyncIterator]();
      const sizes = [8, 64, 1024, 8192, 65536, 262144];
      const reply = new Uint8Array(262144);
      const deadline = performance.now() + durationMs;
      let ops = 0;
      let i = 0;
      let counter = 0n;
      while (performance.now() < deadline) {
        const size = sizes[i % sizes.length] as number;
        const data = pattern(i, size);
        // tag echo
        const echoed = worker.tagRecv(reply, TAG_ECHO_REPLY);
        await endpoint.tagSend(data, TAG_ECHO);
        const { length } = await echoed;
        if (length !== size || !equal(reply.subarray(0, length), data)) throw new Error(`tag echo ${i}: bytes differ`);
        // stream echo (no message boundaries: read until all came back)
        await endpoint.streamSend(data);
        let got = 0;
        while (got < size) got += await endpoint.streamRecv(reply.subarray(got, size));
        if (!equal(reply.subarray(0, size), data)) throw new Error(`stream echo ${i}: bytes differ`);
        // active-message echo
        const header = new Uint8Array([i & 0xff, 1, 2, 3]);
        await endpoint.amSend(AM_ECHO, header, data, { reply: true });
        const am = (await amReplies.next()).value as { header: Uint8Array; receive(): Promise<Uint8Array> };
        const amData = await am.receive();
        if (!equal(amData, data) || am.header[0] !== (i & 0xff)) throw new Error(`AM echo ${i}: bytes differ`);
        // put / get, checked
        const putSize = Math.min(size, 65536);
        const offset = (i * 65536) % (ATOMIC_OFFSET - 65536);
        await endpoint.memPut(data.subarray(0, putSize), key, offset);
        await endpoint.flush();
        const back = new Uint8Array(putSize);
        await endpoint.memGet(back, key, offset);
        await endpoint.flush();
        if (!equal(back, data.subarray(0, putSize))) throw new Error(`put/get ${i}: bytes differ`);
        // atomics
        const before = await endpoint.fetchAdd(key, ATOMIC_OFFSET, 1n, { width: 64 });
        if (before !== counter) throw new Error(`fetch-add ${i}: ${String(before)} != ${counter}`);
        counter++;
        const swapped = await endpoint.compareAndSwap(key, ATOMIC_OFFSET + 8, BigInt(i), BigInt(i + 1), { width: 64 });
        if (swapped !== BigInt(i)) throw new Error(`compare-and-swap ${i}: ${String(swapped)}`);
        await worker.flush();
        ops += 9;
        i++;
        await tick(ops);
      }
      await amReplies.return?.();
      key.close();
      await endpoint.close();
    },
  };
}

function connectCycles(setup: Setup, count: number): PhaseWork {
  return {
    async run(tick): Promise<void> {
      const ping = new Uint8Array(8);
      for (let i = 0; i < count; i++) {
        const endpoint = await setup.worker.connect('127.0.0.1', setup.port, { errorHandling: 'peer' });
        await endpoint.tagSend(ping, TAG_PING);
        await endpoint.close();
        await tick(i + 1);
      }
    },
  };
}

function memoryCycles(setup: Setup, count: number): PhaseWork {
  return {
    async run(tick): Promise<void> {
      for (let i = 0; i < count; i++) {
        const handle = i % 2 === 0
          ? setup.context.createMemoryHandle(MiB)
          : setup.context.createMemoryHandle(MiB, new Uint8Array(MiB));
        if (i % 2 === 0) handle.view()[i % MiB] = 1;
        handle.createRemoteKey().serialize();
        handle.close();
        await tick(i + 1);
      }
    },
  };
}

function endpointRounds(setup: Setup, perRound: number, rounds: number): PhaseWork {
  return {
    async run(tick): Promise<void> {
      const ping = new Uint8Array(8);
      let done = 0;
      for (let round = 0; round < rounds; round++) {
        const endpoints: Endpoint[] = [];
        for (let i = 0; i < perRound; i += 50) {
          const batch = Math.min(50, perRound - i);
          endpoints.push(...await Promise.all(Array.from({ length: batch },
            () => setup.worker.connect('127.0.0.1', setup.port, { errorHandling: 'peer' }))));
        }
        await Promise.all(endpoints.map((endpoint) => endpoint.tagSend(ping, TAG_PING)));
        await Promise.all(endpoints.map((endpoint) => endpoint.close()));
        done += perRound;
        await tick(done);
      }
    },
  };
}

function receiveRounds(setup: Setup, perRound: number, rounds: number): PhaseWork {
  return {
    async run(tick): Promise<void> {
      const { worker } = setup;
      const self = worker.connectToAddress(worker.getAddress());
      await self.flush();
      const base = 1n << 40n;
      let done = 0;
      for (let round = 0; round < rounds; round++) {
        const buffers = Array.from({ length: perRound }, () => new Uint8Array(16));
        const receives = buffers.map((buffer, i) => worker.tagRecv(buffer, base + BigInt(i)));
        if (getDiagnostics().requestsInFlight < perRound) throw new Error('receives did not stay in flight');
        // Half are matched by messages (in reverse order), half cancelled.
        const sends = [];
        for (let i = perRound - 1; i >= 0; i -= 2) {
          sends.push(self.tagSend(new Uint8Array(16).fill(i & 0xff), base + BigInt(i)));
        }
        await Promise.all(sends);
        for (let i = 0; i < perRound; i += 2) receives[i]?.cancel();
        const settled = await Promise.allSettled(receives);
        for (let i = 1; i < perRound; i += 2) {
          if (settled[i]?.status !== 'fulfilled' || buffers[i]?.[0] !== (i & 0xff)) throw new Error(`receive ${i} of round ${round}`);
        }
        done += perRound;
        await tick(done);
      }
      await self.close();
    },
  };
}

function fmt(n: number, digits = 2): string {
  return n.toFixed(digits);
}

async function driver(): Promise<void> {
  const { values } = parseArgs({
    options: {
      short: { type: 'boolean', default: false },
      'mixed-seconds': { type: 'string' },
      scale: { type: 'string' },
      out: { type: 'string' },
    },
  });
  const short = values.short === true;
  const scale = values.scale === undefined ? 1 : Number(values.scale);
  const n = (long: number, shortCount: number): number => Math.max(1, Math.round((short ? shortCount : long) * scale));
  const mixedSeconds = values['mixed-seconds'] !== undefined ? Number(values['mixed-seconds']) : short ? 20 : 600;
  if (typeof (globalThis as { gc?: unknown }).gc !== 'function') {
    console.warn('soak: run with node --expose-gc (as `npm run soak` does): heap figures are noisy without it');
  }

  const peerProcess = new PeerProcess();
  const ready = await peerProcess.next('ready');
  const context = new Context();
  const worker = context.createWorker();
  const setup: Setup = { context, worker, port: ready['port'] as number };
  {
    // The first remote key unpacked on a context maps a small region of its own for the context's life
    // (src/internal/rkey-reach.ts): make it part of the baseline.
    const self = worker.connectToAddress(worker.getAddress());
    const region = context.createMemoryHandle(4096);
    createRemoteKeyFromSerialized(self, region.createRemoteKey().serialize()).close();
    region.close();
    await self.close();
    // The first fast lane makes each side's failure detector, a second worker that lives as long as its
    // worker (src/worker/detector.ts: some ten fds of its own), and leaves the lane idle for the next.
    const laned = await worker.connect('127.0.0.1', setup.port, { errorHandling: 'peer' });
    await laned.tagSend(new Uint8Array(8), TAG_PING);
    await laned.close();
  }
  const baseline = (await sample(0, 0)).objects;
  const peerBaseline = (await peerProcess.sample()).objects;
  const results: PhaseResult[] = [];
  const started = new Date();

  const rounds = short ? 4 : 8;
  const plan: [string, string, number, number | null, number | null, Bounds, () => Promise<PhaseWork> | PhaseWork][] = [
    // name, unit, cycles per unit, expected cycles, duration, bounds, work
    // Short runs are too short for tight slopes (the driver's RSS moves by +-20 MiB as V8 pages come and
    // go): their bounds catch gross leaks only (e.g. 300 MiB/min is ~1 KiB per operation of 'mixed'). The
    // connect phase's peer is steadier (within +-3): a connection that leaves ~25 KiB behind in it (a
    // closed fast lane that UCX keeps) must fail its bound. The driver's RSS takes steps of 5-7 MiB now
    // and then with nothing growing before or after (one step in 500 cycles reads as 30 MiB/1000).
    ['mixed', 'min', 1, null, mixedSeconds * 1000,
      { rssSlope: short ? 300 : 5, peerRssSlope: short ? 300 : 5, heapSlope: short ? 10 : 1, fds: 4 },
      () => mixed(setup, mixedSeconds * 1000)],
    ['connect', '1000 cycles', 1000, n(10_000, 500), null,
      { rssSlope: short ? 40 : 4, peerRssSlope: short ? 12 : 4, heapSlope: short ? 4 : 1, fds: 4 },
      () => connectCycles(setup, n(10_000, 500))],
    ['memory', '1000 cycles', 1000, n(2_000, 200), null,
      { rssSlope: short ? 60 : 8, peerRssSlope: null, heapSlope: short ? 8 : 1, fds: 2 },
      () => memoryCycles(setup, n(2_000, 200))],
    ['endpoints', '1000 endpoints', 1000, n(500, 100) * rounds, null,
      { rssSlope: short ? 60 : 8, peerRssSlope: short ? 60 : 8, heapSlope: short ? 8 : 2, fds: 4 },
      () => endpointRounds(setup, n(500, 100), rounds)],
    ['receives', '1000 receives', 1000, n(20_000, 2_000) * rounds, null,
      { rssSlope: short ? 20 : 2, peerRssSlope: null, heapSlope: short ? 4 : 1, fds: 2 },
      () => receiveRounds(setup, n(20_000, 2_000), rounds)],
  ];
  for (const [name, unit, perUnit, expected, duration, bounds, make] of plan) {
    process.stdout.write(`soak: ${name}... `);
    const work = await make();
    const result = await runPhase(peerProcess, name, unit, perUnit, short ? 12 : 40, expected, duration, bounds, work);
    objectChecks(result, baseline, peerBaseline);
    results.push(result);
    console.log(`${result.cycles} cycles in ${fmt(result.seconds, 1)} s${result.failures.length > 0 ? ' FAILED' : ''}`);
  }

  await context.close();
  const finalDriver = (await settledSample(0)).objects;
  peerProcess.send({ type: 'stop' });
  const stopped = await peerProcess.next('stopped');
  const finalPeer = (stopped['sample'] as Sample).objects;
  const finalFailures: string[] = [];
  for (const [who, d] of [['driver', finalDriver], ['peer', finalPeer]] as const) {
    const left = Object.entries(d).filter(([, v]) => v !== 0);
    if (left.length > 0) finalFailures.push(`${who} after closing everything: ${left.map(([k, v]) => `${k}=${v}`).join(', ')}`);
  }

  // The table.
  const rows = results.map((r) => ({
    phase: r.phase,
    cycles: r.cycles,
    seconds: fmt(r.seconds, 1),
    'RSS MiB (drv)': `${fmt(r.samples[0]?.rssMiB ?? 0, 0)} -> ${fmt(r.samples.at(-1)?.rssMiB ?? 0, 0)}`,
    'RSS slope drv/peer': `${fmt(r.rssSlope)} / ${fmt(r.peerRssSlope)} per ${r.unit}`,
    'heap slope': `${fmt(r.heapSlope, 3)} per ${r.unit}`,
    'fds drv': `${r.fdsStart} -> ${r.fdsEnd}`,
    'fds peer': `${r.peerFdsStart} -> ${r.peerFdsEnd}`,
    'endpoints after drv/peer': `${r.objectsAfter.endpoints} / ${r.peerObjectsAfter.endpoints}`,
    result: r.failures.length === 0 ? 'ok' : 'FAIL',
  }));
  console.table(rows);
  const failures = [...results.flatMap((r) => r.failures.map((f) => `${r.phase}: ${f}`)), ...finalFailures];
  for (const failure of failures) console.log(`FAIL ${failure}`);
  console.log(`soak: final object counts, driver ${JSON.stringify(finalDriver)}, peer ${JSON.stringify(finalPeer)}`);

  const report = {
    schema: 'ucxx-ts-soak/1',
    mode: short ? 'short' : 'long',
    started: started.toISOString(),
    node: process.version,
    host: { cpus: (await import('node:os')).cpus().length },
    phases: results,
    final: { driver: finalDriver, peer: finalPeer },
    failures,
  };
  const out = values.out ?? path.join(ROOT, 'bench', 'results', `soak-${short ? 'short-' : ''}${started.toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(report, null, 1)}\n`);
  console.log(`soak: wrote ${path.relative(process.cwd(), out)}`);
  console.log(failures.length === 0 ? 'soak: PASS' : `soak: FAIL (${failures.length})`);
  process.exitCode = failures.length === 0 ? 0 : 1;
}

if (process.argv[2] === 'peer') await peer();
else await driver();
