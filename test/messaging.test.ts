/**
 * Tag, stream and active messages between two processes, around UCX's eager/rendezvous switch, with
 * byte-exact checks; probe, truncation, multi-buffer, sync send, AM paths and handler errors,
 * cancellation and close with messages in flight.
 */
import { after, before, describe, test } from 'node:test';
import { strict as assert } from 'node:assert';
import {
  CanceledError, ClosedError, Context, InvalidStateError, MessageTruncatedError, RejectedError, UcxError, createEndpointDuplex,
  type Endpoint, type Worker,
  type AmMessage,
} from 'ucxx-ts';
import { Peer } from './helpers/peer.js';
import { connectToEchoPeer, echoPeerConfig, echoPeerConnected } from './helpers/fast-lane-variant.js';
import { firstMismatch, pattern } from './helpers/pattern.js';
import { failsAtOnce } from './helpers/fails-at-once.js';

const SIZES = [0, 1, 8 << 10, 64 << 10, 16 << 20];
const ECHO = 1n << 63n;

let peer: Peer;
let context: Context;
let worker: Worker;
let endpoint: Endpoint;
let port: number;

before(async () => {
  peer = Peer.start('echo-peer', echoPeerConfig());
  const ready = await peer.next('ready');
  port = ready['port'] as number;
  context = new Context();
  worker = context.createWorker();
  endpoint = await connectToEchoPeer(worker, port);
  await echoPeerConnected(peer);
});

after(async () => {
  await context.close();
  assert.equal(await peer.stop(), 0, peer.stderr);
});

