/**
 * ucxx-ts RMA demo: two processes on loopback, one-sided puts and gets into UCX-allocated memory.
 *
 *   npm run demo        (builds, then runs node build/examples/rma-demo.js)
 *
 * - The "owner" (this process) maps a 64 MiB region that UCX allocates, listens on 127.0.0.1 (port 0:
 *   any free port), forks the initiator, and sends it the region's serialized remote key as a tag message.
 * - The "initiator" (the forked child) unpacks the key, then for each case memPut's a deterministic
 *   pattern, memGet's it back and compares, flushes, and asks the owner (tag message) to check the same
 *   bytes in its own view of the region. It measures latency (median per operation) and bandwidth.
 * - The owner prints one table. Exit status 0 only when every check passed on both sides.
 *
 * Only the port travels outside UCX (as a command-line argument of the child); every byte of data, the
 * key and the control messages go through UCX.
 */
import { fork, execFileSync, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import {
  Context, createRemoteKeyFromSerialized, getUcxVersion, type Endpoint, type RemoteKey,
} from 'ucxx-ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const REGION_SIZE = 64 * MiB;
/** The whole demo must finish within this; otherwise the child is killed and we exit non-zero. */
const OVERALL_TIMEOUT_MS = 60_000;

// Tags: UCP matches tag messages per worker, so each kind of message gets its own tag.
const TAG_KEY = 1n; // owner -> initiator: serialized remote key
const TAG_TO_OWNER = 2n; // initiator -> owner: JSON requests ('verify', 'report')
const TAG_TO_INITIATOR = 3n; // owner -> initiator: JSON replies

/** One transfer: `size` bytes at `offset` in the owner's region, pattern from `seed`. */
interface Case {
  size: number;
  offset: number;
  seed: number;
  /** Timed repetitions (after a short warm-up); latency is their median. */
  iterations: number;
}

const CASES: Case[] = [
  { size: 8, offset: 0, seed: 1, iterations: 2000 },
  { size: 8, offset: 4093, seed: 2, iterations: 2000 }, // unaligned
  { size: 4 * KiB, offset: 64 * KiB, seed: 3, iterations: 1000 },
  { size: 4 * KiB, offset: 1 * MiB + 13, seed: 4, iterations: 1000 }, // unaligned
  { size: 1 * MiB, offset: 8 * MiB, seed: 5, iterations: 50 },
  { size: 1 * MiB, offset: 32 * MiB + 7, seed: 6, iterations: 50 }, // unaligned
  { size: 64 * MiB, offset: 0, seed: 7, iterations: 5 }, // the whole region
];

/** What the initiator reports per case (the owner adds its own check). */
interface Measurement {
  index: number;
  putUs: number;
  getUs: number;
  /** The initiator read the bytes back with memGet and they matched. */
  initiatorOk: boolean;
}

type ToOwner =
  | { type: 'verify'; index: number; offset: number; size: number; seed: number }
  | { type: 'report'; measurements: Measurement[] };
type ToInitiator = { type: 'verified'; index: number; ok: boolean; detail: string } | { type: 'bye' };

// ---- helpers ------------------------------------------------------------------------------------------

/** `length` bytes of a xorshift32 stream: both sides generate it, so only the seed crosses the wire. */
function pattern(seed: number, length: number): Uint8Array {
  const out = new Uint8Array(length);
  const words = new Uint32Array(out.buffer, 0, length >>> 2);
  let x = (seed * 2654435761 + 0x9e3779b9) >>> 0 || 1;
  const next = (): number => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x;
  };
  for (let i = 0; i < words.length; i++) words[i] = next();
  for (let i = words.length * 4; i < length; i++) out[i] = next() & 0xff;
  return out;
}

/** Index of the first differing byte, or -1 when equal (memcmp first, the byte loop only on failure). */
function firstMismatch(actual: Uint8Array, expected: Uint8Array): number {
  if (Buffer.from(actual.buffer, actual.byteOffset, actual.length)
    .equals(Buffer.from(expected.buffer, expected.byteOffset, expected.length))) return -1;
  for (let i = 0; i < Math.min(actual.length, expected.length); i++) if (actual[i] !== expected[i]) return i;
  return Math.min(actual.length, expected.length);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1] ?? NaN;
}

