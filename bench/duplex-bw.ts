#!/usr/bin/env node
/**
 * duplex-bw: the Duplex against the raw stream calls it wraps, one-way, between two processes.
 *
 *   node build/bench/duplex-bw.js [--size MiB] [--rounds N] [--json]
 *
 * This process listens; for each run it forks a sender (this script, `--sender`) that connects and
 * writes SIZE MiB in 1 MiB pieces, timed from its first write until the receiver says it has all:
 * - raw: up to 8 `streamSend`s in flight (the Duplex's 8 MiB window); the receiver loops on
 *   `streamRecv(1 MiB, { waitAll: true })` into one buffer and answers one stream byte;
 * - duplex: `pipeline(Readable, createEndpointDuplex(ep))`; the receiver runs `pipeline(duplex, sink)`,
 *   whose Duplex then ends its own side (allowHalfOpen false): the sender's readable 'end' is the answer.
 * Runs alternate (raw, duplex, raw, ...) so that the machine's load falls on both alike; each pair's
 * ratio is printed. A fresh process and connection per run; nothing is checked (the tests do that).
 */
import { fork } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Context, createEndpointDuplex, type Endpoint } from 'ucxx-ts';

const MiB = 1 << 20;
type Mode = 'raw' | 'duplex';

const { values } = parseArgs({
  options: {
    sender: { type: 'boolean', default: false },
    port: { type: 'string' },
    mode: { type: 'string' },
    size: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '4' },
    json: { type: 'boolean', default: false },
  },
});
const total = Number(values.size) * MiB;

async function sender(port: number, mode: Mode): Promise<void> {
  const context = new Context();
  const worker = context.createWorker();
  const ep = await worker.connect('127.0.0.1', port);
  const piece = Buffer.alloc(MiB, 0x5a);
  const count = total / MiB;
  let seconds: number;
  if (mode === 'raw') {
    const answer = ep.streamRecv(new Uint8Array(1), { waitAll: true });
    const start = performance.now();
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; i < count; i++) {
      const sent = ep.streamSend(piece).promise;
      inFlight.add(sent);
      void sent.then(() => inFlight.delete(sent));
      if (inFlight.size >= 8) await Promise.race(inFlight);
    }
    await answer;
    seconds = (performance.now() - start) / 1000;
  } else {
    const duplex = createEndpointDuplex(ep);
    const ended = new Promise<void>((resolve, reject) => {
      duplex.on('end', resolve).on('error', reject);
      duplex.resume();
    });
    const start = performance.now();
    const pieces = function* (): Generator<Buffer> {
      for (let i = 0; i < count; i++) yield piece;
    };
    await pipeline(Readable.from(pieces(), { objectMode: false }), duplex);
    await ended;
    seconds = (performance.now() - start) / 1000;
  }
  // The receiver closes first (while this side still runs), then tells this one to go.
  const go = new Promise((resolve) => process.once('message', resolve));
  process.send?.({ mode, MBps: total / seconds / 1e6 });
  await go;
  await context.close();
  process.exit(0);
}

async function receive(ep: Endpoint, mode: Mode): Promise<void> {
  if (mode === 'raw') {
    const buffer = new Uint8Array(MiB);
    for (let got = 0; got < total;) got += await ep.streamRecv(buffer, { waitAll: true });
    await ep.streamSend(new Uint8Array([1]));
    return;
  }
  let got = 0;
  await pipeline(createEndpointDuplex(ep), new Writable({
    write(chunk: Buffer, _encoding, callback) {
      got += chunk.byteLength;
      callback();
    },
  }));
  if (got !== total) throw new Error(`the Duplex read ${got} of ${total} bytes`);
}

async function main(): Promise<void> {
  const context = new Context();
  const worker = context.createWorker();
  let onAccept: ((ep: Endpoint) => void) | null = null;
  const port = worker.listen({ host: '127.0.0.1', port: 0 }, (ep) => onAccept?.(ep)).port;
  const results: Record<Mode, number[]> = { raw: [], duplex: [] };
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const mode of ['raw', 'duplex'] as const) {
      const accepted = new Promise<Endpoint>((resolve) => { onAccept = resolve; });
      const child = fork(fileURLToPath(import.meta.url), ['--sender', '--port', String(port), '--mode', mode, '--size', String(values.size)]);
      const report = new Promise<{ MBps: number }>((resolve, reject) => {
        child.on('message', (m: { MBps: number }) => resolve(m));
        child.on('exit', (code) => reject(new Error(`the sender exited (${code}) before reporting`)));
      });
      const ep = await accepted;
      await receive(ep, mode);
      const { MBps } = await report;
      results[mode].push(MBps);
      await ep.close();
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ type: 'exit' });
      await exited;
      if (values.json) console.log(JSON.stringify({ tool: 'duplex-bw', round, mode, size: total, MBps }));
    }
    const raw = results.raw[round] as number;
    const duplex = results.duplex[round] as number;
    if (!values.json) console.log(`round ${round + 1}: raw ${raw.toFixed(0)} MB/s, Duplex ${duplex.toFixed(0)} MB/s, ratio ${(duplex / raw).toFixed(2)}`);
  }
  await context.close();
}

if (values.sender) await sender(Number(values.port), values.mode as Mode);
else await main();
