/**
 * The fast lane between two ucxx-ts processes on one host (src/endpoint/fast-lane.ts): a PEER-mode
 * connection whose data moves over a NONE-mode endpoint to the peer's worker (shared memory, CMA).
 * The messaging and atomics test files run here once more, with the lane where their defaults have
 * none and without it where they have it (every protocol, bytes checked across processes); then what
 * is particular to it: the defaults, either side turning it off, what it uses, and a killed peer.
 */
import { after, before, describe, test } from 'node:test';
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { Context, UcxError, createRemoteKeyFromSerialized, getDefaultErrorHandling, getDiagnostics, type AmMessage, type Endpoint, type EndpointOptions, type Worker } from 'ucxx-ts';
import { Peer } from './helpers/peer.js';
import { firstMismatch, pattern } from './helpers/pattern.js';
import { within } from './helpers/deadline.js';
import { sharedMappings } from './helpers/shared-mappings.js';

// The messaging and atomics files on their defaults have the lane where PEER is the default (UCX
// 1.19+); here they run the other way: without it there, with it (in PEER mode) on 1.13.
process.env['UCXX_TS_TEST_FAST_LANE'] = getDefaultErrorHandling() === 'peer' ? '0' : '1';
await import('./messaging.test.js');
await import('./atomics.test.js');

const ECHO = 1n << 63n;
const dataTransports = (ep: Endpoint): string[] =>
  ep.getTransports().filter((t) => !t.usage.every((u) => u === 'cm' || u === 'wireup' || u === 'keepalive')).map((t) => t.transport);

/** Sends `size` bytes through the echo peer and checks what comes back. */
async function echo(worker: Worker, endpoint: Endpoint, size: number, seed: number): Promise<void> {
  const tag = ECHO | BigInt(seed);
  const data = pattern(seed, size);
  const back = new Uint8Array(size);
  const receive = worker.tagRecv(back, tag);
  await endpoint.tagSend(data, tag);
  await receive;
  assert.equal(firstMismatch(back, data), -1);
}

/**
 * Connects `own` in PEER mode to a new echo peer (its config `peerConfig`) with `options`, and checks
 * that neither side took a lane or waited for the other: the connect does not wait for an offer (the
 * client's 1 s), the listener hands out without waiting for an answer (its 2 s). Echoes 64 KiB when
 * `seed` is a number.
 */
async function expectNoLane(own: Worker, peerConfig: object, options: EndpointOptions, seed: number | null): Promise<void> {
  const peer = Peer.start('echo-peer', peerConfig);
  try {
    const { port } = await peer.next('ready');
    const started = Date.now();
    const endpoint = await own.connect('127.0.0.1', port as number, { errorHandling: 'peer', ...options });
    assert.ok(Date.now() - started < 900, `connect took ${Date.now() - started} ms`);
    const connected = await peer.next('connected');
    assert.ok(Date.now() - started < 1500, `handed out after ${Date.now() - started} ms`);
    assert.equal(connected['fastLane'], false);
    assert.equal(endpoint.fastLane, false);
    if (seed !== null) await echo(own, endpoint, 64 << 10, seed);
    await endpoint.close();
  } finally {
    assert.equal(await peer.stop(), 0, peer.stderr);
  }
}

/** `own`'s PEER-mode connection to an echo peer just started, which takes the lane on both sides. */
async function connectOverLane(own: Worker, peer: Peer): Promise<Endpoint> {
  const { port } = await peer.next('ready');
  const endpoint = await own.connect('127.0.0.1', port as number, { errorHandling: 'peer' });
  assert.equal(endpoint.fastLane, true);
  assert.equal((await peer.next('connected'))['fastLane'], true);
  return endpoint;
}

