/**
 * The Duplex ends and half-closes as Node's sockets do, between separate processes: `end()` sends an
 * end-of-stream marker (an active message on the reserved id, with the byte count), the peer's
 * Duplex emits 'end' after exactly that many bytes, with the endpoint still open, whatever order the
 * marker and the bytes come in; `allowHalfOpen: false` (the default) ends the other writable side by
 * itself, `true` lets it keep writing. This process listens; test/peers/duplex-peer.ts connects and
 * talks through its own Duplex. Every byte is checked against the pattern.
 */
import { after, before, describe, test } from 'node:test';
import { strict as assert } from 'node:assert';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AM_ID_FAST_LANE, AM_ID_STREAM_END, ArgumentOutOfRangeError, Context, createEndpointDuplex, type Endpoint, type Feature, type Worker,
} from 'ucxx-ts';
import { Peer } from './helpers/peer.js';
import { within, sleep } from './helpers/deadline.js';
import { readAll, writeAll, type DuplexPeerPlan, type ReadReport } from './helpers/duplex-run.js';
import { firstMismatch, pattern } from './helpers/pattern.js';

const MiB = 1 << 20;

interface Side {
  context: Context;
  worker: Worker;
  port: number;
  accepted: Endpoint[];
  wake: (() => void) | null;
}

function listen(features?: Feature[]): Side {
  const context = new Context(features === undefined ? {} : { features });
  const worker = context.createWorker();
  const side: Side = { context, worker, port: 0, accepted: [], wake: null };
  side.port = worker.listen({ host: '127.0.0.1', port: 0 }, (ep) => {
    side.accepted.push(ep);
    side.wake?.();
  }).port;
  return side;
}

async function nextEndpoint(side: Side): Promise<Endpoint> {
  const wait = async (): Promise<Endpoint> => {
    while (side.accepted.length === 0) await new Promise<void>((resolve) => { side.wake = resolve; });
    side.wake = null;
    return side.accepted.shift() as Endpoint;
  };
  return within(wait(), 20_000, 'the peer to connect');
}

function startPeer(side: Side, plan: DuplexPeerPlan): Peer {
  return Peer.start('duplex-peer', { port: side.port, ...plan });
}

function assertRead(report: ReadReport | { length: unknown; mismatch: unknown }, length: number, who: string): void {
  assert.equal(report.length, length, `${who} read ${String(report.length)} of ${length} bytes`);
  assert.equal(report.mismatch, -1, `${who}: bytes differ from the pattern at ${String(report.mismatch)}`);
}

let side: Side;
before(() => {
  side = listen();
});
after(async () => {
  await side.context.close();
});

describe('a Duplex end() ends the peer\'s readable without closing the endpoint', () => {
  for (const size of [0, 1, 4097, 3 * MiB + 5, 200 * MiB]) {
    test(`pipeline(source, A) and pipeline(B, sink) both finish, endpoint open: ${size} bytes, every byte`, async () => {
      const seed = 7000 + (size % 997);
      const peer = startPeer(side, { size, seed, expectSize: 0, expectSeed: 1 });
      try {
        const ep = await nextEndpoint(side);
        const duplex = createEndpointDuplex(ep);
        let finished = false;
        duplex.on('finish', () => { finished = true; });
        const report = await within(readAll(duplex, seed, size), 120_000, 'B\'s pipeline to finish');
        assertRead(report, size, 'B');
        const sent = await within(peer.next('sent'), 60_000, 'A\'s writing pipeline');
        assert.equal(sent['open'], true, 'A\'s endpoint stays open');
        // allowHalfOpen false (the default): B's writable ended by itself, so A's readable ends too.
        const peerRead = await within(peer.next('read'), 20_000, 'A\'s reading pipeline to finish');
        assertRead(peerRead as unknown as ReadReport, 0, 'A');
        assert.equal(peerRead['open'], true, 'A\'s endpoint is still open after both directions ended');
        assert.ok(finished, 'B\'s writable side finished without end() being called');
        assert.equal(ep.closed, false, 'B\'s endpoint stays open (closeEndpoint: false)');
      } finally {
        assert.equal(await peer.stop(), 0, peer.stderr);
      }
    });
  }
});

test('half-open: A ends, B (allowHalfOpen: true) reads it all, then writes back 9 MiB that A reads whole, then ends', async () => {
  const peer = startPeer(side, { size: 5 * MiB + 3, seed: 41, expectSize: 9 * MiB + 1, expectSeed: 42 });
  try {
    const ep = await nextEndpoint(side);
    const duplex = createEndpointDuplex(ep, { allowHalfOpen: true });
    let finishedEarly = false;
    duplex.on('finish', () => { finishedEarly = true; });
    assertRead(await within(readAll(duplex, 41, 5 * MiB + 3), 60_000, 'B to read A\'s bytes'), 5 * MiB + 3, 'B');
    await within(peer.next('sent'), 20_000, 'A\'s writing pipeline');
    await sleep(50);
    assert.equal(finishedEarly, false, 'with allowHalfOpen, B\'s writable stays open after its readable ended');
    assert.ok(duplex.writable, 'B can still write');
    await within(writeAll(duplex, 42, 9 * MiB + 1), 60_000, 'B to write back');
    const peerRead = await within(peer.next('read'), 60_000, 'A to read B\'s bytes');
    assertRead(peerRead as unknown as ReadReport, 9 * MiB + 1, 'A');
    assert.equal(peerRead['open'], true, 'A\'s endpoint stays open');
    assert.equal(ep.closed, false);
  } finally {
    assert.equal(await peer.stop(), 0, peer.stderr);
  }
});

