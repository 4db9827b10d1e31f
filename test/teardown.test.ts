/**
 * Programs that only send and leave must never crash the process they sent to. Each test runs a server
 * (test/peers/teardown-server.ts) and clients (test/peers/teardown-client.ts) as separate processes,
 * repeated, and checks what a user sees: the server's exit status (a UCX abort is 134/SIGABRT), what
 * its later receives of the gone clients' messages return (a typed error, or the real bytes), and that
 * its own `context.close()` completes.
 *
 * Before the fix each of these aborted the server in ucp_worker_get_ep_by_id (`ucp_worker.inl:92
 * Assertion (*ep_p)->worker == worker`) in every run: UCX 1.13 kept the rendezvous messages of an
 * endpoint that ucxx-ts had already destroyed (docs/ucx-1.13-bugs/rndv_after_ep_destroy.c).
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as net from 'node:net';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { Context, getUcxVersion } from 'ucxx-ts';
import { Peer } from './helpers/peer.js';
import { ucxProfileOfRun } from './helpers/env.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));

interface Outcome {
  ok: boolean;
  name?: string;
  code?: string;
  length?: number;
  intact?: boolean;
}

/** Typed failures a receive of a gone sender's message may end with (UCX fails it on the dead endpoint). */
const GONE_CODES = new Set(['UCS_ERR_ENDPOINT_TIMEOUT', 'UCS_ERR_CONNECTION_RESET', 'UCS_ERR_CANCELED', 'UCS_ERR_UNREACHABLE']);

interface Scenario {
  mode: 'am' | 'tag';
  leave: 'exit' | 'close' | 'natural';
  count: number;
  size: number;
  /** Receive what the client left before closing the server's context. */
  receive: boolean;
}

/** One run: server, one client that sends and leaves, then the server receives (or not) and closes. */
async function runOnce(s: Scenario): Promise<Outcome[]> {
  const server = Peer.start('teardown-server', { mode: s.mode });
  try {
    const { port } = await server.next('ready');
    const client = Peer.start('teardown-client', { port, mode: s.mode, count: s.count, size: s.size, leave: s.leave });
    await client.next('sent');
    const left = await client.exited;
    assert.equal(left.code, 0, `the client must leave cleanly (${JSON.stringify(left)}); stderr:\n${client.stderr}`);
    await server.next('ep-closed', 20_000); // the server saw the client go
    let results: Outcome[] = [];
    if (s.receive) {
      const reply = await server.call({ type: 'recv', count: s.count, size: s.size }, 'received', 60_000);
      results = reply['results'] as Outcome[];
    }
    await server.call({ type: 'close' }, 'closed', 30_000);
    const { code, signal } = await server.exited;
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, `the server must survive; stderr:\n${server.stderr}`);
    return results;
  } finally {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
  }
}

/** Every receive either got the real bytes or failed with a typed error naming the gone peer. */
function checkOutcomes(results: readonly Outcome[], s: Scenario): void {
  for (const r of results) {
    if (r.ok) {
      assert.equal(r.length, s.size, 'a receive that succeeds has the whole message');
      assert.equal(r.intact, true, 'a receive that succeeds has the bytes that were sent');
    } else {
      assert.ok(GONE_CODES.has(String(r.code)), `a receive of a gone sender's message fails typed: ${JSON.stringify(r)}`);
      assert.match(String(r.name), /Error$/);
    }
  }
}

const RUNS = 6;

for (const s of [
  { mode: 'am', leave: 'exit', count: 1, size: 1 << 20, receive: false },
  { mode: 'am', leave: 'exit', count: 1, size: 1 << 20, receive: true },
  { mode: 'tag', leave: 'close', count: 4, size: 4 << 20, receive: true },
  { mode: 'tag', leave: 'exit', count: 4, size: 4 << 20, receive: true },
] as const satisfies readonly Scenario[]) {
  const what = s.mode === 'am'
    ? `a 1 MiB active message the handler keeps${s.receive ? ', received after the client left,' : ' and never receives'}`
    : `${s.count} x 4 MiB tag sends unreceived, the client leaving by ${s.leave === 'close' ? 'await context.close()' : 'process.exit()'}${s.receive ? ', then tagRecv' : ''}`;
  test(`a client that sends and leaves never crashes the server: ${what} (${RUNS} runs)`, { timeout: 120_000 }, async () => {
    let failedTyped = 0;
    for (let run = 0; run < RUNS; run++) {
      const results = await runOnce(s);
      checkOutcomes(results, s);
      if (s.receive) assert.equal(results.length, s.count, 'every receive settles');
      failedTyped += results.filter((r) => !r.ok).length;
    }
    if (s.receive) assert.ok(failedTyped > 0, 'the gone sender cannot deliver its rendezvous data');
  });
}