describe('the fast lane', () => {
  let context: Context;
  let worker: Worker;
  before(() => {
    context = new Context();
    worker = context.createWorker();
  });
  after(async () => {
    await context.close();
  });

  test('by default in PEER mode: the data moves over shared memory or CMA, none over TCP; the PEER connection stays', async () => {
    const peer = Peer.start('echo-peer');
    try {
      const { port } = await peer.next('ready');
      const endpoint = await worker.connect('127.0.0.1', port as number, { errorHandling: 'peer' });
      assert.equal((await peer.next('connected'))['fastLane'], true);
      assert.equal(endpoint.fastLane, true);
      assert.equal(endpoint.errorHandling, 'peer');
      const lanes = dataTransports(endpoint);
      assert.ok(lanes.length > 0 && lanes.every((t) => ['sysv', 'posix', 'cma', 'xpmem', 'knem'].includes(t)), JSON.stringify(endpoint.getTransports()));
      for (const size of [8, 64 << 10, 4 << 20]) await echo(worker, endpoint, size, size);
      await endpoint.close();
    } finally {
      assert.equal(await peer.stop(), 0, peer.stderr);
    }
  });

  test('each side keeps the PEER connections of its lanes on a failure detector of its own: one per worker, made at the first lane, gone with the worker', async () => {
    // The worker that carries the data then polls no TCP interface (UCX polls every interface of a
    // worker's endpoints in each progress call: an epoll_wait system call each; docs/interoperability.md).
    const own = new Context();
    const ownWorker = own.createWorker();
    const peer = Peer.start('echo-peer');
    try {
      const { port } = await peer.next('ready');
      const before = getDiagnostics().detectors;
      assert.equal((await peer.call({ type: 'diagnostics' }, 'diagnostics'))['detectors'], 0, 'a listener makes its detector at its first lane');
      const endpoints: Endpoint[] = [];
      for (let i = 0; i < 3; i++) {
        const endpoint = await ownWorker.connect('127.0.0.1', port as number, { errorHandling: 'peer' });
        assert.equal(endpoint.fastLane, true);
        assert.equal((await peer.next('connected'))['fastLane'], true);
        endpoints.push(endpoint);
        assert.equal(getDiagnostics().detectors, before + 1, 'one detector for all the connections of a worker');
      }
      await echo(ownWorker, endpoints[0] as Endpoint, 64 << 10, 7);
      assert.equal((await peer.call({ type: 'diagnostics' }, 'diagnostics'))['detectors'], 1);
      for (const endpoint of endpoints) await endpoint.close();
      assert.equal(getDiagnostics().detectors, before + 1, 'the detector stays with its worker');
      await ownWorker.close();
      assert.equal(getDiagnostics().detectors, before, 'the worker took its detector with it');
    } finally {
      await own.close();
      assert.equal(await peer.stop(), 0, peer.stderr);
    }
  });

  test('a connection to a listener of its own worker takes no lane: its detector connection is dropped, the listener hands out exactly one endpoint, and messages flow', async () => {
    const own = new Context();
    const ownWorker = own.createWorker();
    try {
      const accepted: Endpoint[] = [];
      const listener = ownWorker.listen({ host: '127.0.0.1', port: 0 }, (ep) => accepted.push(ep));
      const endpoint = await ownWorker.connect('127.0.0.1', listener.port, { errorHandling: 'peer' });
      assert.equal(endpoint.fastLane, false);
      await within((async () => {
        while (accepted.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      })(), 5000, 'the accepted endpoint');
      const data = pattern(3, 4096);
      const back = new Uint8Array(data.length);
      const receive = ownWorker.tagRecv(back, 5n);
      await endpoint.tagSend(data, 5n);
      await receive;
      assert.equal(firstMismatch(back, data), -1);
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(accepted.length, 1, 'one connection, one endpoint handed out');
      assert.equal(accepted[0]?.fastLane, false);
      await endpoint.close();
      listener.close();
    } finally {
      await own.close();
    }
  });

  test('connections made and closed again take the same lane: neither process maps more shared memory, and each connection gets only its own messages', async () => {
    // UCX keeps a NONE-mode endpoint whose peer connected back until its worker is destroyed, closed or
    // not, with the peer's segments mapped: one lane per connection grew both processes by some 40 KiB
    // a connection (the soak's connect phase). Released lanes are reused instead.
    const peer = Peer.start('echo-peer');
    const replies: AmMessage[] = [];
    worker.setAmHandler(2, (message) => {
      replies.push(message);
    });
    try {
      const { port } = await peer.next('ready');
      let baseline: { own: number; peer: number } | undefined;
      for (let i = 0; i < 30; i++) {
        const endpoint = await worker.connect('127.0.0.1', port as number, { errorHandling: 'peer' });
        assert.equal(endpoint.fastLane, true);
        assert.equal((await peer.next('connected'))['fastLane'], true);
        // An active message echoed on the reply endpoint: the listener's side of the reused lane
        // names this connection's Endpoint, and the reply reaches this one.
        const header = new Uint8Array([i]);
        await endpoint.amSend(1, header, pattern(i, 100), { reply: true });
        const reply = await within((async () => {
          while (replies.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
          return replies.shift() as AmMessage;
        })(), 5000, 'the AM echo');
        assert.deepEqual([...reply.header], [i]);
        assert.equal(firstMismatch(reply.data ?? new Uint8Array(0), pattern(i, 100)), -1);
        // Stream bytes (over the lane) echoed by this connection's peer Endpoint.
        const data = pattern(1000 + i, 4096);
        const back = new Uint8Array(data.length);
        const receive = endpoint.streamRecv(back, { waitAll: true });
        await endpoint.streamSend(data);
        await receive;
        assert.equal(firstMismatch(back, data), -1);
        if (i % 2 === 1) {
          // Every other time the listener closes first: it releases the lane, the client stops using it.
          await peer.call({ type: 'close-last' }, 'closed-last');
          await within(new Promise<void>((resolve) => (endpoint.closed ? resolve() : endpoint.once('close', () => resolve()))), 5000, 'the close by the peer');
        }
        await endpoint.close();
        if (i === 1) baseline = { own: sharedMappings(), peer: (await peer.call({ type: 'shm-maps' }, 'shm-maps'))['count'] as number };
      }
      assert.equal(replies.length, 0, 'no stray AM reply');
      assert.ok(baseline !== undefined);
      assert.equal(sharedMappings(), baseline.own, 'this process maps no more shared memory after 28 more connections');
      assert.equal((await peer.call({ type: 'shm-maps' }, 'shm-maps'))['count'], baseline.peer, 'neither does the listener');
    } finally {
      worker.setAmHandler(2, null);
      assert.equal(await peer.stop(), 0, peer.stderr);
    }
  });

  test('stream bytes take the lane: 16 MiB echoed moves next to nothing over IP (all of it over TCP without the lane)', async () => {
    // The IP layer's byte count of this network namespace (loopback included); shared memory and CMA
    // are not in it. Other traffic of the machine only adds to it.
    const ipBytes = (): number => {
      const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n').filter((line) => line.startsWith('IpExt:'));
      const names = (lines[0] ?? '').trim().split(/\s+/);
      return Number((lines[1] ?? '').trim().split(/\s+/)[names.indexOf('OutOctets')]);
    };
    const size = 16 << 20;
    for (const fastLane of [true, false]) {
      const peer = Peer.start('echo-peer');
      try {
        const { port } = await peer.next('ready');
        const endpoint = await worker.connect('127.0.0.1', port as number, { errorHandling: 'peer', fastLane });
        assert.equal(endpoint.fastLane, fastLane);
        const data = pattern(fastLane ? 11 : 12, size);
        const back = new Uint8Array(size);
        const before = ipBytes();
        const receive = endpoint.streamRecv(back, { waitAll: true });
        for (let offset = 0; offset < size; offset += 1 << 20) endpoint.streamSend(data.subarray(offset, offset + (1 << 20)));
        assert.equal(await receive, size);
        const moved = ipBytes() - before;
        assert.equal(firstMismatch(back, data), -1);
        if (fastLane) assert.ok(moved < 4 << 20, `${moved} bytes over IP while 16 MiB went each way over the lane`);
        else assert.ok(moved >= 2 * size, `${moved} bytes over IP while 16 MiB went each way over TCP`);
        await endpoint.close();
      } finally {
        assert.equal(await peer.stop(), 0, peer.stderr);
      }
    }
  });

  test('stream bytes sent right before a close reach the peer, and the next connection on the reused lane gets none of them (either side closing, sends completed or not)', async () => {
    // Two workers of this process: the lane between them is reused as between two processes.
    const serverContext = new Context();
    const server = serverContext.createWorker();
    const accepted: Endpoint[] = [];
    const listener = server.listen({ host: '127.0.0.1', port: 0 }, (endpoint) => accepted.push(endpoint));
    const nextAccepted = (): Promise<Endpoint> => within((async () => {
      while (accepted.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
      return accepted.shift() as Endpoint;
    })(), 5000, 'the accepted endpoint');
    try {
      for (let round = 0; round < 6; round++) {
        const client = await worker.connect('127.0.0.1', listener.port, { errorHandling: 'peer' });
        const served = await nextAccepted();
        assert.equal(client.fastLane, true);
        assert.equal(served.fastLane, true);
        const [sender, receiver] = round % 2 === 0 ? [client, served] : [served, client];
        // 40 pieces of 1-100 KiB, then the sender closes: after they completed (the lane is released
        // and idles), or at once (sends in flight: the lane is closed on both sides).
        const pieces = Array.from({ length: 40 }, (_, i) => pattern(round * 100 + i, 1024 * (1 + ((i * 37) % 100))));
        const total = pieces.reduce((sum, piece) => sum + piece.byteLength, 0);
        const sends = pieces.map((piece) => sender.streamSend(piece).promise);
        if (round < 4) await Promise.all(sends);
        else for (const send of sends) send.catch(() => undefined);
        // Nothing is received before the close is done: the bytes wait on the lane while it is released.
        await sender.close();
        const back = new Uint8Array(total);
        assert.equal(await within(receiver.streamRecv(back, { waitAll: true }).promise, 10_000, 'the stream before the close'), total);
        let offset = 0;
        for (const piece of pieces) {
          assert.equal(firstMismatch(back.subarray(offset, offset + piece.byteLength), piece), -1, `round ${round}: piece at ${offset}`);
          offset += piece.byteLength;
        }
        await receiver.close();
        // The next connection takes the same lane: only its own bytes arrive.
        const again = await worker.connect('127.0.0.1', listener.port, { errorHandling: 'peer' });
        const peerAgain = await nextAccepted();
        assert.equal(again.fastLane, true);
        const hello = pattern(round + 7000, 100);
        await again.streamSend(hello);
        const first = new Uint8Array(200);
        const n = await peerAgain.streamRecv(first);
        assert.equal(firstMismatch(first.subarray(0, n), hello.subarray(0, n)), -1, 'the next connection starts with its own bytes');
        await again.close();
        await peerAgain.close();
      }
    } finally {
      listener.close();
      await serverContext.close();
    }
  });

  test('the client turns it off: it declines the offer at once, and both use the PEER connection', async () => {
    await expectNoLane(worker, {}, { fastLane: false }, 3);
  });

  test('the listener turns it off: the connect does not wait for an offer', async () => {
    await expectNoLane(worker, { fastLane: false }, {}, 4);
  });

  test('a client without the am feature gets no offer (it could not answer): handed out at once, over TCP', async () => {
    // An offer would go unanswered (UCX would warn about an AM without a handler), for the listener's 2 s.
    const plain = new Context({ features: ['tag', 'wakeup'] });
    try {
      await expectNoLane(plain.createWorker(), {}, {}, null);
    } finally {
      await plain.close();
    }
  });

  test('a bad fastLane option is a typed error', async () => {
    await assert.rejects(worker.connect('127.0.0.1', 1, { fastLane: 'yes' as never }), { code: 'UCXX_ERR_INVALID_ARG' });
    assert.throws(() => worker.listen({ port: 0, fastLane: 1 as never }), { code: 'UCXX_ERR_INVALID_ARG' });
  });

  test('a stopped peer (SIGSTOP): a fetching atomic and a get on the lane fail typed within failureTimeout, and the survivor closes cleanly', async () => {
    const BOUND = 2000;
    const survivor = new Context({ failureTimeout: BOUND });
    const own = survivor.createWorker();
    const peer = Peer.start('echo-peer');
    try {
      const endpoint = await connectOverLane(own, peer);
      const keyBytes = new Uint8Array(512);
      const keyReceived = endpoint.tagRecv(keyBytes, 2n);
      const other = endpoint.tagRecv(new Uint8Array(512), 1n);
      await peer.call({ type: 'send-keys' }, 'keys-sent');
      const key = createRemoteKeyFromSerialized(endpoint, keyBytes.subarray(0, (await keyReceived).length));
      await other;
      // Registered memory: the atomics are UCX's software ones, which the peer's progress must answer.
      assert.equal(await endpoint.fetchAdd(key, 0, 1), 0);
      const events: string[] = [];
      endpoint.once('error', () => events.push('error'));
      const closed = new Promise<void>((resolve) => endpoint.once('close', () => { events.push('close'); resolve(); }));
      peer.child.kill('SIGSTOP');
      const stoppedAt = Date.now();
      const atomic = endpoint.fetchAdd(key, 0, 1);
      const get = endpoint.memGet(new Uint8Array(4), key, 0);
      const receive = endpoint.tagRecv(new Uint8Array(8), 79n);
      await assert.rejects(within(atomic.promise, BOUND + 8000, 'the atomic fails'), (err: unknown) => err instanceof UcxError);
      const detected = Date.now() - stoppedAt;
      assert.ok(detected >= BOUND - 500 && detected <= BOUND + 3000, `detected after ${detected} ms (failureTimeout ${BOUND})`);
      await assert.rejects(get.promise, (err: unknown) => err instanceof UcxError, 'the get fails with a UcxError');
      await within(closed, 5000, 'the endpoint closes');
      assert.deepEqual(events, ['error', 'close']);
      await assert.rejects(receive.promise, (err: unknown) => err instanceof Error);
      await within(survivor.close(), 15_000, "the survivor's context closes");
    } finally {
      await survivor.close();
      peer.child.kill('SIGCONT');
      if (peer.child.exitCode === null && peer.child.signalCode === null) peer.child.kill('SIGKILL');
    }
  });

  for (const how of ['SIGSTOP', 'SIGKILL'] as const) {
    test(`a peer ${how === 'SIGSTOP' ? 'stopped' : 'killed'} just before the close: the lane's release gets no answer, the close completes in bounded time, and the survivor closes cleanly`, async () => {
      const survivor = new Context();
      const own = survivor.createWorker();
      const peer = Peer.start('echo-peer');
      try {
        const endpoint = await connectOverLane(own, peer);
        await echo(own, endpoint, 64 << 10, 9);
        endpoint.on('error', () => undefined);
        peer.child.kill(how);
        const started = Date.now();
        // flush, BYE and BYE_ACK wait 2 s each at most; then the PEER endpoint's close (closeTimeout 5 s).
        await within(endpoint.close(), 15_000, 'the close');
        const took = Date.now() - started;
        assert.ok(took < 12_000, `closed after ${took} ms`);
        assert.equal(endpoint.closed, true);
        await within(survivor.close(), 15_000, "the survivor's context closes");
      } finally {
        await survivor.close();
        peer.child.kill('SIGCONT');
        if (peer.child.exitCode === null && peer.child.signalCode === null) peer.child.kill('SIGKILL');
      }
    });
  }

  test('a killed peer: operations on the lane fail typed, the endpoint closes, and the survivor closes cleanly', async () => {
    const survivor = new Context();
    const own = survivor.createWorker();
    const peer = Peer.start('echo-peer');
    try {
      const endpoint = await connectOverLane(own, peer);
      await echo(own, endpoint, 8, 5);
      const closed = new Promise<void>((resolve) => endpoint.once('close', () => resolve()));
      // A rendezvous send nobody receives (the peer echoes only tags >= 2^63) and a receive: both wait.
      const send = endpoint.tagSend(pattern(6, 4 << 20), 77n);
      const receive = endpoint.tagRecv(new Uint8Array(8), 78n);
      peer.child.kill('SIGKILL');
      await within(closed, survivor.failureTimeout + 10_000, 'the endpoint closes after its peer was killed');
      await assert.rejects(send.promise, (err: unknown) => err instanceof UcxError, 'the send fails with a UcxError');
      await assert.rejects(receive.promise, (err: unknown) => err instanceof Error);
      await within(survivor.close(), 15_000, "the survivor's context closes");
    } finally {
      await survivor.close();
      if (peer.child.exitCode === null && peer.child.signalCode === null) peer.child.kill('SIGKILL');
    }
  });
});