describe('tag', () => {
  for (const size of SIZES) {
    test(`${size} B round trip, byte-exact, 64-bit tag preserved`, async () => {
      const tag = ECHO | 0x0123456789abcdefn | BigInt(size);
      const data = pattern(size + 1, size);
      const back = new Uint8Array(size);
      const receive = worker.tagRecv(back, tag);
      await endpoint.tagSend(data, tag);
      const info = await receive;
      assert.equal(info.length, size);
      assert.equal(info.senderTag, tag);
      assert.equal(firstMismatch(back, data), -1);
    });
  }

  test('results read synchronously with value; sends completed at once share one completed Request', async () => {
    const tag = ECHO | 91n;
    const back = new Uint8Array(8);
    const receive = worker.tagRecv(back, tag);
    assert.equal(receive.value, undefined); // still in flight
    const first = endpoint.tagSend(pattern(9, 8), tag);
    const second = endpoint.tagSend(pattern(10, 8), ECHO | 92n);
    // 8 B eager sends over shared memory complete inside the call: no object is made for them.
    assert.ok(first.completed && second.completed);
    assert.equal(first, second);
    assert.equal(first.status, 0);
    assert.equal(await first, undefined);
    const spare = new Uint8Array(8);
    await worker.tagRecv(spare, ECHO | 92n);
    assert.equal(firstMismatch(spare, pattern(10, 8)), -1);
    await receive;
    assert.deepEqual(receive.value, { length: 8, senderTag: tag });
    const truncated = worker.tagRecv(new Uint8Array(2), ECHO | 93n);
    await endpoint.tagSend(pattern(11, 64), ECHO | 93n);
    await truncated.catch(() => undefined);
    assert.throws(() => truncated.value, MessageTruncatedError);
  });

  test('request.promise is the native Promise of the operation: same value, same error', async () => {
    const tag = ECHO | 94n;
    const back = new Uint8Array(8);
    const receive = worker.tagRecv(back, tag);
    const promise = receive.promise;
    assert.ok(promise instanceof Promise);
    assert.equal(Object.getPrototypeOf(promise), Promise.prototype);
    assert.equal(receive.promise, promise); // made once
    await endpoint.tagSend(pattern(12, 8), tag);
    assert.deepEqual(await promise, { length: 8, senderTag: tag });
    assert.equal(firstMismatch(back, pattern(12, 8)), -1);
    // A completed send (the shared completed Request) resolves with undefined.
    assert.equal(await endpoint.tagSend(pattern(13, 8), ECHO | 95n).promise, undefined);
    await worker.tagRecv(new Uint8Array(8), ECHO | 95n).promise;
    // A failure rejects with the same typed error as awaiting the Request.
    const truncated = worker.tagRecv(new Uint8Array(2), ECHO | 96n);
    await endpoint.tagSend(pattern(14, 64), ECHO | 96n);
    await assert.rejects(truncated.promise, MessageTruncatedError);
    await assert.rejects(Promise.resolve(truncated), MessageTruncatedError);
    assert.equal(truncated.error, await truncated.promise.catch((e: unknown) => e));
  });

  test('a list of buffers is sent and received as one message (iov)', async () => {
    const tag = ECHO | 77n;
    const parts = [pattern(1, 10), pattern(2, 70000), pattern(3, 1)];
    const into = [new Uint8Array(5), new Uint8Array(70006)];
    const receive = worker.tagRecv(into, tag);
    await endpoint.tagSend(parts, tag);
    const info = await receive;
    assert.equal(info.length, 70011);
    const joined = Buffer.concat([into[0] as Uint8Array, into[1] as Uint8Array]);
    assert.equal(firstMismatch(joined, Buffer.concat(parts)), -1);
  });

  test('numbers are accepted as tags; bad tags are RangeError/TypeError', async () => {
    failsAtOnce(() => endpoint.tagSend(new Uint8Array(1), -1), RangeError);
    failsAtOnce(() => endpoint.tagSend(new Uint8Array(1), 2n ** 64n), RangeError);
    failsAtOnce(() => endpoint.tagSend(new Uint8Array(1), 'x' as never), TypeError);
    const receive = worker.tagRecv(new Uint8Array(4), 1000);
    await peer.call({ type: 'send-tag', size: 4, tag: '1000', seed: 1 }, 'sent');
    assert.equal((await receive).senderTag, 1000n);
  });

  test('probe finds a message of unknown size, which is then received into a buffer of that size', async () => {
    // 12 KiB goes by rendezvous: the peer's send completes only once we receive, so do not wait for it.
    const sent = peer.call({ type: 'send-tag', size: 12345, tag: '4242', seed: 9 }, 'sent');
    let probe = worker.tagProbe(4242n, undefined, { remove: true });
    for (let i = 0; probe === null && i < 500; i++) {
      await new Promise((resolve) => setTimeout(resolve, 2));
      probe = worker.tagProbe(4242n, undefined, { remove: true });
    }
    assert.ok(probe !== null && probe.receive !== null);
    assert.equal(probe.length, 12345);
    assert.equal(probe.senderTag, 4242n);
    const buffer = new Uint8Array(probe.length);
    const info = await probe.receive(buffer);
    assert.equal(info.length, 12345);
    assert.equal(firstMismatch(buffer, pattern(9, 12345)), -1);
    assert.equal(worker.tagProbe(4242n), null, 'the message was removed');
    await sent;
  });

  test('a too-small receive buffer is MessageTruncatedError, and the next message is intact', async () => {
    const small = worker.tagRecv(new Uint8Array(10), 5001n);
    await peer.call({ type: 'send-tag', size: 100, tag: '5001', seed: 3 }, 'sent');
    // The error names both sizes: UCX reports the message's length in the receive info.
    await assert.rejects(Promise.resolve(small), (err: Error) => err instanceof MessageTruncatedError &&
      /message \(100 bytes\) is longer than the 10-byte buffer/.test(err.message));
    const next = new Uint8Array(100);
    const receive = worker.tagRecv(next, 5001n);
    await peer.call({ type: 'send-tag', size: 100, tag: '5001', seed: 4 }, 'sent');
    assert.equal((await receive).length, 100);
    assert.equal(firstMismatch(next, pattern(4, 100)), -1);
  });

  test('tagSendSync completes only once the receiver has matched the message', async () => {
    const sync = endpoint.tagSendSync(pattern(5, 64), 6001n);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(sync.completed, false, 'completed before the peer posted its receive');
    const received = await peer.call({ type: 'recv-tag', size: 64, tag: '6001' }, 'received');
    await sync;
    assert.equal(received['length'], 64);
  });
});

