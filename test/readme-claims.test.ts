/**
 * README claims that had no test of their own: one-sided access while the owner runs nothing, fence and
 * tag ordering, the tag mask, busyPollUs defaults, stream cancellation without data loss, the AM
 * protocol option, release and rejection of rendezvous active messages, the failure classes on one host.
 * Every wait has a deadline of seconds.
 */
import { describe, test } from 'node:test';
import { strict as assert } from 'node:assert';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import {
  CanceledError, ConnectionResetError, Context, EndpointTimeoutError, InvalidStateError, IoError, RejectedError, TimedOutError,
  UcxError, createRemoteKeyFromSerialized, getUcxVersion, type AmMessage, type Endpoint, type Worker,
} from 'ucxx-ts';
import { ucxProfileOfRun } from './helpers/env.js';
import { Peer } from './helpers/peer.js';
import { firstMismatch, pattern } from './helpers/pattern.js';
import { eventually, sleep, within } from './helpers/deadline.js';

/** A listener and a connected endpoint on two workers of one context: both ends of one connection. */
async function connectedPair(context: Context, options: Parameters<Context['createWorker']>[0] = {}): Promise<{
  server: Worker; client: Worker; serverEndpoint: Endpoint; clientEndpoint: Endpoint; close: () => Promise<void>;
}> {
  const server = context.createWorker(options);
  const client = context.createWorker(options);
  let accepted!: (ep: Endpoint) => void;
  const acceptedPromise = new Promise<Endpoint>((resolve) => { accepted = resolve; });
  const listener = server.listen({ host: '127.0.0.1', port: 0 }, (ep) => accepted(ep));
  const clientEndpoint = await within(client.connect('127.0.0.1', listener.port), 5000, 'connect');
  const serverEndpoint = await within(acceptedPromise, 5000, 'the accepted endpoint');
  return {
    server, client, serverEndpoint, clientEndpoint,
    close: async () => {
      listener.close();
      await clientEndpoint.close();
      await serverEndpoint.close();
    },
  };
}

/** Connects to a peer that sends its region's key as tag 1. */
async function connectForKey(worker: Worker, port: number, options?: { errorHandling?: 'peer' | 'none' | 'auto' }) {
  const endpoint = await within(worker.connect('127.0.0.1', port, options), 5000, 'connect to the peer');
  const buffer = new Uint8Array(512);
  const info = await within(endpoint.tagRecv(buffer, 1n), 5000, "the peer's key");
  return { endpoint, key: createRemoteKeyFromSerialized(endpoint, buffer.subarray(0, info.length)) };
}

describe('memory kinds', () => {
  // The README's claim is for NONE mode (the default on one host on 1.13; named here, as on 1.19+ the
  // default is PEER, where RMA goes over TCP and needs the owner's progress).
  test('UCX-allocated memory is reached one-sided (NONE mode): puts and gets complete while the owner is SIGSTOPped', async () => {
    const peer = Peer.start('rma-target', { kind: 'allocated', size: 1 << 20 });
    try {
      const ready = await peer.next('ready', 10_000);
      await using context = new Context();
      const worker = context.createWorker();
      const { endpoint, key } = await connectForKey(worker, ready['port'] as number, { errorHandling: 'none' });
      await within(peer.next('key-sent', 5000), 5000, 'key-sent');
      assert.ok(peer.child.kill('SIGSTOP'));
      await sleep(50); // the owner is stopped: nothing of it runs from here on
      const data = pattern(77, 64 << 10);
      await within(endpoint.memPut(data, key, 4096), 3000, 'memPut into a stopped owner');
      await within(endpoint.flush(), 3000, 'flush with a stopped owner');
      const back = new Uint8Array(data.length);
      await within(endpoint.memGet(back, key, 4096), 3000, 'memGet from a stopped owner');
      await within(endpoint.flush(), 3000, 'flush after the get');
      assert.equal(firstMismatch(back, data), -1, 'the get returns what the put wrote');
      assert.ok(peer.child.kill('SIGCONT'));
      const verified = await peer.call({ type: 'verify', offset: 4096, length: data.length, seed: 77 }, 'verified', 5000);
      assert.equal(verified['mismatch'], -1, 'the owner sees the bytes once it runs again');
    } finally {
      peer.child.kill('SIGCONT');
      assert.equal(await peer.stop(5000), 0, peer.stderr);
    }
  });
});

