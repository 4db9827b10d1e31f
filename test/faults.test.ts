/**
 * Faults between two hosts (test/helpers/two-hosts.ts: a server in host B, a client in host A, TCP
 * over a veth pair), with a short failureTimeout so that each fault is noticed within seconds: the
 * link cut while every kind of operation is in flight, the server stopped (SIGSTOP) and killed
 * (SIGKILL), the server restarted on its port, a refused connection. Each is noticed within the bound
 * (plus slack), pending operations reject with a typed error, 'error' comes before 'close', nothing
 * hangs or crashes, and bytes that arrived before the fault are right. The detection times measured
 * are printed as diagnostics (docs/reliability.md records them). Needs root; skips otherwise.
 */
import { after, before, test, type TestContext } from 'node:test';
import { strict as assert } from 'node:assert';
import { TwoHosts, skipReasonOrThrow } from './helpers/two-hosts.js';
import { sleep } from './helpers/deadline.js';
import type { Peer, PeerMessage } from './helpers/peer.js';

/** The failureTimeout both peers use, and what a detection may take beyond it (keepalive works in whole seconds). */
const BOUND = 2000;
const SLACK = 1500;
// What an operation on a cut or stopped link may fail with: UCX reports a flush that its keepalive gave up on as
// UCS_ERR_TIMED_OUT (seen once, the endpoint's own 'error' being EndpointTimeoutError at the same moment).
const UCX_ERRORS = new Set(['EndpointTimeoutError', 'ConnectionResetError', 'CanceledError', 'IoError', 'NotConnectedError', 'TimedOutError']);

const skip = skipReasonOrThrow();
let hosts: TwoHosts | undefined;
let server: Peer;
let client: Peer;
let port = 0;

interface Record {
  kind: string;
  posted: number;
  immediate: boolean;
  op?: { ok: boolean; name?: string; at: number };
  error?: { name: string; message: string; at: number };
  close?: number;
}

async function ask(peer: Peer, command: PeerMessage, timeoutMs = 20_000): Promise<PeerMessage> {
  const reply = await peer.call(command, 'reply', timeoutMs);
  if (reply['error'] !== undefined) {
    throw new Error(`peer failed '${command.type}': ${String(reply['error'])}\npeer output:\n${peer.stderr}` +
      `\nserver (exit ${String(server.child.exitCode)} ${String(server.child.signalCode)}):\n${server.stderr}`);
  }
  return reply;
}

function skipped(t: TestContext): boolean {
  if (skip === null) return false;
  t.skip(skip);
  return true;
}


/** Polls the client's records until `done` holds for every one of `kinds`, or the deadline. */
async function records(kinds: readonly string[], done: (r: Record) => boolean, timeoutMs: number): Promise<Record[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const all = (await ask(client, { type: 'report' }))['records'] as Record[];
    const mine = all.slice(-kinds.length);
    if (mine.every(done) || Date.now() > deadline) return mine;
    await sleep(100);
  }
}

async function startServer(wantPort = 0): Promise<Peer> {
  const h = hosts as TwoHosts;
  const peer = h.startPeer(h.b, 'fault-server', { host: h.b.address, port: wantPort, failureTimeout: BOUND });
  port = (await peer.next('ready', 20_000))['port'] as number;
  return peer;
}

/**
 * The server again if UCX 1.13 aborted it: puts retransmitted once the link is back reach it after the
 * client gave up on their connection, and its acknowledgement fails inside ucp_put_handler ->
 * ucp_request_try_send ("Fatal: unexpected error: Endpoint timeout"), a UCX bug that any peer dying with
 * puts in flight can trigger (docs/reliability.md). Reported as a diagnostic, not hidden.
 */
async function ensureServer(t: TestContext): Promise<void> {
  await sleep(1500);
  if (server.child.exitCode === null && server.child.signalCode === null) return;
  const fatal = /Fatal: [^\n]*|Caught signal [^\n]*/.exec(server.stderr)?.[0] ?? `exit ${String(server.child.exitCode)} ${String(server.child.signalCode)}`;
  t.diagnostic(`the server died (${fatal}); restarting it on port ${port}`);
  server = await startServer(port);
}

async function startClient(): Promise<Peer> {
  const h = hosts as TwoHosts;
  const peer = h.startPeer(h.a, 'fault-client', { failureTimeout: BOUND });
  await peer.next('ready', 20_000);
  return peer;
}

/**
 * A fault test. The client's purge of a failed endpoint's requests used to abort it (UCX 1.13) or kill
 * it by SIGSEGV (1.20.1) in up to a third of the SIGSTOP test's runs: a fetching atomic's stale request
 * memory, which ucxx-ts now passes zeroed (src/engine/own-request.ts, docs/reliability.md). Any failure
 * fails, with the client's exit and output when it died.
 */
