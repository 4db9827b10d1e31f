/**
 * Failures are reported, never hangs: a peer killed in the middle of a transfer, a refused connection.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import {
  Context, ClosedError, ConnectionRefusedError, InvalidAddressError, UcxError, CanceledError, createRemoteKeyFromSerialized, type Endpoint,
} from 'ucxx-ts';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { Peer } from './helpers/peer.js';
import { eventually, within } from './helpers/deadline.js';
import { failsAtOnce } from './helpers/fails-at-once.js';
import { peerEnvironment } from './helpers/env.js';

const CLIENT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'peers', 'lifetime-client.js');

const MiB = 1 << 20;


test('a peer killed in the middle of a transfer makes the waiting requests reject with a UcxError', async () => {
  const peer = Peer.start('rma-target', { kind: 'registered', size: 64 * MiB });
  const ready = await peer.next('ready');
  await using context = new Context();
  const worker = context.createWorker();
  const endpoint = await worker.connect('127.0.0.1', ready['port'] as number);
  const buffer = new Uint8Array(512);
  const info = await endpoint.tagRecv(buffer, 1n);
  const key = createRemoteKeyFromSerialized(endpoint, buffer.subarray(0, info.length));
  const closed = new Promise<void>((resolve) => endpoint.once('close', resolve));
  const errors: unknown[] = [];
  endpoint.on('error', (err) => errors.push(err));
  const pendingReceive = endpoint.tagRecv(new Uint8Array(8), 99n);

  const data = new Uint8Array(8 * MiB).fill(0xab);
  let failure: unknown;
  const killAt = Date.now() + 300;
  let killed = false;
  // Keep transfers in flight until the peer's death surfaces as an error.
  const deadline = Date.now() + 20_000;
  while (failure === undefined && Date.now() < deadline) {
    if (!killed && Date.now() >= killAt) {
      peer.child.kill('SIGKILL');
      killed = true;
    }
    try {
      const puts = [];
      for (let i = 0; i < 8; i++) puts.push(endpoint.memPut(data, key, i * 8 * MiB));
      await within(Promise.all([...puts, endpoint.flush()]), 15_000, 'puts and flush');
    } catch (err) {
      failure = err;
    }
  }
  assert.ok(killed, 'the transfers ended before the peer could be killed');
  assert.ok(
    failure instanceof UcxError || failure instanceof ClosedError,
    `expected a UcxError (or ClosedError once the endpoint closed), got ${String(failure)}`,
  );
  await within(closed, 10_000, "the endpoint's 'close' event");
  // UCX 1.13 reports a killed peer as it reports a close. Killed with puts or a flush waiting for it, it
  // is a failure: 'error' (once) then 'close'; killed between two rounds (nothing waiting but the tag
  // receive, which a close cancels), a close: 'close' alone, and then no operation rejected with a
  // UcxError of the peer's.
  if (endpoint.closedByPeer) {
    assert.deepEqual(errors, [], "a close: no 'error'");
    assert.equal(endpoint.failure, undefined);
    assert.ok(failure instanceof ClosedError, `after a close only ClosedError, got ${String(failure)}`);
  } else {
    assert.ok(endpoint.failure instanceof UcxError, 'endpoint.failure holds the peer error');
    assert.deepEqual(errors, [endpoint.failure], "one 'error' event with the failure");
  }
  await assert.rejects(within(Promise.resolve(pendingReceive), 5_000, 'pending receive'), CanceledError);
  failsAtOnce(() => endpoint.memPut(data, key), ClosedError);
  const exit = await within(peer.exited, 10_000, 'the killed peer exits');
  assert.equal(exit.signal, 'SIGKILL');
});

test('connecting to a host name that does not resolve rejects with an InvalidAddressError naming the host, the resolver\'s error as cause', async () => {
  await using context = new Context();
  const worker = context.createWorker();
  // .invalid never resolves (RFC 2606).
  await assert.rejects(worker.connect('no-such-host.invalid', 13337), (err: unknown) => {
    assert.ok(err instanceof InvalidAddressError, `not an InvalidAddressError: ${String(err)}`);
    assert.equal(err.code, 'UCS_ERR_INVALID_ADDR');
    assert.match(err.message, /no-such-host\.invalid/);
    assert.ok((err as { cause?: { code?: string } }).cause?.code !== undefined, 'the resolver error is the cause');
    return true;
  });
  // The worker is unharmed.
  const listener = worker.listen({ host: '127.0.0.1', port: 0 });
  const ep = await worker.connect('127.0.0.1', listener.port);
  await ep.close();
  listener.close();
});

test('connecting to a port nobody listens on rejects with a ConnectionRefusedError that says so, and only so', async () => {
  await using context = new Context();
  const worker = context.createWorker();
  const listener = worker.listen({ host: '127.0.0.1', port: 0 });
  const port = listener.port;
  listener.close();
  const started = Date.now();
  await assert.rejects(within(worker.connect('127.0.0.1', port), 20_000, 'connect'), (err: Error) => {
    assert.ok(err instanceof ConnectionRefusedError, String(err));
    assert.match(err.message, /nobody listens there/);
    // The advice for a server that refuses NONE-mode clients does not apply: nobody is there.
    assert.doesNotMatch(err.message, /errorHandling/);
    return true;
  });
  assert.ok(Date.now() - started < 20_000);
});

test('listening twice on one port is a UcxError', async () => {
  await using context = new Context();
  const worker = context.createWorker();
  using listener = worker.listen({ host: '127.0.0.1', port: 0 });
  assert.throws(() => worker.listen({ host: '127.0.0.1', port: listener.port }), UcxError);
});

test('cancel() and an AbortSignal settle a send that UCX cannot cancel at once; closing afterwards is safe', async () => {
  await using context = new Context();
  const server = context.createWorker();
  const accepted: Promise<unknown>[] = [];
  const listener = server.listen({ host: '127.0.0.1', port: 0 }, (ep) => accepted.push(Promise.resolve(ep)));
  const worker = context.createWorker();
  const endpoint = await worker.connect('127.0.0.1', listener.port);
  // Nobody receives tag 5: a synchronous send waits for ever.
  const waiting = endpoint.tagSendSync(new Uint8Array(64), 5n);
  assert.equal(waiting.completed, false);
  waiting.cancel();
  await assert.rejects(within(Promise.resolve(waiting), 100, 'cancelled send'), CanceledError);
  const controller = new AbortController();
  const aborted = endpoint.tagSendSync(new Uint8Array(64), 5n, { signal: controller.signal });
  controller.abort();
  await assert.rejects(within(Promise.resolve(aborted), 100, 'aborted send'), CanceledError);
  // Aborted before it was posted: never reaches UCX.
  await assert.rejects(Promise.resolve(endpoint.flush({ signal: controller.signal })), CanceledError);
  await within(endpoint.close(), 10_000, 'endpoint close');
  await within(worker.close(), 10_000, 'worker close');
});

test('failureTimeout: checked, and it sets the TCP keepalive timers of the context only', () => {
  assert.throws(() => new Context({ failureTimeout: 0 }), RangeError);
  const context = new Context({ failureTimeout: 4000 });
  const config = context.getConfig();
  assert.equal(context.failureTimeout, 4000);
  assert.equal(config['TCP_KEEPIDLE'], '2s');
  assert.equal(config['TCP_KEEPINTVL'], '1s');
  assert.equal(config['TCP_KEEPCNT'], '2');
  assert.equal(config['TCP_CM_REUSEADDR'], 'y');
  // UCP's keepalive round stays UCX's, as in ucxx: a short one cost replies from a peer that
  // force-closes right after sending them (docs/reliability.md).
  const untouched = new Context({ failureTimeout: Infinity });
  assert.ok(config['KEEPALIVE_INTERVAL'] !== undefined, 'UCX prints its KEEPALIVE_INTERVAL');
  assert.equal(config['KEEPALIVE_INTERVAL'], untouched.getConfig()['KEEPALIVE_INTERVAL']);
  void untouched.close();
  void context.close();
  const off = new Context({ failureTimeout: Infinity, reuseAddress: false });
  assert.equal(off.getConfig()['TCP_KEEPIDLE'], undefined);
  void off.close();
});

for (const errorHandling of ['none', 'peer'] as const) {
  for (const closing of ['endpoint', 'context'] as const) {
    test(`closing the ${closing} with sends the peer never matches (sync and rendezvous, '${errorHandling}' mode) neither aborts nor hangs`, async () => {
      // The peer listens and receives nothing: a tagSendSync is never matched and a 4 MiB rendezvous send
      // is never fetched. UCX 1.13 aborted (ucp_ep.c:437) when such an endpoint was closed twice.
      const peer = Peer.start('rma-target', { kind: 'allocated', size: 4096 });
      const ready = await peer.next('ready');
      try {
        const context = new Context();
        const worker = context.createWorker();
        const endpoint = await worker.connect('127.0.0.1', ready['port'] as number, { errorHandling });
        const sync = endpoint.tagSendSync(new Uint8Array(8), 0x5e5en).promise;
        const rendezvous = endpoint.tagSend(new Uint8Array(4 * MiB), 0x5e5en).promise;
        const settled = Promise.allSettled([sync, rendezvous]);
        await within(closing === 'endpoint' ? endpoint.close() : context.close(), 20_000, `${closing}.close()`);
        const results = await within(settled, 5_000, 'the unmatched sends to settle');
        for (const result of results) {
          assert.equal(result.status, 'rejected', 'an unmatched send resolved');
          assert.ok((result as PromiseRejectedResult).reason instanceof UcxError, String((result as PromiseRejectedResult).reason));
        }
        await within(context.close(), 10_000, 'context.close()');
      } finally {
        await peer.stop();
      }
    });
  }
}

test("a peer that closes: 'close' alone, closedByPeer, also with a receive waiting (cancelled, as a read at a socket's end)", async () => {
  await using context = new Context();
  const worker = context.createWorker();
  const accepted: Endpoint[] = [];
  const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (endpoint) => accepted.push(endpoint));
  for (const waiting of [false, true]) {
    const count = accepted.length;
    const client = await worker.connect('127.0.0.1', listener.port);
    assert.ok(await eventually(() => accepted.length !== count, 5000), 'timed out after 5000 ms: the accepted endpoint');
    const server = accepted[count] as Endpoint;
    await server.flush();
    const events: string[] = [];
    server.on('error', (err: Error) => events.push(`error ${err.name}`));
    const closed = new Promise<void>((resolve) => server.once('close', () => { events.push('close'); resolve(); }));
    const receive = waiting ? server.tagRecv(new Uint8Array(8), 77n).then(() => 'received', (err: Error) => err.name) : null;
    await client.close();
    await within(closed, 5000, `the accepted endpoint's close (waiting: ${waiting})`);
    assert.deepEqual(events, ['close'], `a clean close emits no 'error' (waiting: ${waiting})`);
    assert.equal(server.closedByPeer, true);
    assert.equal(server.failure, undefined);
    if (waiting) assert.equal(await receive, 'CanceledError', 'the waiting receive is cancelled by the close');
    failsAtOnce(() => server.tagSend(new Uint8Array(1), 1n), ClosedError);
  }
  listener.close();
});

test("connection churn: 200 clients that RPC and close cleanly raise no 'error' at the server and lose no reply", async () => {
  const server = Peer.start('lifetime-server');
  const port = (await server.next('ready'))['port'] as number;
  try {
    // Four client programs at once, 50 connections each, one after another: connect, 3 tag RPCs, close.
    const runs = await Promise.all([0, 1, 2, 3].map(() => new Promise<string>((resolve, reject) => {
      execFile(process.execPath, [CLIENT, JSON.stringify({ mode: 'rpc', port, connections: 50, rpcs: 3 })], {
        env: peerEnvironment(), timeout: 120_000,
      }, (err, stdout, stderr) => (err === null ? resolve(stdout) : reject(new Error(`${String(err)}\n${stdout}\n${stderr}`))));
    })));
    for (const out of runs) {
      // UCX writes its warnings to stdout too (the key messages this client never receives).
      const line = out.split('\n').find((l) => l.startsWith('{"replies"')) ?? out;
      const last = JSON.parse(line) as { replies: number; rejected: number; errors: number };
      assert.deepEqual(last, { replies: 150, rejected: 0, errors: 0 }, out);
    }
    let stats = await server.call({ type: 'stats' }, 'stats');
    const deadline = Date.now() + 10_000; // the last closes may still be on their way
    while ((stats['closes'] as number) < 200 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      stats = await server.call({ type: 'stats' }, 'stats');
    }
    assert.equal(stats['connected'], 200);
    assert.equal(stats['rpcs'], 600, JSON.stringify(stats));
    assert.deepEqual(
      { errors: stats['errors'], rejectedReplies: stats['rejectedReplies'], closes: stats['closes'], closedByPeer: stats['closedByPeer'] },
      { errors: 0, rejectedReplies: 0, closes: 200, closedByPeer: 200 },
      JSON.stringify(stats['errorCodes']),
    );
  } finally {
    await server.stop();
  }
});