describe('ordering', () => {
  // The fence tests prove the claim holds here, and that the watcher catches B ahead of A (putting B
  // first makes it report thousands of violations). They cannot catch a missing fence on this host:
  // shared-memory puts of one worker land in issue order anyway (a no-op fence() passes too). NONE mode:
  // the watcher spins on the region, so only one-sided puts (not PEER mode's TCP, which the owner's
  // progress serves) can land while it watches.
  for (const which of ['endpoint', 'worker', 'atomic'] as const) {
    const first = which === 'atomic' ? 'atomic add to A; endpoint.fence()' : `put A; ${which}.fence()`;
    test(`${first}; put B: the target never sees B without A (20,000 rounds, watched as they land)`, async () => {
      const peer = Peer.start('fence-watcher');
      try {
        const ready = await peer.next('ready', 10_000);
        await using context = new Context();
        const worker = context.createWorker();
        const { endpoint, key } = await connectForKey(worker, ready['port'] as number, { errorHandling: 'none' });
        const rounds = 20_000;
        const values = Array.from({ length: rounds + 1 }, (_, i) => new Uint32Array([i]));
        await peer.call({ type: 'watch', rounds, limitMs: 20_000 }, 'watching', 5000);
        const watched = peer.next('watched', 30_000);
        const fence = which === 'worker' ? () => worker.fence() : () => endpoint.fence();
        for (let i = 1; i <= rounds; i++) {
          const a = which === 'atomic'
            ? endpoint.atomic('add', key, 0, 1, { width: 32 }) // A = i after round i
            : endpoint.memPut(values[i] as Uint32Array, key, 0);
          fence();
          const b = endpoint.memPut(values[i] as Uint32Array, key, 64);
          if (!a.completed || !b.completed || (i & 255) === 0) await within(Promise.all([a, b]), 5000, `round ${i}`);
        }
        await within(endpoint.flush(), 5000, 'flush');
        const result = await watched;
        assert.equal(result['lastB'], rounds, `the watcher saw every round: ${JSON.stringify(result)}`);
        assert.equal(result['violations'], 0, `B seen without A: ${JSON.stringify(result)}`);
        // It watched while they landed (on a loaded machine it is descheduled for long stretches).
        assert.ok((result['changes'] as number) > 2, `the watcher saw the puts only after they landed: ${JSON.stringify(result)}`);
      } finally {
        assert.equal(await peer.stop(5000), 0, peer.stderr);
      }
    });
  }

  test('tag messages of two endpoints to one worker: each endpoint\'s arrive in the order it sent them (eager and rendezvous)', async () => {
    await using context = new Context();
    const target = context.createWorker();
    const senders = [context.createWorker(), context.createWorker()];
    const endpoints = senders.map((w) => w.connectToAddress(target.getAddress()));
    const perSender = 150;
    const tag = 0x7a9n;
    const sizeOf = (seq: number): number => (seq % 3 === 2 ? 96 << 10 : 16 + seq); // every third is rendezvous
    const sends: PromiseLike<void>[] = [];
    for (let seq = 0; seq < perSender; seq++) {
      for (const [id, endpoint] of endpoints.entries()) {
        const message = new Uint8Array(sizeOf(seq)).fill(0x5a);
        new DataView(message.buffer).setUint32(0, id, true);
        new DataView(message.buffer).setUint32(4, seq, true);
        sends.push(endpoint.tagSend(message, tag));
      }
    }
    const buffer = new Uint8Array(128 << 10);
    const next = [0, 0];
    for (let n = 0; n < 2 * perSender; n++) {
      const info = await within(target.tagRecv(buffer, tag), 5000, `message ${n}`);
      const view = new DataView(buffer.buffer);
      const id = view.getUint32(0, true);
      const seq = view.getUint32(4, true);
      assert.ok(id === 0 || id === 1, `sender id ${id}`);
      assert.equal(seq, next[id], `endpoint ${id}: message ${seq} matched where ${String(next[id])} was due`);
      assert.equal(info.length, sizeOf(seq));
      next[id] = seq + 1;
    }
    await within(Promise.all(sends), 5000, 'the sends');
    assert.deepEqual(next, [perSender, perSender]);
    for (const endpoint of endpoints) await endpoint.close();
  });
});