/** Control messages are small JSON documents sent as tag messages. */
async function sendJson(endpoint: Endpoint, tag: bigint, message: ToOwner | ToInitiator): Promise<void> {
  await endpoint.tagSend(Buffer.from(JSON.stringify(message)), tag);
}

async function recvJson<T>(endpoint: Endpoint, tag: bigint): Promise<T> {
  const buffer = Buffer.alloc(64 * KiB);
  const { length } = await endpoint.tagRecv(buffer, tag);
  return JSON.parse(buffer.subarray(0, length).toString('utf8')) as T;
}

function formatSize(bytes: number): string {
  if (bytes >= MiB && bytes % MiB === 0) return `${bytes / MiB} MiB`;
  if (bytes >= KiB && bytes % KiB === 0) return `${bytes / KiB} KiB`;
  return `${bytes} B`;
}

/** An offset as "<n> MiB + <rest>" or "<n> KiB" where that reads better, so unaligned ones stand out. */
function formatOffset(offset: number): string {
  if (offset >= MiB) {
    const rest = offset % MiB;
    return `${(offset - rest) / MiB} MiB${rest === 0 ? '' : ` + ${rest}`}`;
  }
  return offset >= KiB && offset % KiB === 0 ? `${offset / KiB} KiB` : String(offset);
}

/** The transports this UCX build has (`ucx_info -d`), if ucx_info is installed; informational only. */
function availableTransports(): string {
  try {
    const text = execFileSync('ucx_info', ['-d'], { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'ignore'] });
    const names = [...text.matchAll(/Transport:\s*(\S+)/g)].map((m) => m[1]);
    return [...new Set(names)].join(', ') || 'unknown';
  } catch {
    return 'unknown (ucx_info not found)';
  }
}

// ---- the initiator: puts, gets, measures --------------------------------------------------------------

async function runInitiator(port: number): Promise<void> {
  const context = new Context({ name: 'rma-demo-initiator' });
  try {
    // 'polling' progresses continuously while an operation is in flight: the lowest latency.
    const worker = context.createWorker({ progressMode: 'polling' });
    const endpoint = await worker.connect('127.0.0.1', port);

    // The first message from the owner is its region's serialized remote key.
    const keyBuffer = new Uint8Array(4 * KiB);
    const { length } = await endpoint.tagRecv(keyBuffer, TAG_KEY);
    const key: RemoteKey = createRemoteKeyFromSerialized(endpoint, keyBuffer.subarray(0, length));
    // The lanes are settled once a message has come through: say what this connection moves data over.
    const lanes = [...new Set(endpoint.getTransports().filter((l) => !l.usage.includes('cm')).map((l) => `${l.transport}/${l.device}`))];
    console.log(`connection: error handling ${endpoint.errorHandling ?? '?'} (the default on UCX ${getUcxVersion().join('.')}), ` +
      `lanes in use: ${lanes.join(', ') || 'none reported'}`);

    const measurements: Measurement[] = [];
    for (const [index, c] of CASES.entries()) {
      const data = pattern(c.seed, c.size);
      const back = new Uint8Array(c.size);
      const warmup = Math.max(1, Math.min(200, Math.floor(c.iterations / 5))); // JIT, caches, UCX lanes

      // put + flush: put completion is local only; the flush makes the bytes visible at the owner.
      const putTimes: number[] = [];
      for (let i = 0; i < warmup + c.iterations; i++) {
        const start = performance.now();
        const put = endpoint.memPut(data, key, c.offset);
        await endpoint.flush();
        if (put.error !== undefined) throw put.error;
        if (i >= warmup) putTimes.push(performance.now() - start);
      }

      // get: complete means the bytes are in our buffer.
      const getTimes: number[] = [];
      for (let i = 0; i < warmup + c.iterations; i++) {
        back.fill(0);
        const start = performance.now();
        await endpoint.memGet(back, key, c.offset);
        if (i >= warmup) getTimes.push(performance.now() - start);
      }
      const initiatorOk = firstMismatch(back, data) === -1;
      await endpoint.flush();

      // Ask the owner to check the same bytes in its own memory before the next case overwrites them.
      await sendJson(endpoint, TAG_TO_OWNER, { type: 'verify', index, offset: c.offset, size: c.size, seed: c.seed });
      const reply = await recvJson<ToInitiator>(endpoint, TAG_TO_INITIATOR);
      if (reply.type !== 'verified' || reply.index !== index) throw new Error(`unexpected reply ${JSON.stringify(reply)}`);

      measurements.push({ index, putUs: median(putTimes) * 1000, getUs: median(getTimes) * 1000, initiatorOk });
    }

    await sendJson(endpoint, TAG_TO_OWNER, { type: 'report', measurements });
    // Wait for the owner's goodbye so that neither side closes under the other's last message.
    await recvJson<ToInitiator>(endpoint, TAG_TO_INITIATOR);
    key.close();
  } finally {
    await context.close(); // closes the worker, its endpoint and keys, in UCX's order
  }
}

