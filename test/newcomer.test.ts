/**
 * What a newcomer's first programs hit, as separate processes talking through UCX: where UCX's own log
 * goes, active messages that arrive before their handler, bare SharedArrayBuffers on every data path,
 * and a tag probe that waits for a message of unknown size.
 */
import { after, before, describe, test } from 'node:test';
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import {
  AM_IDS_HELD, CanceledError, Context, createRemoteKeyFromSerialized, getDiagnostics, type AmMessage, type Endpoint, type Worker,
} from 'ucxx-ts';
import { Peer } from './helpers/peer.js';
import { peerEnvironment } from './helpers/env.js';
import { firstMismatch, pattern } from './helpers/pattern.js';

const PEERS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'peers');
const ECHO = 1n << 63n;

describe("UCX's own log", () => {
  const run = (env: NodeJS.ProcessEnv): { stdout: string; stderr: string; report: { code?: string; logFile?: string } } => {
    const result = spawnSync(process.execPath, [path.join(PEERS, 'ucx-log.js')], {
      encoding: 'utf8', timeout: 30_000, env: peerEnvironment(env),
    });
    assert.equal(result.status, 0, `status ${String(result.status)}: ${result.stderr}`);
    const lines = result.stdout.trim().split('\n');
    return { stdout: result.stdout, stderr: result.stderr, report: JSON.parse(lines[lines.length - 1] as string) };
  };

  test('goes to stderr, leaving stdout to the program; UCX_LOG_FILE set by the user wins', () => {
    const plain = run({});
    assert.equal(plain.report.code, 'UCS_ERR_NO_DEVICE');
    assert.equal(plain.report.logFile, 'stderr');
    assert.doesNotMatch(plain.stdout, /UCX/, 'UCX wrote to stdout');
    assert.match(plain.stderr, /UCX {2}WARN .*no_such_transport/);
    assert.match(plain.stderr, /UCX {2}ERROR no usable transports/);
    // The user's choice: UCX's own stdout.
    const mine = run({ UCX_LOG_FILE: 'stdout' });
    assert.equal(mine.report.logFile, 'stdout');
    assert.match(mine.stdout, /UCX {2}ERROR no usable transports/);
    assert.doesNotMatch(mine.stderr, /UCX/);
  });
});