describe('tag mask', () => {
  test('a receive with a mask matches exactly the tags whose masked bits equal the tag\'s', async () => {
    await using context = new Context();
    const target = context.createWorker();
    const sender = context.createWorker();
    const endpoint = sender.connectToAddress(target.getAddress());
    const tag = 0xab00_0000_0000_1200n;
    const mask = 0xff00_0000_0000_ff00n;
    const cases: [bigint, boolean][] = [
      [0xab00_0000_0000_1200n, true], [0xab12_3456_789a_12ffn, true], [0xabff_ffff_ffff_1201n, true],
      [0xab00_0000_0000_1300n, false], [0xaa00_0000_0000_1200n, false], [0x2b00_0000_0000_1200n, false],
      [0x0000_0000_0000_1200n, false], [0xab00_0000_0000_0200n, false],
    ];
    // The non-matching ones are sent first: a receive that ignored the mask would take one of them.
    const order = [...cases.filter(([, m]) => !m), ...cases.filter(([, m]) => m)];
    for (const [t] of order) await within(endpoint.tagSend(new BigUint64Array([t]), t), 5000, 'send');
    const buffer = new BigUint64Array(1);
    const matched: bigint[] = [];
    for (let i = 0; i < cases.filter(([, m]) => m).length; i++) {
      const info = await within(target.tagRecv(buffer, tag, mask), 5000, `masked receive ${i}`);
      assert.equal(buffer[0], info.senderTag, 'the payload is the tag it was sent with');
      matched.push(info.senderTag);
    }
    assert.deepEqual(matched, cases.filter(([, m]) => m).map(([t]) => t), 'matched in send order, and only these');
    // Nothing else matches the mask; the others are all still there, each under its own tag.
    assert.equal(target.tagProbe(tag, mask), null, 'a non-matching tag was taken by the masked receive');
    for (const [t] of cases.filter(([, m]) => !m)) {
      const info = await within(target.tagRecv(buffer, t), 5000, `exact receive of ${t.toString(16)}`);
      assert.equal(info.senderTag, t);
    }
    // Mask 0 matches anything; a full mask only the tag itself.
    await endpoint.tagSend(new Uint8Array(1), 0x1234n);
    assert.equal((await within(target.tagRecv(new Uint8Array(1), 0xffffn, 0n), 5000, 'mask 0')).senderTag, 0x1234n);
    await endpoint.tagSend(new Uint8Array(1), 0x1235n);
    assert.equal(target.tagProbe(0x1234n), null);
    assert.equal((await within(target.tagRecv(new Uint8Array(1), 0x1235n), 5000, 'full mask')).senderTag, 0x1235n);
    await endpoint.close();
  });
});