// ---- the owner: exposes memory, verifies, prints ------------------------------------------------------

/** The forked initiator, killed on any way out of the owner (timeout, error) if still running. */
let initiator: ChildProcess | undefined;

async function runOwner(): Promise<boolean> {
  const context = new Context({ name: 'rma-demo-owner' });
  let childExit: Promise<number> | undefined;
  try {
    // 'event' progress: this process sleeps until UCX has something for it. The initiator's puts and gets
    // into UCX-allocated memory are one-sided (shared memory on one host): they need no work from us.
    const worker = context.createWorker({ progressMode: 'event' });
    const region = context.createMemoryHandle(REGION_SIZE);
    const memory = region.view(); // our own window on the region, for checking
    memory.fill(0);
    const serializedKey = region.createRemoteKey().serialize();

    const listener = worker.listen({ host: '127.0.0.1', port: 0 });
    const kind = region.getMemoryType() === 0 ? 'host' : `memory type ${region.getMemoryType()}`;
    console.log(
      `UCX ${getUcxVersion().join('.')} | memory: ${kind}, ${region.allocated ? 'UCX-allocated' : 'registered'}, ` +
      `${formatSize(region.getSize())} | transports: ${availableTransports()} (UCX_TLS=${context.getConfig()['TLS'] ?? '?'})`,
    );

    // The initiator is this same script in a child process; the port is all it needs to find us.
    const child = fork(fileURLToPath(import.meta.url), ['initiator', String(listener.port)], { stdio: 'inherit' });
    initiator = child;
    childExit = new Promise<number>((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1))));
    // Whatever we wait for below is abandoned if the initiator dies first.
    const childDied = childExit.then((code) => {
      throw new DemoFailure(`the initiator exited early with status ${code}`);
    });
    childDied.catch(() => undefined); // an error only where it wins a race
    const unlessChildDies = <T>(promise: Promise<T>): Promise<T> => Promise.race([promise, childDied]);

    // Take the first connection, then stop listening: this demo has one initiator.
    const connection = await unlessChildDies(listener[Symbol.asyncIterator]().next());
    listener.close();
    if (connection.done === true) throw new DemoFailure('the listener closed before the initiator connected');
    const endpoint = connection.value;
    await endpoint.tagSend(serializedKey, TAG_KEY);

    const ownerChecks = new Map<number, string>();
    let measurements: Measurement[] | undefined;
    while (measurements === undefined) {
      const message = await unlessChildDies(recvJson<ToOwner>(endpoint, TAG_TO_OWNER));
      if (message.type === 'verify') {
        // The initiator flushed: its bytes must be in our memory now.
        const actual = memory.subarray(message.offset, message.offset + message.size);
        const mismatch = firstMismatch(actual, pattern(message.seed, message.size));
        const detail = mismatch === -1 ? 'ok' : `first wrong byte at region offset ${message.offset + mismatch}`;
        ownerChecks.set(message.index, detail);
        await sendJson(endpoint, TAG_TO_INITIATOR, { type: 'verified', index: message.index, ok: mismatch === -1, detail });
      } else {
        measurements = message.measurements;
      }
    }
    await sendJson(endpoint, TAG_TO_INITIATOR, { type: 'bye' });

    const ok = printTable(measurements, ownerChecks);
    const childStatus = await Promise.race([childExit, sleep(10_000, -1)]);
    if (childStatus !== 0) {
      console.error(`rma-demo: FAILED: the initiator exited with status ${childStatus}`);
      return false;
    }
    return ok;
  } catch (err) {
    // A lost connection (e.g. a canceled receive) usually means the initiator died: say so.
    const status = childExit === undefined || err instanceof DemoFailure
      ? undefined : await Promise.race([childExit, sleep(1000, undefined)]);
    if (status === undefined) throw err;
    throw new DemoFailure(`the initiator exited with status ${status} before the demo finished (here: ${String(err)})`);
  } finally {
    killInitiator();
    await context.close();
  }
}