function faultTest(name: string, body: (t: TestContext) => Promise<void>): void {
  test(name, async (t) => {
    if (skipped(t)) return;
    try {
      await body(t);
    } catch (err) {
      // A client that died may not have been reaped yet when its IPC channel failed.
      await Promise.race([client.exited, sleep(2000)]);
      if (client.child.exitCode !== null || client.child.signalCode !== null) {
        const how = `exit ${String(client.child.exitCode)}, signal ${String(client.child.signalCode)}`;
        const dead = client;
        client = await startClient(); // for the tests after this one
        throw new Error(`the fault client died (${how}):\n${dead.stderr}`, { cause: err });
      }
      throw err;
    }
  });
}

before(async () => {
  if (skip !== null) return;
  hosts = await TwoHosts.create();
  server = await startServer();
  client = await startClient();
});

after(async () => {
  if (hosts === undefined) return;
  try {
    await Promise.all([client, server].map((peer) => peer?.stop(5000)));
  } finally {
    hosts.close();
  }
});

const EVERY_KIND = ['tag-eager', 'tag-rndv', 'tag-sync', 'stream', 'am', 'put', 'get', 'atomic', 'flush'] as const;

faultTest(`the link cut during every kind of operation: each endpoint fails within failureTimeout (${BOUND} ms) + ${SLACK} ms`, async (t) => {
  const h = hosts as TwoHosts;
  await ask(client, { type: 'connect', host: h.b.address, port, kinds: [...EVERY_KIND] });
  // Bytes that arrive before the fault are right.
  await ask(client, { type: 'put-verified', seed: 41, offset: 64 * 1024, length: 256 * 1024 });
  assert.equal((await ask(server, { type: 'verify', seed: 41, offset: 64 * 1024, length: 256 * 1024 }))['mismatch'], -1);

  await ask(client, { type: 'start' });
  const cutAt = Date.now();
  h.setLink(h.a, false);
  let mine: Record[];
  try {
    mine = await records(EVERY_KIND, (r) => r.close !== undefined && (r.immediate || r.op !== undefined), BOUND + SLACK + 5000);
  } finally {
    h.setLink(h.a, true);
  }
  for (const r of mine) {
    const detected = r.error === undefined ? undefined : r.error.at - cutAt;
    t.diagnostic(`link cut during ${r.kind}: ${r.immediate ? 'completed at once, ' : ''}` +
      `'error' ${r.error?.name ?? 'none'} after ${detected ?? '-'} ms, op ${r.op?.ok === true ? 'ok' : r.op?.name ?? 'pending'}` +
      ` after ${r.op === undefined ? '-' : r.op.at - cutAt} ms`);
  }
  for (const r of mine) {
    // An operation that completed before the link went (a put whose data UCX had taken) leaves nothing
    // waiting on its endpoint, and nothing there to notice the cut with (its unacknowledged bytes keep
    // TCP's keepalive off): the endpoint's next operation will. Every other endpoint must fail.
    if (r.error === undefined && r.op?.ok === true) continue;
    assert.ok(r.error !== undefined, `${r.kind}: no 'error' within ${BOUND + SLACK + 5000} ms: ${JSON.stringify(r)}`);
    assert.ok(UCX_ERRORS.has(r.error.name), `${r.kind}: 'error' is ${r.error.name}`);
    assert.ok(r.error.at - cutAt <= BOUND + SLACK, `${r.kind}: noticed after ${r.error.at - cutAt} ms`);
    assert.ok(r.close !== undefined && r.close >= r.error.at, `${r.kind}: 'close' after 'error'`);
    if (!r.immediate) {
      assert.ok(r.op !== undefined, `${r.kind}: the operation never settled`);
      assert.ok(r.op.ok || UCX_ERRORS.has(r.op.name ?? ''), `${r.kind}: the operation failed with ${r.op.name}`);
    }
  }
  // Closing everything afterwards is safe, and new connections work once the link is back.
  await ask(client, { type: 'close-all' });
  await ensureServer(t);
  assert.equal((await ask(client, { type: 'reconnect', host: h.b.address, port, seed: 42 }))['same'], true);
});