describe('busyPollUs defaults', () => {
  /** Progress passes a worker runs in the 15 ms after a receive completes, averaged over 20 rounds. */
  async function passesAfterActivity(context: Context, options: Parameters<Context['createWorker']>[0]): Promise<number> {
    const worker = context.createWorker(options);
    const sender = context.createWorker(options);
    const endpoint = sender.connectToAddress(worker.getAddress());
    await sleep(50);
    // The median of 20: on a loaded machine one round can be preempted mid-grace and count anything.
    const counts: number[] = [];
    for (let i = 0; i < 20; i++) {
      const receive = worker.tagRecv(new Uint8Array(8), 7n);
      await within(endpoint.tagSend(new Uint8Array(8), 7n), 5000, 'send');
      await within(receive, 5000, 'receive');
      const start = worker.progressCount;
      await sleep(15);
      counts.push(worker.progressCount - start);
    }
    await endpoint.close();
    worker.close();
    sender.close();
    counts.sort((a, b) => a - b);
    return ((counts[9] as number) + (counts[10] as number)) / 2;
  }

  test("'event' polls briefly after activity (default 50 us, as short as busyPollUs: 50), 'polling' for long (1 ms)", async (t) => {
    await using context = new Context();
    const eventDefault = await passesAfterActivity(context, { progressMode: 'event' });
    const event50 = await passesAfterActivity(context, { progressMode: 'event', busyPollUs: 50 });
    const event1000 = await passesAfterActivity(context, { progressMode: 'event', busyPollUs: 1000 });
    const pollingDefault = await passesAfterActivity(context, { progressMode: 'polling' });
    const polling50 = await passesAfterActivity(context, { progressMode: 'polling', busyPollUs: 50 });
    const polling1000 = await passesAfterActivity(context, { progressMode: 'polling', busyPollUs: 1000 });
    t.diagnostic(`passes after activity: event ${eventDefault} (50: ${event50}, 1000: ${event1000}); ` +
      `polling ${pollingDefault} (50: ${polling50}, 1000: ${polling1000})`);
    // A 1 ms grace runs thousands of passes; 50 us about 260 (a floor: the engine reads the clock once
    // per 256 empty calls, so counts move in steps of 128-256). Ratios, not absolute counts: a busy
    // machine slows every pass alike. Medians here: 15x on UCX 1.13.1, 3-5x on 1.20.1, whose progress
    // calls cost more.
    assert.ok(event1000 > 2 * event50, `busyPollUs 1000 vs 50 is not measurable here: ${event1000} vs ${event50}`);
    assert.ok(eventDefault * 2 < event1000, `'event' default polls like 1000 us: ${eventDefault} vs ${event1000}`);
    assert.ok(eventDefault < 3 * event50 + 5, `'event' default polls longer than 50 us: ${eventDefault} vs ${event50}`);
    assert.ok(pollingDefault > 2 * polling50, `'polling' default polls like 50 us: ${pollingDefault} vs ${polling50}`);
    assert.ok(pollingDefault > polling1000 / 5 && pollingDefault < polling1000 * 5,
      `'polling' default is not ~1000 us: ${pollingDefault} vs ${polling1000}`);
  });
});

describe('stream cancellation', () => {
  for (const how of ['abort', 'cancel'] as const) {
    test(`a stream receive cancelled (${how}) while waiting loses no data: the next streamRecv gets every byte, in order`, async () => {
      await using context = new Context();
      const pair = await connectedPair(context);
      const receiver = pair.clientEndpoint;
      const sender = pair.serverEndpoint;
      // Endpoints read their stream ahead until the first streamRecv, whose bytes come from that
      // read-ahead: a first exchange ends it, so the receive cancelled below is the one UCX holds.
      const first = pattern(1, 1);
      await within(sender.streamSend(first), 5000, 'the first streamSend');
      const firstBack = new Uint8Array(1);
      await within(receiver.streamRecv(firstBack, { waitAll: true }), 5000, 'the first streamRecv');
      assert.equal(firstMismatch(firstBack, first), -1);
      const controller = new AbortController();
      const waiting = receiver.streamRecv(new Uint8Array(4096), { signal: controller.signal });
      await sleep(20);
      if (how === 'abort') controller.abort();
      else waiting.cancel();
      await assert.rejects(within(waiting, 2000, 'the cancelled receive'), CanceledError);
      const data = pattern(3, 10_000);
      await within(sender.streamSend(data), 5000, 'streamSend');
      const back = new Uint8Array(data.length);
      const n = await within(receiver.streamRecv(back, { waitAll: true }), 5000, 'the next streamRecv');
      assert.equal(n, data.length);
      assert.equal(firstMismatch(back, data), -1, 'bytes lost or reordered');
      // And the stream goes on.
      const more = pattern(4, 100);
      await sender.streamSend(more);
      const back2 = new Uint8Array(100);
      await within(receiver.streamRecv(back2, { waitAll: true }), 5000, 'a later streamRecv');
      assert.equal(firstMismatch(back2, more), -1);
      await pair.close();
    });
  }
});

