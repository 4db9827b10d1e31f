/**
 * A process whose `worker_threads` thread posts rendezvous tag sends to this (main) thread and is
 * terminated before they are received; this thread then churns its heap and receives them. Every
 * receive must either deliver exactly the bytes that were sent or fail with a typed error: never
 * succeed with other bytes. Config: { runs, count, size, mode: 'tag' | 'iov' | 'am' } (how the thread
 * sends: one buffer, two parts, or active messages that a handler here keeps and receives later). Prints one JSON line per run
 * ({ run, ok, wrong, failed, codes }) and 'thread-terminated-sends: done'; exits 0.
 */
import { Worker as Thread } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { Context, type AmMessage } from 'ucxx-ts';

const config = JSON.parse(process.argv[2] ?? '{}') as { runs?: number; count?: number; size?: number; mode?: 'tag' | 'iov' | 'am' };
const mode = config.mode ?? 'tag';
const runs = config.runs ?? 4;
const count = config.count ?? 8;
const size = config.size ?? 64 * 1024;
const THREAD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'ucxx-thread.js');

const context = new Context();
const worker = context.createWorker();
const held = new Map<number, AmMessage>();
worker.setAmHandler(7, (msg) => {
  held.set((msg.header as Uint8Array)[0] as number, msg);
});
const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (endpoint) => {
  endpoint.on('error', () => undefined);
});

/** Allocates and fills memory of the sizes the thread freed, so that freed chunks are reused. */
function churn(): number {
  let sum = 0;
  for (let k = 0; k < 64; k++) {
    const junk = new Uint8Array(size).fill(0xee);
    sum += junk[k] as number;
  }
  return sum;
}

for (let run = 0; run < runs; run++) {
  held.clear();
  const thread = new Thread(THREAD, { workerData: { role: 'send-and-wait', listenerPort: listener.port, count, size, mode } });
  thread.on('error', () => undefined);
  await new Promise<void>((resolve) => {
    thread.on('message', (m: { type: string }) => {
      if (m.type === 'sent') resolve();
    });
  });
  await new Promise((resolve) => setTimeout(resolve, 50)); // the RTSs arrive here
  await thread.terminate();
  churn();
  await new Promise((resolve) => setTimeout(resolve, 20));
  churn();
  let ok = 0;
  let wrong = 0;
  let failed = 0;
  const codes: string[] = [];
  // All posted at once under one 5 s signal: a receive whose data never comes (UCX's v1 protocols on
  // 1.20 fetch it through the sender's progress, which a terminated thread never runs) must end by it.
  const signal = AbortSignal.timeout(5000);
  const receives = Array.from({ length: count }, async (_, i) => {
    const buffer = new Uint8Array(size);
    let length: number;
    if (mode === 'am') {
      const msg = held.get(i);
      if (msg === undefined) throw Object.assign(new Error('no message'), { code: 'NOT_ARRIVED' });
      length = (await msg.receive(buffer, { signal })).byteLength;
    } else {
      length = (await worker.tagRecv(buffer, BigInt(i), undefined, { signal })).length;
    }
    let exact = length === size;
    for (let j = 0; exact && j < size; j++) if (buffer[j] !== ((i + 7 * j) & 0xff)) exact = false;
    return exact;
  });
  for (const outcome of await Promise.allSettled(receives)) {
    if (outcome.status === 'fulfilled') {
      if (outcome.value) ok++;
      else wrong++;
    } else {
      failed++;
      codes.push(String((outcome.reason as { code?: string }).code));
    }
  }
  console.log(JSON.stringify({ run, ok, wrong, failed, codes }));
}
await context.close();
console.log('thread-terminated-sends: done');