test('a server whose clients send and leave, one after another, keeps serving and closes cleanly', { timeout: 120_000 }, async () => {
  const server = Peer.start('teardown-server', { mode: 'tag' });
  try {
    const { port } = await server.next('ready');
    for (let i = 0; i < 8; i++) {
      const client = Peer.start('teardown-client', { port, mode: 'tag', count: 2, size: 4 << 20, leave: i % 2 === 0 ? 'exit' : 'close' });
      await client.next('sent');
      assert.equal((await client.exited).code, 0, client.stderr);
      await server.next('ep-closed', 20_000);
      const reply = await server.call({ type: 'recv', count: 2, size: 4 << 20 }, 'received', 60_000);
      checkOutcomes(reply['results'] as Outcome[], { mode: 'tag', leave: 'exit', count: 2, size: 4 << 20, receive: true });
    }
    await server.call({ type: 'close' }, 'closed', 30_000);
    const { code, signal } = await server.exited;
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, server.stderr);
  } finally {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
  }
});

/**
 * A connect the server never answers (its event loop blocked: SIGSTOP here), given up by the client's
 * own timer: the client's context.close() or process.exit() aborted it in every run before the fix
 * (`ucp_ep.c:1185 Bug: pending request ... should have been flushed`, exit 134;
 * docs/ucx-1.13-bugs/connect_never_answered.c).
 */
for (const leave of ['close', 'exit'] as const) {
  test(`a client that gives up on an unanswered connect leaves cleanly: ${leave === 'close' ? 'await context.close()' : 'process.exit()'} (${RUNS} runs)`, { timeout: 120_000 }, async () => {
    const server = Peer.start('teardown-server', { mode: 'tag' });
    try {
      const { port } = await server.next('ready');
      server.child.kill('SIGSTOP');
      for (let run = 0; run < RUNS; run++) {
        const client = Peer.start('connect-unanswered', { port, timeoutMs: 300, leave });
        const { first } = await client.next('timed-out', 20_000);
        assert.equal(first, 'timeout', 'the stopped server never answers the connect');
        if (leave === 'close') {
          const closed = await client.next('closed', 30_000);
          assert.deepEqual({ settled: closed['settled'], ok: closed['ok'], name: closed['name'], code: closed['code'] },
            { settled: true, ok: false, name: 'CanceledError', code: 'UCS_ERR_CANCELED' },
            'the abandoned connect rejects as cancelled by the close, not as a refusal');
        }
        const { code, signal } = await client.exited;
        assert.deepEqual({ code, signal }, { code: 0, signal: null }, `the client must leave cleanly; stderr:\n${client.stderr}`);
      }
      server.child.kill('SIGCONT');
      await server.call({ type: 'close' }, 'closed', 30_000);
      assert.deepEqual(await server.exited, { code: 0, signal: null }, server.stderr);
    } finally {
      if (server.child.exitCode === null && server.child.signalCode === null) {
        server.child.kill('SIGCONT');
        server.child.kill('SIGKILL');
      }
    }
  });
}