describe('stream', () => {
  for (const size of SIZES.filter((s) => s > 0)) {
    test(`${size} B echoed over the stream, waitAll, byte-exact`, async () => {
      const data = pattern(size + 7, size);
      const back = new Uint8Array(size);
      const receive = endpoint.streamRecv(back, { waitAll: true });
      await endpoint.streamSend(data);
      assert.equal(await receive, size);
      assert.equal(firstMismatch(back, data), -1);
    });
  }

  test('without waitAll a receive completes with what arrived; bytes stay in order', async () => {
    const data = pattern(11, 300000);
    await endpoint.streamSend(data);
    const got: Uint8Array[] = [];
    let total = 0;
    while (total < data.length) {
      const chunk = new Uint8Array(70000);
      const n = await endpoint.streamRecv(chunk);
      assert.ok(n >= 1 && n <= 70000);
      got.push(chunk.subarray(0, n));
      total += n;
    }
    assert.equal(total, data.length);
    assert.equal(firstMismatch(Buffer.concat(got), data), -1);
  });

  /** Takes stream bytes as they arrive (streamReadyEndpoints + streamRecvAvailable), exactly `total`. */
  async function takeAvailable(total: number, chunkSize: number): Promise<{ bytes: Buffer; sizes: number[] }> {
    const got: Uint8Array[] = [];
    const sizes: number[] = [];
    let taken = 0;
    const deadline = Date.now() + 20_000;
    while (taken < total) {
      assert.ok(Date.now() < deadline, `only ${taken} of ${total} bytes arrived`);
      for (const ready of worker.streamReadyEndpoints()) {
        assert.equal(ready, endpoint);
        while (taken < total) {
          const chunk = new Uint8Array(Math.min(chunkSize, total - taken));
          const n = ready.streamRecvAvailable(chunk);
          if (n === 0) break;
          sizes.push(n);
          got.push(chunk.subarray(0, n));
          taken += n;
          if (n < chunk.byteLength) break;
        }
      }
      await new Promise(setImmediate);
    }
    return { bytes: Buffer.concat(got), sizes };
  }

  test('streamReadyEndpoints + streamRecvAvailable take what arrived without a receive, in order, byte-exact', async () => {
    const data = pattern(31, 300_000);
    assert.equal(endpoint.streamRecvAvailable(new Uint8Array(16)), 0);
    await endpoint.streamSend(data);
    // 5,000 B buffers, smaller than UCX's descriptors (8 KiB fragments on shared memory): every take
    // leaves part of one for the next.
    const { bytes, sizes } = await takeAvailable(data.length, 5000);
    assert.equal(bytes.length, data.length);
    assert.equal(firstMismatch(bytes, data), -1);
    assert.ok(sizes.filter((n) => n === 5000).length >= 30, `sizes ${sizes.join(',')}`);
    assert.equal(endpoint.streamRecvAvailable(new Uint8Array(16)), 0);
  });

  test('streamRecvAvailable, then streamRecv: the bytes keep their order across both', async () => {
    const data = pattern(32, 100_000);
    await endpoint.streamSend(data);
    const head = await takeAvailable(7, 7);
    const rest = new Uint8Array(data.length - head.bytes.length);
    assert.equal(await endpoint.streamRecv(rest, { waitAll: true }), rest.length);
    assert.equal(firstMismatch(Buffer.concat([head.bytes, rest]), data), -1);
  });

  test('a waiting streamRecv makes streamRecvAvailable an InvalidStateError, and still gets the bytes', async () => {
    const back = new Uint8Array(8);
    const receive = endpoint.streamRecv(back, { waitAll: true });
    assert.throws(() => endpoint.streamRecvAvailable(new Uint8Array(8)),
      (err: unknown) => err instanceof InvalidStateError && err.code === 'UCXX_ERR_INVALID_STATE');
    assert.throws(() => endpoint.streamRecvAvailable(new Uint8Array(0)), RangeError);
    const data = pattern(33, 8);
    await endpoint.streamSend(data);
    assert.equal(await receive, 8);
    assert.equal(firstMismatch(back, data), -1);
    assert.throws(() => worker.streamReadyEndpoints(0), RangeError);
  });

  test('a Node Duplex over the endpoint stream: written bytes come back in order through the echo', async () => {
    const duplex = createEndpointDuplex(endpoint, { readSize: 100_000 });
    const data = pattern(21, 1_000_000);
    const chunks: Buffer[] = [];
    let total = 0;
    const done = new Promise<void>((resolve, reject) => {
      duplex.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        total += chunk.length;
        if (total >= data.length) resolve();
      });
      duplex.on('error', reject);
    });
    duplex.write(data.subarray(0, 300_000));
    duplex.write(data.subarray(300_000));
    await done;
    duplex.destroy();
    assert.equal(total, data.length);
    assert.equal(firstMismatch(Buffer.concat(chunks), data), -1);
  });

  test('a zero-byte stream receive buffer is a RangeError', () => {
    failsAtOnce(() => endpoint.streamRecv(new Uint8Array(0)), RangeError);
  });
});