test('the marker comes before the bytes are read: B makes its Duplex only after A\'s pipeline finished, and reads slowly', async () => {
  const size = 8 * MiB + 11;
  const peer = startPeer(side, { size, seed: 51, expectSize: 0, expectSeed: 1 });
  try {
    const ep = await nextEndpoint(side);
    await within(peer.next('sent'), 60_000, 'A\'s writing pipeline (its marker sent)');
    await sleep(200); // B's worker takes the marker meanwhile; the bytes wait in its stream receiver
    const duplex = createEndpointDuplex(ep, { readSize: 256 * 1024 });
    assertRead(await within(readAll(duplex, 51, size, 1), 60_000, 'B\'s slow pipeline'), size, 'B');
    assertRead(await within(peer.next('read'), 20_000, 'A\'s readable to end') as unknown as ReadReport, 0, 'A');
  } finally {
    assert.equal(await peer.stop(), 0, peer.stderr);
  }
});

test('each Duplex ends after its own peer\'s count: two peers at once, 3 MiB and 5 MiB + 1', async () => {
  const plans = [{ size: 3 * MiB, seed: 61 }, { size: 5 * MiB + 1, seed: 62 }];
  const peers = plans.map((plan) => startPeer(side, { ...plan, expectSize: 0, expectSeed: 1 }));
  try {
    const endpoints = [await nextEndpoint(side), await nextEndpoint(side)];
    // Which peer is which is not known here: each Duplex's bytes must be exactly one peer's whole pattern.
    const reports = await within(Promise.all(endpoints.map(async (ep) => {
      const chunks: Buffer[] = [];
      await pipeline(createEndpointDuplex(ep), new Writable({
        write(chunk: Buffer, _encoding, callback) {
          chunks.push(chunk);
          callback();
        },
      }));
      const bytes = Buffer.concat(chunks);
      const plan = plans.find((p) => p.size === bytes.byteLength);
      assert.ok(plan !== undefined, `a Duplex read ${bytes.byteLength} bytes, no peer's count`);
      assert.equal(firstMismatch(bytes, pattern(plan.seed, plan.size)), -1, 'bytes differ from the pattern');
      return bytes.byteLength;
    })), 60_000, 'both Duplexes to end');
    assert.deepEqual([...reports].sort((a, b) => a - b), plans.map((p) => p.size));
    for (const peer of peers) await within(peer.next('read'), 20_000, 'each A\'s readable to end');
  } finally {
    for (const peer of peers) assert.equal(await peer.stop(), 0, peer.stderr);
  }
});

test('a context without \'am\' has no half-close: end() closes the endpoint, and the peer reads every byte', async () => {
  const features: Feature[] = ['tag', 'stream', 'wakeup'];
  const plain = listen(features);
  const size = 6 * MiB + 7;
  const peer = Peer.start('duplex-peer', { port: plain.port, size, seed: 71, expectSize: 0, expectSeed: 1, features });
  try {
    const ep = await nextEndpoint(plain);
    assertRead(await within(readAll(createEndpointDuplex(ep), 71, size), 60_000, 'B\'s pipeline'), size, 'B');
    assert.ok(ep.closed && ep.closedByPeer, 'A\'s end() closed the endpoint');
    const sent = await within(peer.next('sent'), 20_000, 'A\'s writing pipeline');
    assert.equal(sent['open'], false);
  } finally {
    assert.equal(await peer.stop(), 0, peer.stderr);
    await plain.context.close();
  }
});

test('the reserved AM ids are refused to programs with a typed error', async () => {
  const ep = side.worker.connectToAddress(side.worker.getAddress());
  try {
    assert.equal(AM_ID_STREAM_END, 0xffff);
    assert.equal(AM_ID_FAST_LANE, 0xfffe);
    const isReserved = (err: unknown): boolean => err instanceof ArgumentOutOfRangeError &&
      err.code === 'UCXX_ERR_OUT_OF_RANGE' && /reserved/.test(err.message);
    for (const id of [AM_ID_STREAM_END, AM_ID_FAST_LANE]) {
      assert.throws(() => side.worker.setAmHandler(id, () => undefined), isReserved);
      assert.throws(() => side.worker.amMessages(id), isReserved);
      await assert.rejects(ep.amSend(id, new Uint8Array(8), null).promise, isReserved);
    }
    // The id below them is the program's.
    side.worker.setAmHandler(AM_ID_FAST_LANE - 1, null);
  } finally {
    await ep.close();
  }
});