// A connect that UCX never answers rejects by the context's failureTimeout (EndpointTimeoutError); the
// context's close then destroyed the worker with the connect's flush still queued in UCX, and UCX 1.13
// aborted ("ucp_ep.c:1185 Bug: pending request ... ucp_ep_flush_progress_pending ... should have been
// flushed") in every run. Two servers that never answer: a stopped ucxx-ts listener, and a TCP socket
// that accepts and says nothing.
test('a connect that times out (failureTimeout), then context.close(): no crash, a clear EndpointTimeoutError (20 runs)', { timeout: 240_000 }, async () => {
  const server = Peer.start('teardown-server', { mode: 'tag' });
  const silent = net.createServer(() => undefined).listen(0, '127.0.0.1');
  try {
    const { port: stopped } = await server.next('ready');
    server.child.kill('SIGSTOP');
    if (!silent.listening) await new Promise((resolve) => silent.once('listening', resolve));
    const tcp = (silent.address() as net.AddressInfo).port;
    for (let run = 0; run < 20; run++) {
      const port = run % 2 === 0 ? stopped : tcp;
      const errorHandling = run % 4 < 2 ? undefined : 'none';
      const client = Peer.start('connect-unanswered', { port, timeoutMs: 300, leave: 'after-timeout', errorHandling });
      const failed = await client.next('connect-failed', 20_000);
      assert.equal(failed['name'], 'EndpointTimeoutError', JSON.stringify(failed));
      assert.match(String(failed['message']), /127\.0\.0\.1:\d+/);
      await client.next('closed', 30_000);
      const { code, signal } = await client.exited;
      assert.deepEqual({ code, signal }, { code: 0, signal: null },
        `run ${run} (${port === stopped ? 'stopped listener' : 'silent TCP'}, ${errorHandling ?? 'default'}): the client must close cleanly; stderr:\n${client.stderr}`);
    }
    server.child.kill('SIGCONT');
    await server.call({ type: 'close' }, 'closed', 30_000);
    assert.deepEqual(await server.exited, { code: 0, signal: null }, server.stderr);
  } finally {
    silent.close();
    if (server.child.exitCode === null && server.child.signalCode === null) {
      server.child.kill('SIGCONT');
      server.child.kill('SIGKILL');
    }
  }
});

/**
 * A `worker_threads` thread terminated with rendezvous sends in flight: its heap is freed while the
 * receiver (here the main thread of the same process) still pulls the data from the sender's memory.
 * Before the fix the receives succeeded with bytes that were never sent in every run (1-8 of 8
 * messages a run; glibc's free-list pointers in the first 16 bytes), and the two-part tag send hung.
 */
for (const [mode, runs] of [['tag', 4], ['am', 4], ['iov', 2]] as const) {
  const how = { tag: 'tag sends', am: 'active messages a handler keeps', iov: 'two-part tag sends' }[mode];
  // UCX 1.20's v1 protocols (the profile's contextDefaults) fetch these messages over TCP, which the
  // sender's progress serves: a terminated thread never answers, so the receives can only end by
  // their signal (docs/threads.md).
  const v1 = ucxProfileOfRun(getUcxVersion()).contextDefaults['PROTO_ENABLE'] === 'n';
  test(`receives from a terminated thread never succeed with bytes that were not sent: 8 x 64 KiB ${how} (${runs} runs)`, { timeout: 120_000 }, () => {
    const result = spawnSync(process.execPath, [path.join(HERE, 'peers', 'thread-terminated-sends.js'), JSON.stringify({ runs, mode })], {
      encoding: 'utf8', timeout: 100_000, killSignal: 'SIGKILL',
    });
    const output = `${result.stdout}\n${result.stderr}`;
    assert.deepEqual({ status: result.status, signal: result.signal }, { status: 0, signal: null }, output);
    const lines = result.stdout.split('\n').filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { ok: number; wrong: number; failed: number; codes: string[] });
    assert.equal(lines.length, runs, output);
    for (const line of lines) {
      assert.equal(line.wrong, 0, `a receive reported success with other bytes: ${output}`);
      for (const code of line.codes) assert.ok(GONE_CODES.has(code), `a failed receive fails typed: ${output}`);
    }
    // The copies outlive the thread, so the gone thread's messages arrive whole where the receiver
    // pulls them itself; with the v1 protocols every one fails by the signal instead.
    if (v1) for (const line of lines) assert.deepEqual(line.codes, Array(line.failed).fill('UCS_ERR_CANCELED'), output);
    else assert.ok(lines.some((line) => line.ok > 0), output);
  });
}

