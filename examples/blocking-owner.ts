/**
 * A region whose owner's main thread may block: progress in a worker thread, memory in a SharedArrayBuffer.
 *
 *   npm run build && npm run build:test && node build/examples/blocking-owner.js
 *
 * A peer's RMA into memory the program registered (as opposed to memory UCX allocated in shared memory)
 * is emulated by the target's worker: active messages for small puts, CMA for bulk, and the flush waits
 * for the target to answer. The target's worker must therefore be progressed, which an event-driven
 * worker does on its thread's event loop. A main thread that blocks (a synchronous compute loop,
 * Atomics.wait, a long JSON.parse) would stall every peer meanwhile.
 *
 * The pattern: the memory is a SharedArrayBuffer created by the main thread; a `worker_threads` thread
 * that does nothing else creates the Context and Worker, registers that SharedArrayBuffer with
 * `context.createMemoryHandle(size, sharedArrayBuffer)` and serves the peers. The main thread reads (and
 * writes) the same bytes directly, with Atomics where it needs ordering, and never touches UCX.
 *
 * Here the peer (a second process) writes 1 MiB in 64 KiB puts, flushes, then sets a "done" word, while
 * the main thread spins in a synchronous loop that only watches that word: the data lands, byte-exact,
 * while the main thread never returns to its event loop.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Context, createRemoteKeyFromSerialized } from 'ucxx-ts';

const DATA_BYTES = 1 << 20;
const CHUNK = 64 * 1024;
/** The last 8 bytes of the region: the peer's "done" word (an Int32 at DATA_BYTES). */
const REGION_BYTES = DATA_BYTES + 8;
const KEY_TAG = 1n;

function expected(i: number): number {
  return (i * 31 + (i >> 12)) & 0xff;
}

/** The main thread: owns the memory, blocks, checks. */
async function main(): Promise<void> {
  const shared = new SharedArrayBuffer(REGION_BYTES);
  const bytes = new Uint8Array(shared);
  const done = new Int32Array(shared, DATA_BYTES, 1);

  const progress = new Worker(new URL(import.meta.url), { workerData: { shared } });
  const port = await new Promise<number>((resolve) => progress.once('message', (m: { port: number }) => resolve(m.port)));
  const peer = fork(fileURLToPath(import.meta.url), ['peer', String(port)]);

  // Block: a synchronous loop that never yields to the event loop (at most 30 s).
  const start = performance.now();
  let spins = 0;
  while (Atomics.load(done, 0) === 0 && performance.now() - start < 30_000) spins++;
  const blockedMs = performance.now() - start;
  const landed = Atomics.load(done, 0) === 1;

  let mismatches = 0;
  for (let i = 0; i < DATA_BYTES; i++) if (bytes[i] !== expected(i)) mismatches++;
  console.log(`main: blocked for ${blockedMs.toFixed(0)} ms (${spins} spins) without returning to its event loop`);
  console.log(`main: the peer's ${DATA_BYTES} bytes ${landed ? 'landed' : 'did NOT land'} meanwhile; ` +
    `byte-exact: ${landed && mismatches === 0 ? 'yes' : `no (${mismatches} bytes differ)`}`);

  await new Promise((resolve) => peer.once('exit', resolve));
  progress.postMessage('stop');
  await new Promise((resolve) => progress.once('exit', resolve));
  process.exitCode = landed && mismatches === 0 ? 0 : 1;
}

/** The progress thread: the only one that uses UCX on the owner's side. */
async function progressThread(shared: SharedArrayBuffer): Promise<void> {
  const context = new Context();
  const worker = context.createWorker(); // 'event': progressed by this thread's event loop
  const region = context.createMemoryHandle(REGION_BYTES, shared);
  const key = region.createRemoteKey().serialize();
  const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (endpoint) => {
    void endpoint.tagSend(key, KEY_TAG);
  });
  parentPort?.postMessage({ port: listener.port });
  await new Promise((resolve) => parentPort?.once('message', resolve));
  await context.close();
}

/** The peer: another process, writing into the owner's region. */
async function peer(port: number): Promise<void> {
  await using context = new Context();
  const worker = context.createWorker();
  const keyBytes = new Uint8Array(1024);
  const received = worker.tagRecv(keyBytes, KEY_TAG);
  const endpoint = await worker.connect('127.0.0.1', port);
  const { length } = await received;
  const key = createRemoteKeyFromSerialized(endpoint, keyBytes.subarray(0, length));
  const data = new Uint8Array(DATA_BYTES);
  for (let i = 0; i < DATA_BYTES; i++) data[i] = expected(i);
  const start = performance.now();
  const puts = [];
  for (let offset = 0; offset < DATA_BYTES; offset += CHUNK) {
    puts.push(endpoint.memPut(data.subarray(offset, offset + CHUNK), key, offset));
  }
  await Promise.all(puts);
  await endpoint.flush(); // everything is in the owner's memory now
  await endpoint.memPut(new Uint8Array(new Int32Array([1]).buffer), key, DATA_BYTES);
  await endpoint.flush();
  console.log(`peer: ${DATA_BYTES / CHUNK} puts of ${CHUNK} bytes and the done word, flushed, in ` +
    `${(performance.now() - start).toFixed(1)} ms`);
  await endpoint.close();
}

if (process.argv[2] === 'peer') await peer(Number(process.argv[3]));
else if (isMainThread) await main();
else await progressThread((workerData as { shared: SharedArrayBuffer }).shared);