describe('accepted endpoints read ahead', () => {
  for (const waitAll of [false, true]) {
    test(`bytes a client sent before the first streamRecv are there for it (waitAll: ${waitAll}), though nothing more comes`, async () => {
      await using context = new Context();
      const pair = await connectedPair(context);
      const data = pattern(5, 16);
      await within(pair.clientEndpoint.streamSend(data), 5000, 'streamSend');
      // Let the accepted endpoint's read-ahead take the bytes and post its next receive, which the
      // client never feeds: the first streamRecv must be served from what was read ahead.
      await eventually(() => pair.serverEndpoint.streamBufferedBytes >= data.length, 5000);
      assert.equal(pair.serverEndpoint.streamBufferedBytes, data.length, 'the read-ahead did not take the bytes');
      const back = new Uint8Array(waitAll ? data.length : 64);
      const n = await within(pair.serverEndpoint.streamRecv(back, { waitAll }), 2000, 'the first streamRecv');
      assert.equal(n, data.length);
      assert.equal(firstMismatch(back.subarray(0, n), data), -1);
      // The stream goes on after it.
      const more = pattern(6, 5000);
      await within(pair.clientEndpoint.streamSend(more), 5000, 'a second streamSend');
      const back2 = new Uint8Array(more.length);
      await within(pair.serverEndpoint.streamRecv(back2, { waitAll: true }), 5000, 'a later streamRecv');
      assert.equal(firstMismatch(back2, more), -1);
      await pair.close();
    });
  }
});

describe('active messages', () => {
  /** Sends one AM and returns what the handler saw, and the send's outcome. */
  async function amOnce(
    handler: (msg: AmMessage) => void | Promise<void>,
    send: (ep: Endpoint) => PromiseLike<void>,
  ): Promise<{ seen: AmMessage; sent: unknown }> {
    await using context = new Context();
    const target = context.createWorker();
    const sender = context.createWorker();
    const endpoint = sender.connectToAddress(target.getAddress());
    let seen!: (m: AmMessage) => void;
    const seenPromise = new Promise<AmMessage>((resolve) => { seen = resolve; });
    // The handler's own promise too: the sender may complete before an awaited msg.receive() resumes.
    let handled: Promise<void> = Promise.resolve();
    target.setAmHandler(9, (msg) => {
      seen(msg);
      const result = handler(msg);
      handled = Promise.resolve(result);
      return result;
    });
    const sent = await within(Promise.resolve(send(endpoint)).then(() => 'completed', (e: unknown) => e), 5000, 'the amSend');
    const message = await within(seenPromise, 2000, 'the handler');
    await within(handled, 2000, 'the handler to settle');
    return { seen: message, sent };
  }

  for (const [protocol, size, rendezvous] of [
    ['rendezvous', 16, true], ['rendezvous', 1 << 20, true], ['eager', 16, false], ['eager', 256 << 10, false],
  ] as const) {
    test(`protocol '${protocol}' with ${size} B arrives with msg.rendezvous === ${rendezvous}, data intact`, async () => {
      const data = pattern(size, size);
      let received: Uint8Array | undefined;
      const { seen, sent } = await amOnce(async (msg) => {
        received = msg.rendezvous ? await msg.receive() : (msg.data as Uint8Array);
      }, (ep) => ep.amSend(9, Buffer.from('h'), data, { protocol }));
      assert.equal(sent, 'completed');
      assert.equal(seen.rendezvous, rendezvous);
      assert.equal(seen.length, size);
      await within(sleep(20), 100, 'settle');
      assert.ok(received !== undefined);
      assert.equal(firstMismatch(received, data), -1);
    });
  }

  test('a rendezvous message an async handler settles without receiving is released: the sender completes', async () => {
    const { seen, sent } = await amOnce(async () => {
      await sleep(10);
    }, (ep) => ep.amSend(9, Buffer.from('h'), new Uint8Array(1 << 20), { protocol: 'rendezvous' }));
    assert.equal(seen.rendezvous, true);
    assert.equal(sent, 'completed', `the sender's request: ${String(sent)}`);
  });

  test('a rendezvous message a sync handler drops is released once garbage-collected: the sender completes', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    await using context = new Context();
    const target = context.createWorker();
    const sender = context.createWorker();
    const endpoint = sender.connectToAddress(target.getAddress());
    let handled = 0;
    target.setAmHandler(9, (msg) => {
      handled += msg.rendezvous ? 1 : 0; // neither received nor rejected, and not kept
    });
    const sent = Promise.resolve(endpoint.amSend(9, Buffer.from('h'), new Uint8Array(1 << 20), { protocol: 'rendezvous' }));
    let done = false;
    void sent.then(() => { done = true; }, () => { done = true; });
    const deadline = Date.now() + 5000;
    while (!done && Date.now() < deadline) {
      gc();
      await sleep(20);
    }
    assert.equal(handled, 1);
    await within(sent, 100, 'the rendezvous send whose message was collected');
    await endpoint.close();
  });

  test('receiving a rendezvous message twice, or after rejecting it, is an InvalidStateError (UCXX_ERR_INVALID_STATE)', async () => {
    const errors: unknown[] = [];
    const data = pattern(5, 64 << 10);
    let first: Uint8Array | undefined;
    const { seen, sent } = await amOnce(async (msg) => {
      first = await msg.receive();
      try {
        await msg.receive();
      } catch (err) {
        errors.push(err);
      }
    }, (ep) => ep.amSend(9, Buffer.from('h'), data, { protocol: 'rendezvous' }));
    assert.equal(seen.rendezvous, true);
    assert.equal(sent, 'completed');
    assert.ok(first !== undefined && firstMismatch(first, data) === -1, 'the first receive got the data');
    const rejected = await amOnce((msg) => {
      msg.reject();
      const late = msg.receive(); // refused at once: the Request has already failed
      if (late.completed && late.error !== undefined) errors.push(late.error);
    }, (ep) => ep.amSend(9, Buffer.from('h'), data, { protocol: 'rendezvous' }));
    assert.ok(rejected.sent instanceof RejectedError, String(rejected.sent));
    assert.equal(errors.length, 2, `errors: ${errors.map(String).join('; ')}`);
    for (const err of errors) {
      assert.ok(err instanceof InvalidStateError, `expected InvalidStateError, got ${String(err)}`);
      assert.equal(err.code, 'UCXX_ERR_INVALID_STATE');
      assert.match(err.message, /already received, rejected or released/);
    }
  });

  for (const [status, errorClass] of [[-3, IoError], [-20, TimedOutError], [-23, RejectedError]] as const) {
    test(`msg.reject(${status}) in the handler: the sender's request fails with ${errorClass.name} (status ${status})`, async () => {
      const { seen, sent } = await amOnce((msg) => {
        msg.reject(status);
      }, (ep) => ep.amSend(9, Buffer.from('h'), new Uint8Array(1 << 20), { protocol: 'rendezvous' }));
      assert.equal(seen.rendezvous, true);
      assert.ok(sent instanceof errorClass, `expected ${errorClass.name}, got ${String(sent)}`);
      assert.equal((sent as UcxError).status, status);
    });
  }
});