describe('with a peer', () => {
  let peer: Peer;
  let context: Context;
  let worker: Worker;
  let endpoint: Endpoint;

  before(async () => {
    peer = Peer.start('echo-peer');
    const ready = await peer.next('ready');
    context = new Context();
    worker = context.createWorker();
    endpoint = await worker.connect('127.0.0.1', ready['port'] as number);
    await peer.next('connected');
  });

  after(async () => {
    await context.close();
    assert.equal(await peer.stop(), 0, peer.stderr);
    assert.equal(getDiagnostics().amMessagesHeld, 0);
  });

  /** Messages the peer sends on `id` (header [i], payload pattern(seed + i)) as they arrive here. */
  const expectMessages = async (messages: AmMessage[], count: number, size: number, seed: number): Promise<void> => {
    assert.equal(messages.length, count);
    for (const [i, message] of messages.entries()) {
      assert.equal(message.header[0], i, 'in the order sent');
      const data = await message.receive();
      assert.equal(data.byteLength, size);
      assert.equal(firstMismatch(data, pattern(seed + i, size)), -1);
    }
  };

  test('active messages sent before the handler is set wait for it: eager and rendezvous, in order', async () => {
    const id = 7;
    assert.ok(id < AM_IDS_HELD);
    // The peer sends before this process has any handler or iterator for the id.
    await peer.call({ type: 'send-am', id, count: 5, size: 100, seed: 10, protocol: 'eager' }, 'am-sent');
    const eagerDone = await peer.next('am-done');
    assert.deepEqual(eagerDone['outcomes'], ['ok', 'ok', 'ok', 'ok', 'ok']);
    await peer.call({ type: 'send-am', id, count: 2, size: 1 << 20, seed: 20, protocol: 'rendezvous' }, 'am-sent');
    const deadline = Date.now() + 10_000;
    while (getDiagnostics().amMessagesHeld < 7 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(getDiagnostics().amMessagesHeld, 7, 'held for the handler to come');

    const messages: AmMessage[] = [];
    let resolve!: () => void;
    const all = new Promise<void>((r) => { resolve = r; });
    worker.setAmHandler(id, (message) => {
      messages.push(message);
      if (messages.length === 7) resolve();
    });
    assert.equal(messages.length, 0, 'handed over after setAmHandler returns, not inside it');
    await all;
    assert.equal(getDiagnostics().amMessagesHeld, 0);
    await expectMessages(messages.slice(0, 5), 5, 100, 10);
    assert.ok(messages.slice(5).every((m) => m.rendezvous));
    const rendezvous = messages.slice(5).map((m, i) => Object.assign(m, { header: new Uint8Array([i]) }));
    await expectMessages(rendezvous, 2, 1 << 20, 20);
    assert.deepEqual((await peer.next('am-done'))['outcomes'], ['ok', 'ok'], "the senders' requests completed");
    worker.setAmHandler(id, null);
  });

  test('messages an ended amMessages iterator did not take go to the next handler of the id', async () => {
    const id = 8;
    const iterator = worker.amMessages(id);
    const first = iterator.next();
    await peer.call({ type: 'send-am', id, count: 3, size: 64, seed: 30, protocol: 'eager' }, 'am-sent');
    await peer.next('am-done');
    const taken = (await first).value as AmMessage;
    assert.equal(taken.header[0], 0);
    // The other two arrive into the iterator's queue (or, later, to the id without a handler): either
    // way they are held once the iterator ends.
    await new Promise((r) => setTimeout(r, 50));
    await iterator.return?.();
    const deadline = Date.now() + 10_000;
    while (getDiagnostics().amMessagesHeld < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(getDiagnostics().amMessagesHeld, 2);
    const rest: AmMessage[] = [];
    for await (const message of worker.amMessages(id)) {
      rest.push(message);
      if (rest.length === 2) break;
    }
    assert.deepEqual(rest.map((m) => m.header[0]), [1, 2]);
    for (const [i, message] of rest.entries()) {
      assert.equal(firstMismatch(await message.receive(), pattern(31 + i, 64)), -1);
    }
  });

  test('a bare SharedArrayBuffer works on every data path: tag, stream, AM, RMA', async () => {
    const size = 64 << 10;
    const source = new SharedArrayBuffer(size);
    new Uint8Array(source).set(pattern(41, size));
    // tag: send from one, receive into another (the peer echoes tags >= 2^63)
    const back = new SharedArrayBuffer(size);
    const receive = worker.tagRecv(back, ECHO | 41n);
    await endpoint.tagSend(source, ECHO | 41n);
    assert.equal((await receive).length, size);
    assert.equal(firstMismatch(new Uint8Array(back), pattern(41, size)), -1);
    // stream: the peer echoes stream bytes
    await endpoint.streamSend(source);
    const streamed = new SharedArrayBuffer(size);
    assert.equal(await endpoint.streamRecv(streamed, { waitAll: true }), size);
    assert.equal(firstMismatch(new Uint8Array(streamed), pattern(41, size)), -1);
    // AM: the peer answers id 1 on id 2 with the same header and payload
    const reply = worker.amMessages(2);
    const header = new SharedArrayBuffer(4);
    new Uint8Array(header).set([1, 2, 3, 4]);
    await endpoint.amSend(1, header, source, { reply: true });
    const answer = (await reply.next()).value as AmMessage;
    await reply.return?.();
    assert.deepEqual([...answer.header], [1, 2, 3, 4]);
    assert.equal(firstMismatch(await answer.receive(new SharedArrayBuffer(size)), pattern(41, size)), -1);
    // RMA: put from, and get into, SharedArrayBuffers through the peer's key
    const keys = new Uint8Array(1024);
    const keyed = worker.tagRecv(keys, 1n);
    await peer.call({ type: 'send-keys' }, 'keys-sent');
    const key = createRemoteKeyFromSerialized(endpoint, keys.subarray(0, (await keyed).length));
    await worker.tagRecv(new Uint8Array(1024), 2n); // the second key: not used
    const small = new SharedArrayBuffer(256);
    new Uint8Array(small).set(pattern(42, 256));
    await endpoint.memPut(small, key, 512);
    await endpoint.flush();
    const got = new SharedArrayBuffer(256);
    await endpoint.memGet(got, key, 512);
    await endpoint.flush();
    assert.equal(firstMismatch(new Uint8Array(got), pattern(42, 256)), -1);
    key.close();
  });

  test('tagProbeWait waits for a message of unknown size; receive it into exactly its size', async () => {
    const tag = 0x5a5an;
    for (const size of [100, 4 << 20]) {
      const probe = worker.tagProbeWait(tag, undefined, { remove: true, signal: AbortSignal.timeout(30_000) });
      assert.equal(worker.tagProbe(tag), null, 'nothing has arrived yet');
      // A rendezvous send completes only once received here: wait for 'sent' after the receive.
      const sent = peer.call({ type: 'send-tag', size, seed: size, tag: String(tag) }, 'sent');
      const found = await probe;
      assert.equal(found.length, size);
      assert.equal(found.senderTag, tag);
      const buffer = new Uint8Array(found.length);
      assert.equal((await (found.receive as NonNullable<typeof found.receive>)(buffer)).length, size);
      assert.equal(firstMismatch(buffer, pattern(size, size)), -1);
      await sent;
    }
  });

  test('tagProbeWait: a signal rejects it with CanceledError carrying the reason; so does closing the worker', async () => {
    const err = await worker.tagProbeWait(0x5a5bn, undefined, { signal: AbortSignal.timeout(20) }).then(() => null, (e: unknown) => e);
    assert.ok(err instanceof CanceledError, String(err));
    assert.equal((err.cause as Error).name, 'TimeoutError');
    const other = context.createWorker();
    const waiting = other.tagProbeWait(1n);
    await other.close();
    await assert.rejects(waiting, CanceledError);
  });
});

