#!/usr/bin/env node
/**
 * The ucxx-ts side of bench/stream-receive.ts's mixed pairs: bench/c/stream_receive.c's WAITALL server
 * and its client, written with ucxx-ts's public API the way the README teaches the tuned loop (a manual
 * worker, `progressUntil`), with the same arguments, the same address files and the same output, so
 * that either side of a pair can be C or ucxx-ts.
 *
 *   node build/bench/stream-receive-peer.js server DIR N WARMUP SIZE waitall
 *   node build/bench/stream-receive-peer.js client DIR N WARMUP SIZE
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Context, type Request } from 'ucxx-ts';

const WINDOW = 32;

async function main(): Promise<void> {
  const [role, dir, nText, warmupText, sizeText, mode] = process.argv.slice(2);
  const n = Number(nText);
  const warmup = Number(warmupText);
  const size = Number(sizeText);
  const server = role === 'server';
  if ((role !== 'server' && role !== 'client') || dir === undefined || !(n > 0) || !(warmup >= 0) || !(size > 0) ||
    (server && mode !== 'waitall')) {
    console.error('usage: stream-receive-peer server DIR N WARMUP SIZE waitall | client DIR N WARMUP SIZE');
    process.exitCode = 2;
    return;
  }
  await using context = new Context({ features: ['stream'] });
  const worker = context.createWorker({ progressMode: 'manual' });
  const mine = path.join(dir, server ? 'server.addr' : 'client.addr');
  const theirs = path.join(dir, server ? 'client.addr' : 'server.addr');
  writeFileSync(`${mine}.tmp`, worker.getAddress());
  renameSync(`${mine}.tmp`, mine);
  while (!existsSync(theirs)) await sleep(1);
  const endpoint = worker.connectToAddress(readFileSync(theirs), { errorHandling: 'none' });
  const buffer = Buffer.alloc(size, 0x5a);
  const answer = new Uint8Array(1);
  const wait = (request: Request<unknown>): void => {
    if (!request.completed) worker.progressUntil(request);
  };
  if (server) {
    for (let k = 0; k < n + warmup; k++) wait(endpoint.streamRecv(buffer, { waitAll: true }));
    wait(endpoint.streamSend(answer));
    console.log("{}"); // the C server reports its progress calls here; this one has none to report
  } else {
    const window: (Request<void> | null)[] = new Array<Request<void> | null>(WINDOW).fill(null);
    let start = 0;
    for (let k = 0; k < n + warmup; k++) {
      if (k === warmup) start = performance.now();
      const oldest = window[k % WINDOW];
      if (oldest != null) wait(oldest);
      window[k % WINDOW] = endpoint.streamSend(buffer);
    }
    for (const request of window) if (request !== null) wait(request);
    wait(endpoint.streamRecv(answer, { waitAll: true }));
    console.log(JSON.stringify({ bandwidth_MBps: (n * size) / ((performance.now() - start) / 1000) / 1e6 }));
  }
}

main().catch((err: unknown) => {
  console.error(`stream-receive-peer: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
