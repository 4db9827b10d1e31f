/**
 * A process whose `worker_threads` threads use ucxx-ts with traffic in flight to this (main) thread and end
 * in every way a thread can end, `repeat` times each; this process must survive all of them and exit 0.
 * Config: { endings: Ending[], repeat: number, parentExit?: boolean }. With parentExit, the process ends
 * with process.exit(0) while two threads are still busy (Node terminates them).
 * Prints one JSON line per thread: { ending, exitCode, rounds }.
 */
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { Context, type Endpoint } from 'ucxx-ts';

type Ending = 'return' | 'exit' | 'throw' | 'terminate' | 'close';
const config = JSON.parse(process.argv[2] ?? '{}') as { endings?: Ending[]; repeat?: number; parentExit?: boolean };
const endings = config.endings ?? ['return', 'exit', 'throw', 'terminate', 'close'];
const repeat = config.repeat ?? 3;
const THREAD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'ucxx-thread.js');

const context = new Context();
const worker = context.createWorker();
const region = context.createMemoryHandle(64 * 1024);
const key = region.createRemoteKey().serialize();
let nextTag = 1;

/**
 * Echo: every message with tag T from a thread is answered with tag T | 2^32 (until the peer goes). UCP
 * matches tags per worker, so each connection's echo receives its own thread's tag only: threads start one
 * at a time (the next once the previous one connected), so connections arrive in the order of `tags`.
 */
const tags: bigint[] = [];
async function echo(endpoint: Endpoint): Promise<void> {
  const tag = tags.shift() as bigint;
  const buffer = new Uint8Array(64 * 1024);
  try {
    for (;;) {
      const info = await endpoint.tagRecv(buffer, tag);
      await endpoint.tagSend(buffer.subarray(0, info.length), tag | (1n << 32n));
    }
  } catch {
    // the thread went away (or we are closing)
  }
}
const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (endpoint) => void echo(endpoint));

function startThread(ending: Ending): { thread: Worker; busy: Promise<void>; exited: Promise<number>; rounds: () => number } {
  tags.push(BigInt(nextTag));
  const thread = new Worker(THREAD, {
    workerData: { role: 'traffic', listenerPort: listener.port, key, ending, rounds: 20, tag: nextTag++ },
    stderr: true,
  });
  let rounds = 0;
  let onBusy: () => void = () => undefined;
  const busy = new Promise<void>((resolve) => { onBusy = resolve; });
  thread.on('message', (m: { type: string; round?: number }) => {
    if (m.type === 'busy') onBusy();
    if (m.type === 'rounds') rounds = m.round ?? 0;
  });
  thread.on('error', () => undefined); // 'throw' ends this way on purpose
  thread.stderr.resume();
  const exited = new Promise<number>((resolve) => thread.once('exit', resolve));
  return { thread, busy, exited, rounds: () => rounds };
}

for (const ending of endings) {
  for (let i = 0; i < repeat; i++) {
    const { thread, busy, exited, rounds } = startThread(ending);
    await busy;
    // Let the traffic run a little, so that sends, puts and flushes are in flight at the end.
    await new Promise((resolve) => setTimeout(resolve, 40 + i * 25));
    thread.postMessage({ type: 'go' });
    if (ending === 'terminate') {
      await new Promise((resolve) => setTimeout(resolve, 5));
      await thread.terminate();
    }
    const exitCode = await Promise.race([
      exited,
      new Promise<number>((resolve) => setTimeout(() => resolve(-999), 20_000)),
    ]);
    console.log(JSON.stringify({ ending, exitCode, rounds: rounds() }));
    if (exitCode === -999) {
      console.log(`thread (${ending}) did not end within 20 s`);
      process.exit(3);
    }
  }
}

if (config.parentExit === true) {
  const a = startThread('terminate');
  await a.busy;
  const b = startThread('terminate');
  await b.busy;
  a.thread.postMessage({ type: 'go' });
  b.thread.postMessage({ type: 'go' });
  await new Promise((resolve) => setTimeout(resolve, 50));
  console.log('thread-exits: exiting with threads busy');
  process.exit(0);
}
await context.close();
console.log('thread-exits: done');