faultTest('the server stopped (SIGSTOP): RMA, atomics and flush fail within the bound; cancel() and abort settle at once', async (t) => {
  const h = hosts as TwoHosts;
  const kinds = ['get', 'atomic', 'flush', 'put', 'tag-rndv'];
  await ask(client, { type: 'connect', host: h.b.address, port, kinds });
  server.child.kill('SIGSTOP');
  const stoppedAt = Date.now();
  try {
    for (const [kind, how] of [['get', 'signal'], ['atomic', 'cancel'], ['tag-rndv', 'cancel'], ['flush', 'signal']] as const) {
      const reply = await ask(client, { type: 'cancel', kind, how });
      t.diagnostic(`${how} on a waiting ${kind}: ${String(reply['name'])} after ${Number(reply['ms']).toFixed(2)} ms`);
      if (reply['waiting'] === true) {
        assert.equal(reply['name'], 'CanceledError', `${kind} ${how}`);
        assert.ok(Number(reply['ms']) < 200, `${kind} ${how}: ${String(reply['ms'])} ms`);
      }
    }
    await ask(client, { type: 'start' });
    const watched = ['get', 'atomic', 'flush'];
    const mine = await records(kinds, (r) => !watched.includes(r.kind) || r.close !== undefined, BOUND + SLACK + 5000);
    for (const r of mine) {
      t.diagnostic(`server stopped, ${r.kind}: 'error' ${r.error?.name ?? 'none'} after ` +
        `${r.error === undefined ? '-' : r.error.at - stoppedAt} ms, op ${r.op?.ok === true ? 'ok' : r.op?.name ?? 'pending'}`);
    }
    for (const r of mine.filter((m) => watched.includes(m.kind))) {
      assert.equal(r.error?.name, 'EndpointTimeoutError', `${r.kind}: ${JSON.stringify(r)}`);
      assert.ok((r.error?.at ?? Infinity) - stoppedAt <= BOUND + SLACK, `${r.kind}: noticed after ${(r.error?.at ?? Infinity) - stoppedAt} ms`);
      assert.equal(r.op?.name, 'EndpointTimeoutError', `${r.kind}: the pending operation`);
      assert.ok(r.close !== undefined && r.close >= (r.error?.at ?? 0));
    }
  } finally {
    // Not SIGCONT: a server of UCX 1.13 that resumes and answers the requests queued while it was
    // stopped, on connections its client has given up on, aborts in ucp_request_try_send ("Fatal:
    // unexpected error: Endpoint timeout": its TCP send fails before UCP has marked the endpoint
    // failed). docs/reliability.md has it. The next test starts a new server on the same port.
    server.child.kill('SIGKILL');
    await server.exited;
  }
});

faultTest('the server restarted on its port, killed (SIGKILL) with operations waiting, restarted again: noticed at once, the port is taken back, reconnect works', async (t) => {
  const h = hosts as TwoHosts;
  server = await startServer(port);
  const kinds = ['tag-rndv', 'get'];
  await ask(client, { type: 'connect', host: h.b.address, port, kinds });
  await ask(client, { type: 'start' });
  await sleep(200);
  const killedAt = Date.now();
  server.child.kill('SIGKILL');
  const mine = await records(kinds, (r) => r.close !== undefined, BOUND + SLACK + 5000);
  for (const r of mine) {
    t.diagnostic(`server killed, ${r.kind}: 'error' ${r.error?.name ?? 'none'} after ${r.error === undefined ? '-' : r.error.at - killedAt} ms` +
      `, op ${r.op?.ok === true ? 'ok' : r.op?.name ?? 'pending'} ${r.op === undefined ? '' : `${r.op.at - killedAt} ms after the kill`}`);
    // An operation that completed before the kill (a get UCX answered at once: UCX 1.20 does) leaves
    // nothing waiting: the reset is the connection's end, a 'close' without 'error', as a socket's is.
    if (r.error === undefined && r.op?.ok === true && r.op.at <= killedAt) {
      assert.ok(r.close !== undefined && r.close - killedAt <= BOUND + SLACK, `${r.kind}: closed after ${String(r.close)} ms`);
      continue;
    }
    assert.ok(r.error !== undefined && UCX_ERRORS.has(r.error.name), `${r.kind}: ${JSON.stringify(r)}`);
    assert.ok(r.error.at - killedAt <= BOUND + SLACK, `${r.kind}: noticed after ${r.error.at - killedAt} ms`);
    assert.ok(r.op !== undefined && (r.op.ok || UCX_ERRORS.has(r.op.name ?? '')), `${r.kind}: the operation settled: ${JSON.stringify(r.op)}`);
  }
  await server.exited;
  const oldPort = port;
  const restartedAt = Date.now();
  server = await startServer(oldPort);
  t.diagnostic(`restarted listener bound port ${oldPort} again after ${Date.now() - restartedAt} ms`);
  assert.equal(port, oldPort);
  assert.equal((await ask(client, { type: 'reconnect', host: h.b.address, port, seed: 43 }))['same'], true);
});

faultTest('a connection nobody accepts is a ConnectionRefusedError at connect', async (t) => {
  const h = hosts as TwoHosts;
  const started = Date.now();
  const reply = await ask(client, { type: 'connect-refused', host: h.b.address, port: 1 });
  t.diagnostic(`refused after ${Date.now() - started} ms: ${String(reply['message'])}`);
  assert.equal(reply['name'], 'ConnectionRefusedError', String(reply['message']));
  assert.match(String(reply['message']), new RegExp(`${h.b.address.replace(/\./g, '\\.')}:1: nobody listens`));
});