/** A failure explained by its message (no stack trace needed). */
class DemoFailure extends Error {}

function sleep<T>(ms: number, value: T): Promise<T> {
  return new Promise((resolve) => setTimeout(() => resolve(value), ms).unref());
}

function killInitiator(): void {
  if (initiator !== undefined && initiator.exitCode === null && initiator.signalCode === null) initiator.kill('SIGKILL');
}

function printTable(measurements: Measurement[], ownerChecks: Map<number, string>): boolean {
  const header = ['operation', 'size', 'offset', 'latency (us)', 'bandwidth (MB/s)', 'verified (initiator/owner)'];
  const rows: string[][] = [];
  const failures: string[] = [];
  for (const [index, c] of CASES.entries()) {
    const m = measurements.find((x) => x.index === index);
    const ownerDetail = ownerChecks.get(index) ?? 'not checked';
    const initiatorOk = m?.initiatorOk === true;
    const ownerOk = ownerDetail === 'ok';
    if (!initiatorOk) failures.push(`${formatSize(c.size)} at ${formatOffset(c.offset)}: the initiator's memGet read back different bytes`);
    if (!ownerOk) failures.push(`${formatSize(c.size)} at ${formatOffset(c.offset)}: owner check: ${ownerDetail}`);
    const verified = `${initiatorOk ? 'yes' : 'NO'}/${ownerOk ? 'yes' : 'NO'}`;
    for (const [op, us] of [['put+flush', m?.putUs], ['get', m?.getUs]] as const) {
      const latency = us === undefined ? '-' : us.toFixed(us < 10 ? 2 : 1);
      // Bandwidth only means something for large transfers; small ones are about latency.
      const bandwidth = us === undefined || c.size < 64 * KiB ? '-' : (c.size / us).toFixed(0); // bytes/us = MB/s
      rows.push([op, formatSize(c.size), formatOffset(c.offset), latency, bandwidth, verified]);
    }
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells.map((cell, i) => (i < 3 || i === 5 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join('  ').trimEnd();
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of rows) console.log(line(row));
  if (failures.length > 0) {
    console.error(`rma-demo: FAILED: ${failures.length} check(s):\n  ${failures.join('\n  ')}`);
    return false;
  }
  console.log(`rma-demo: OK: ${CASES.length} transfers verified by both processes`);
  return true;
}

// ---- entry point ----------------------------------------------------------------------------------------

if (process.argv[2] === 'initiator') {
  // The owner kills us on its timeout; if it dies first, the IPC channel closes and we stop too.
  process.on('disconnect', () => {
    console.error('rma-demo initiator: the owner went away');
    process.exit(1);
  });
  process.channel?.unref(); // the IPC channel alone must not keep us alive
  runInitiator(Number(process.argv[3])).then(
    () => process.exit(0),
    (err: unknown) => {
      console.error('rma-demo initiator: FAILED:', err);
      process.exit(1);
    },
  );
} else {
  const timer = setTimeout(() => {
    console.error(`rma-demo: FAILED: no result within ${OVERALL_TIMEOUT_MS / 1000} s (killed the initiator)`);
    process.exit(1); // the 'exit' hook below kills the child
  }, OVERALL_TIMEOUT_MS);
  process.on('exit', killInitiator);
  runOwner().then(
    (ok) => {
      clearTimeout(timer);
      process.exit(ok ? 0 : 1);
    },
    (err: unknown) => {
      console.error('rma-demo: FAILED:', err instanceof DemoFailure ? err.message : err);
      process.exit(1);
    },
  );
}