describe('failures on one host', () => {
  // PEER mode: UCX 1.13 reports the killed peer as an endpoint timeout on one host (a reset elsewhere).
  const peerKilled = [EndpointTimeoutError, ConnectionResetError];
  // NONE mode: ucxx-ts sees the connection reset.
  const noneKilled = [ConnectionResetError];
  const cases = [
    // The default: PEER from 1.19 on, NONE on one host on 1.13.
    { signal: 'SIGKILL', errorHandling: undefined, expected: ucxProfileOfRun(getUcxVersion()).defaultErrorMode === 'peer' ? peerKilled : noneKilled },
    { signal: 'SIGKILL', errorHandling: 'peer', expected: peerKilled },
    { signal: 'SIGKILL', errorHandling: 'none', expected: noneKilled },
    // A stopped peer resets nothing: only failureTimeout can notice it.
    { signal: 'SIGSTOP', errorHandling: 'peer', expected: [EndpointTimeoutError] },
  ] as const;
  for (const { signal, errorHandling, expected } of cases) {
    const names = expected.map((c) => c.name).join(' or ');
    const what = signal === 'SIGKILL' ? 'killed' : 'stopped past failureTimeout';
    test(`a peer ${what} (${errorHandling ?? 'default'} error handling): 'error' is ${names}, pending operations reject, 'close' follows`, async () => {
      const failureTimeout = 1500;
      const peer = Peer.start('rma-target', { kind: 'registered', size: 1 << 20 });
      try {
        const ready = await peer.next('ready', 10_000);
        await using context = new Context({ failureTimeout });
        const worker = context.createWorker();
        const { endpoint, key } = await connectForKey(worker, ready['port'] as number, errorHandling === undefined ? {} : { errorHandling });
        const errorEvent = new Promise<unknown>((resolve) => endpoint.once('error', resolve));
        const closeEvent = new Promise<void>((resolve) => endpoint.once('close', resolve));
        const receive = endpoint.tagRecv(new Uint8Array(8), 99n);
        const started = Date.now();
        assert.ok(peer.child.kill(signal));
        const get = Promise.resolve(endpoint.memGet(new Uint8Array(1 << 20), key, 0)).then(() => 'completed', (e: unknown) => e);
        const error = await within(errorEvent, failureTimeout + 5000, "the endpoint's 'error'");
        const noticedMs = Date.now() - started;
        assert.ok(expected.some((c) => error instanceof c), `expected ${names}, got ${String(error)}`);
        const status = (error as UcxError).status;
        assert.equal((error as UcxError).code, status === -80 ? 'UCS_ERR_ENDPOINT_TIMEOUT' : 'UCS_ERR_CONNECTION_RESET');
        if (signal === 'SIGSTOP') {
          assert.ok(noticedMs >= failureTimeout / 2, `noticed after ${noticedMs} ms, before failureTimeout could expire`);
        }
        const got = await within(get, 5000, 'the pending get');
        assert.ok(got instanceof UcxError, `the get: ${String(got)}`);
        assert.equal((got as UcxError).status, status, 'the pending get fails with the same status');
        await assert.rejects(within(receive, 5000, 'the pending receive'), CanceledError);
        await within(closeEvent, 5000, "the endpoint's 'close'");
      } finally {
        peer.child.kill('SIGKILL');
        await within(peer.exited, 5000, 'the peer exits');
      }
    });
  }
});