/**
 * A receive that matched a message whose sender stops answering (SIGSTOP; over TCP the data moves only
 * as the sender serves it; NONE mode, so UCX never fails the endpoint) must end by its signal: it
 * rejects with CanceledError, and the next message of the same sender still arrives whole once the
 * sender runs again. UCX cannot cancel such a receive: it used to wait for the data however long.
 */
test('a receive that matched a stopped sender\'s rendezvous ends by its signal; the next message still arrives (4 MiB over TCP)', { timeout: 60_000 }, async () => {
  const size = 4 << 20;
  const context = new Context({ config: { TLS: 'tcp' } });
  const worker = context.createWorker();
  const listener = worker.listen({ host: '127.0.0.1', port: 0, fastLane: false }, (endpoint) => {
    endpoint.on('error', () => undefined);
  });
  const client = Peer.start('teardown-client', {
    port: listener.port, mode: 'tag', count: 2, size, leave: 'stay', lingerMs: 300,
    connect: { errorHandling: 'none', fastLane: false },
  }, { UCX_TLS: 'tcp' });
  const expected = (i: number, data: Uint8Array): boolean => data.every((byte, j) => byte === ((i + 7 * j) & 0xff));
  try {
    await client.next('sent');
    // Both announcements are here before the sender stops.
    const deadline = Date.now() + 10_000;
    while (worker.tagProbe(1n) === null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.notEqual(worker.tagProbe(1n), null, 'the second announcement arrived');
    client.child.kill('SIGSTOP');
    const first = new Uint8Array(size);
    const started = Date.now();
    await assert.rejects(worker.tagRecv(first, 0n, undefined, { signal: AbortSignal.timeout(1000) }).promise, (err: Error) => {
      assert.equal((err as { code?: string }).code, 'UCS_ERR_CANCELED', String(err));
      assert.equal(err.name, 'CanceledError');
      return true;
    });
    const took = Date.now() - started;
    assert.ok(took >= 900 && took < 3000, `rejected ${took} ms after a 1 s signal`);
    client.child.kill('SIGCONT');
    const second = new Uint8Array(size);
    const info = await worker.tagRecv(second, 1n, undefined, { signal: AbortSignal.timeout(20_000) });
    assert.equal(info.length, size);
    assert.ok(expected(1, second), 'the next message arrives whole');
  } finally {
    client.child.kill('SIGCONT');
    client.child.kill('SIGKILL');
    await context.close();
  }
});

/**
 * Sends to clients that leave without receiving them: in NONE mode (one host) UCX 1.13 never completes
 * a rendezvous send whose peer left, so before the fix each one stayed in flight with its buffer for
 * the server's lifetime (a tagProbe RPC server: requestsInFlight 147 with no endpoint, RSS 73 -> 152 MiB
 * after 50 clients). The server must let go of them once the endpoints are closed.
 */
test('sends to clients that left unreceived do not stay in flight at the server (8 clients)', { timeout: 120_000 }, async () => {
  const server = Peer.start('teardown-server', { mode: 'tag' });
  try {
    const { port } = await server.next('ready');
    for (let i = 0; i < 8; i++) {
      const client = Peer.start('teardown-client', { port, mode: 'tag', count: 1, size: 64, leave: i % 2 === 0 ? 'exit' : 'close', lingerMs: 3000 });
      await client.next('connected');
      // The server's side of the connection may come a moment after the client's: send once it is there.
      for (let tries = 0; ((await server.call({ type: 'send', count: 3, size: 1 << 20 }, 'posted'))['to'] as number) === 0; tries++) {
        assert.ok(tries < 100, 'the server sees the client');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await client.next('sent');
      assert.equal((await client.exited).code, 0, client.stderr);
      await server.next('ep-closed', 20_000);
    }
    let inFlight = -1;
    for (let look = 0; look < 30 && inFlight !== 0; look++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      const diag = await server.call({ type: 'diag' }, 'diag');
      assert.equal(diag['endpoints'], 0, 'every client endpoint is closed');
      inFlight = diag['requestsInFlight'] as number;
    }
    assert.equal(inFlight, 0, "the gone clients' sends are let go of");
    await server.call({ type: 'close' }, 'closed', 30_000);
    assert.deepEqual(await server.exited, { code: 0, signal: null }, server.stderr);
  } finally {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
  }
});