describe('active messages', () => {
  const received: AmMessage[] = [];
  const waiting: ((m: AmMessage) => void)[] = [];
  before(() => {
    worker.setAmHandler(2, (message) => {
      const w = waiting.shift();
      if (w !== undefined) w(message);
      else received.push(message);
    });
  });
  const nextReply = (): Promise<AmMessage> =>
    new Promise((resolve) => {
      const m = received.shift();
      if (m !== undefined) resolve(m);
      else waiting.push(resolve);
    });

  for (const size of SIZES) {
    for (const protocol of ['auto', 'eager', 'rendezvous'] as const) {
      if (protocol === 'eager' && size > (64 << 10)) continue;
      test(`${size} B, ${protocol}: echoed through the reply endpoint, header and data byte-exact`, async () => {
        const header = pattern(size + 3, 24);
        const data = pattern(size + 5, size);
        const reply = nextReply();
        await endpoint.amSend(1, header, data, { protocol, reply: true });
        const message = await reply;
        assert.equal(firstMismatch(message.header, header), -1);
        assert.equal(message.length, size);
        const body = await message.receive();
        assert.equal(firstMismatch(body, data), -1);
      });
    }
  }

  test('a rendezvous message rejected by the handler fails at the sender with that status', async () => {
    await assert.rejects(
      Promise.resolve(endpoint.amSend(1, Buffer.from('R'), new Uint8Array(1 << 20), { protocol: 'rendezvous', reply: true })),
      RejectedError,
    );
  });

  test('a handler that throws: the sender of a rendezvous message gets an error, the peer survives', async () => {
    await assert.rejects(
      Promise.resolve(endpoint.amSend(1, Buffer.from('T'), new Uint8Array(1 << 20), { protocol: 'rendezvous', reply: true })),
      UcxError,
    );
    // Still alive and echoing:
    const reply = nextReply();
    await endpoint.amSend(1, Buffer.from('ok'), pattern(1, 10), { reply: true });
    assert.equal((await reply).length, 10);
  });

  test('amMessages(id) yields messages as an async iterator', async () => {
    const iterator = worker.amMessages(2);
    await endpoint.amSend(1, Buffer.from('it'), pattern(2, 5000), { reply: true });
    const first = await iterator.next();
    assert.equal(first.done, false);
    const body = await (first.value as AmMessage).receive(new Uint8Array(5000));
    assert.equal(firstMismatch(body, pattern(2, 5000)), -1);
    await iterator.return?.();
    worker.setAmHandler(2, (message) => {
      const w = waiting.shift();
      if (w !== undefined) w(message);
      else received.push(message);
    });
  });

  test('bad AM arguments', () => {
    failsAtOnce(() => endpoint.amSend(70000, null, null), RangeError);
    failsAtOnce(() => endpoint.amSend(1, null, null, { protocol: 'fast' as never }), TypeError);
    assert.throws(() => worker.setAmHandler(-1, () => undefined), RangeError);
  });
});

describe('cancellation and close', () => {
  test('aborting a tag receive and a stream receive rejects with CanceledError', async () => {
    const controller = new AbortController();
    const tagReceive = worker.tagRecv(new Uint8Array(8), 9001n, undefined, { signal: controller.signal });
    const streamReceive = endpoint.streamRecv(new Uint8Array(8), { signal: controller.signal, waitAll: true });
    controller.abort();
    await assert.rejects(Promise.resolve(tagReceive), CanceledError);
    await assert.rejects(Promise.resolve(streamReceive), CanceledError);
    const already = worker.tagRecv(new Uint8Array(8), 9002n, undefined, { signal: AbortSignal.abort() });
    await assert.rejects(Promise.resolve(already), CanceledError);
  });

  test("an aborted operation rejects with the signal's reason as cause, named in the message, still a CanceledError", async () => {
    const timedOut = worker.tagRecv(new Uint8Array(8), 9004n, undefined, { signal: AbortSignal.timeout(20) });
    await assert.rejects(Promise.resolve(timedOut), (err: Error & { code?: string }) => {
      assert.ok(err instanceof CanceledError, String(err));
      assert.equal(err.code, 'UCS_ERR_CANCELED');
      assert.match(err.message, /^tagRecv: timed out/);
      assert.equal((err.cause as Error).name, 'TimeoutError');
      return true;
    });
    const reason = new Error('the user pressed stop');
    const controller = new AbortController();
    const stream = endpoint.streamRecv(new Uint8Array(8), { signal: controller.signal, waitAll: true });
    const before = worker.tagRecv(new Uint8Array(8), 9005n, undefined, { signal: AbortSignal.abort(reason) });
    controller.abort(reason);
    for (const request of [stream, before]) {
      await assert.rejects(Promise.resolve(request), (err: Error) => {
        assert.ok(err instanceof CanceledError, String(err));
        assert.match(err.message, /: aborted \(the user pressed stop\)/);
        assert.equal(err.cause, reason);
        return true;
      });
    }
  });

  test('closing an endpoint rejects its receives in flight', async () => {
    const side = await worker.connect('127.0.0.1', port);
    const tagReceive = side.tagRecv(new Uint8Array(8), 9003n);
    const streamReceive = side.streamRecv(new Uint8Array(8), { waitAll: true });
    await side.close();
    await assert.rejects(Promise.resolve(tagReceive), CanceledError);
    await assert.rejects(Promise.resolve(streamReceive), UcxError);
    failsAtOnce(() => side.tagSend(new Uint8Array(1), 1n), ClosedError);
  });
});