describe('memory you register', () => {
  const SIZE = 64 << 10;
  const kinds: [string, () => { buffer: ArrayBuffer | SharedArrayBuffer | ArrayBufferView; bytes: Uint8Array }][] = [
    ['ArrayBuffer', () => { const b = new ArrayBuffer(SIZE); return { buffer: b, bytes: new Uint8Array(b) }; }],
    ['SharedArrayBuffer', () => { const b = new SharedArrayBuffer(SIZE); return { buffer: b, bytes: new Uint8Array(b) }; }],
    ['Uint32Array', () => { const b = new Uint32Array(SIZE / 4); return { buffer: b, bytes: new Uint8Array(b.buffer) }; }],
    ['DataView (at an offset)', () => {
      const b = new ArrayBuffer(SIZE + 256);
      return { buffer: new DataView(b, 256, SIZE), bytes: new Uint8Array(b, 256, SIZE) };
    }],
    ['Buffer', () => { const b = Buffer.alloc(SIZE); return { buffer: b, bytes: new Uint8Array(b.buffer, b.byteOffset, b.length) }; }],
  ];
  for (const [name, make] of kinds) {
    test(`${name}: a peer's memPut lands in your memory, its memGet reads it; view() is that memory`, async () => {
      await using context = new Context();
      const owner = context.createWorker();
      const initiator = context.createWorker();
      const endpoint = initiator.connectToAddress(owner.getAddress());
      const { buffer, bytes } = make();
      const region = context.createMemoryHandle(SIZE, buffer);
      assert.equal(region.getSize(), SIZE);
      assert.equal(region.getMemoryType(), 0); // UCS_MEMORY_TYPE_HOST
      const key = createRemoteKeyFromSerialized(endpoint, region.createRemoteKey().serialize());
      const data = pattern(21, 4096);
      await within(endpoint.memPut(data, key, 1000), 5000, 'memPut');
      await within(endpoint.flush(), 5000, 'flush');
      assert.equal(firstMismatch(bytes.subarray(1000, 1000 + data.length), data), -1, 'the put is in the user buffer');
      bytes.set(pattern(22, 512), 9000);
      const back = new Uint8Array(512);
      await within(endpoint.memGet(back, key, 9000), 5000, 'memGet');
      await within(endpoint.flush(), 5000, 'flush after get');
      assert.equal(firstMismatch(back, pattern(22, 512)), -1, 'the get reads the user buffer');
      const view = region.view();
      view[5] = 0xee;
      assert.equal(bytes[5], 0xee, 'view() aliases the registered memory');
      await endpoint.close();
    });
  }
});
