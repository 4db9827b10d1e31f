/**
 * The listener's `accept` callback decides each connection before it becomes an endpoint, as ucxx's
 * listener callback does with the connection request: accepted clients talk, refused ones get a
 * ConnectionRefusedError that says the server rejected them (a ucxx-ts client) or fail to connect (UCX's
 * stock example client, which nobody wrote for ucxx-ts), and a refusal reaches neither onConnection, the
 * iterator nor 'connectionError'.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import {
  Context, ConnectionRefusedError, InvalidArgumentError, getUcxVersion, type ConnectionRequest, type Endpoint,
} from 'ucxx-ts';
import { runStockClient } from './helpers/stock-program.js';
import { ROOT, ucxxGate } from './helpers/ucxx-wheel.js';

const TAG = 0xcafen;

async function roundTrip(client: Endpoint, server: Promise<Endpoint>, text: string): Promise<void> {
  const sent = Buffer.from(text);
  await client.tagSend(sent, 7n);
  const ep = await server;
  const buffer = new Uint8Array(64);
  const { length } = await ep.worker.tagRecv(buffer, 7n);
  assert.equal(Buffer.from(buffer.subarray(0, length)).toString(), text);
}

test('accept decides per client: the first two are accepted and talk, the third is refused with a typed error', async () => {
  await using context = new Context();
  const server = context.createWorker();
  const requests: ConnectionRequest[] = [];
  const accepted: Endpoint[] = [];
  const connectionErrors: Error[] = [];
  const listener = server.listen({
    host: '127.0.0.1', port: 0,
    accept: (request) => requests.push(request) <= 2,
  }, (ep) => accepted.push(ep));
  listener.on('connectionError', (err) => connectionErrors.push(err));
  const clientWorker = context.createWorker();
  for (let i = 0; i < 2; i++) {
    const ep = await clientWorker.connect('127.0.0.1', listener.port);
    const handedOut = new Promise<Endpoint>((resolve) => {
      const look = (): void => { if (accepted[i] !== undefined) resolve(accepted[i] as Endpoint); else setTimeout(look, 5); };
      look();
    });
    await roundTrip(ep, handedOut, `client ${i}`);
  }
  const refused = await clientWorker.connect('127.0.0.1', listener.port).then(
    () => assert.fail('the third client was accepted'),
    (err: unknown) => err,
  );
  assert.ok(refused instanceof ConnectionRefusedError, `a ConnectionRefusedError, got ${String(refused)}`);
  assert.equal(refused.code, 'UCS_ERR_NOT_CONNECTED');
  assert.match(refused.message, /UCS_ERR_REJECTED.*the server rejected it/);
  assert.equal(requests.length, 3);
  for (const request of requests) {
    assert.equal(request.listenerPort, listener.port);
    assert.equal(request.clientAddress?.host, '127.0.0.1');
    assert.ok((request.clientAddress?.port ?? 0) > 0);
    // A ucxx-ts client says so in its client id: 'ucxt', its UCX major and minor, whether it answers
    // fast-lane offers (its context has 'am', as the default one does), the worker's number.
    assert.equal(request.fromUcxxTs, true);
    const id = request.clientId ?? 0n;
    assert.equal(id >> 32n, 0x75637874n);
    assert.deepEqual([Number((id >> 24n) & 0xffn), Number((id >> 16n) & 0xffn)], getUcxVersion().slice(0, 2));
    assert.equal(id & 0x8000n, 0x8000n);
    assert.notEqual(id & 0x7fffn, 0n);
  }
  assert.equal(new Set(requests.map((r) => r.clientId)).size, 1, "one worker's requests carry one id");
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(accepted.length, 2, 'a refused client is not handed out');
  assert.deepEqual(connectionErrors, [], "a refusal is the application's choice, not a 'connectionError'");
});

test('accept must be a function', () => {
  const context = new Context();
  try {
    const worker = context.createWorker();
    assert.throws(() => worker.listen({ port: 0, accept: true as unknown as () => boolean }), InvalidArgumentError);
  } finally {
    void context.close();
  }
});

test("UCX's stock client refused by accept fails to connect, and the next one, accepted, delivers its message", async () => {
  await using context = new Context();
  const worker = context.createWorker();
  let seen = 0;
  const accepted: Endpoint[] = [];
  const ids: (bigint | null)[] = [];
  const listener = worker.listen({
    host: '127.0.0.1', port: 0, accept: (request) => { ids.push(request.fromUcxxTs ? -1n : request.clientId); return seen++ > 0; },
  }, (ep) => accepted.push(ep));
  const refused = await runStockClient(['-a', '127.0.0.1', '-p', String(listener.port), '-c', 'tag', '-s', '16']);
  assert.notEqual(refused.code, 0, `the refused stock client reported success:\n${refused.output}`);
  assert.equal(refused.signal, null, refused.output);
  const served = await runStockClient(['-a', '127.0.0.1', '-p', String(listener.port), '-c', 'tag', '-s', '16']);
  assert.equal(served.code, 0, served.output);
  const buffer = new Uint8Array(16);
  const info = await worker.tagRecv(buffer, TAG, undefined, { signal: AbortSignal.timeout(15_000) }).promise;
  assert.equal(info.length, 16);
  assert.equal(seen, 2);
  assert.equal(accepted.length, 1);
  assert.deepEqual(ids, [null, null], 'the stock client sends no client id');
});

test('a real ucxx Python client refused by accept: create_endpoint raises UCXXRejectedError', async (t) => {
  const wheel = ucxxGate(t, getUcxVersion());
  if (wheel === undefined) return;
  await using context = new Context();
  const worker = context.createWorker();
  let asked = 0;
  let fromUcxxTs: boolean | undefined;
  const listener = worker.listen({ host: '127.0.0.1', port: 0, accept: (request) => { asked++; fromUcxxTs = request.fromUcxxTs; return false; } });
  const script = join(ROOT, 'test', 'python', 'ucxx_real_peer.py');
  const python = spawn(wheel.python, ['-u', script, 'client', '127.0.0.1', String(listener.port), 'echo-client'], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  python.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
  python.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
  const timer = setTimeout(() => python.kill('SIGALRM'), 30_000);
  const code = await new Promise<number | null>((resolve) => python.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  assert.equal(code, 1, output);
  assert.match(output, /FAIL in phase connecting: UCXXRejectedError/, output);
  assert.equal(asked, 1);
  assert.equal(fromUcxxTs, false, 'a ucxx Python client is not taken for ucxx-ts');
});
