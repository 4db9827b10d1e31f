/**
 * Closing a listener while a connection to it is being set up. UCX 1.13's TCP connection manager
 * accepts a connection before its client's connection data arrives, and crashes when the data arrives
 * after the listener was destroyed (docs/ucx-1.13-bugs/listener_destroy_conn_request.c). The listener
 * runs in a peer process; the test holds the window open with a plain TCP client that sends the
 * connection manager's header only after the close.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { connect, type Socket } from 'node:net';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { readFileSync } from 'node:fs';
import { BusyError, Context } from 'ucxx-ts';
import { peerEnvironment } from './helpers/env.js';
import { Peer } from './helpers/peer.js';
import { sleep, within } from './helpers/deadline.js';

/** uct_tcp_sockcm_priv_data_hdr_t: size_t length, uint8_t status (7 bytes of padding). */
const HEADER_BYTES = 16;
const UCS_ERR_REJECTED = -23;

async function connectRaw(port: number): Promise<{ socket: Socket; reply: Promise<Buffer> }> {
  const socket = connect(port, '127.0.0.1');
  await within(new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject)), 10_000, 'the TCP connect');
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  const reply = new Promise<Buffer>((resolve) => {
    socket.on('error', () => resolve(Buffer.concat(chunks)));
    socket.on('close', () => resolve(Buffer.concat(chunks)));
  });
  return { socket, reply };
}

test('a client whose connection data arrives after listener.close() is refused, and the listener process lives', async () => {
  const peer = Peer.start('listener-close');
  try {
    await peer.next('ready');
    const port = (await peer.call({ type: 'listen' }, 'listening'))['port'] as number;
    const client = await connectRaw(port);
    await sleep(200); // UCX's async thread accepts the connection and waits for its data
    const closed = await peer.call({ type: 'close' }, 'closed');
    assert.equal(closed['closed'], true);
    assert.equal((closed['diagnostics'] as { listeners: number }).listeners, 0, 'a closed listener is not counted as live');
    client.socket.write(Buffer.alloc(HEADER_BYTES)); // an empty connection request
    const reply = await within(client.reply, 10_000, 'the answer to the late connection request');
    assert.equal(reply.length, HEADER_BYTES, `the listener answers with a bare header; got ${reply.toString('hex')}`);
    assert.equal(reply.readInt8(8), UCS_ERR_REJECTED, `the status in the answer: ${reply.toString('hex')}`);
    assert.equal(await peer.stop(), 0, peer.stderr);
  } finally {
    peer.child.kill('SIGKILL');
  }
  assert.doesNotMatch(peer.stderr, /Caught signal|Segmentation/);
});

test('a listener closed with a connection in flight gives its port up to a new listener at once', async () => {
  const peer = Peer.start('listener-close');
  try {
    await peer.next('ready');
    const port = (await peer.call({ type: 'listen' }, 'listening'))['port'] as number;
    const client = await connectRaw(port);
    await sleep(200);
    await peer.call({ type: 'close' }, 'closed');
    const relistened = await peer.call({ type: 'relisten' }, 'relistened');
    assert.equal(relistened['port'], port);
    client.socket.destroy(); // a connection that closes without its data is safe in UCX 1.13
    assert.equal(await peer.stop(), 0, peer.stderr);
  } finally {
    peer.child.kill('SIGKILL');
  }
  assert.doesNotMatch(peer.stderr, /Caught signal|Segmentation/);
});

test('listeners closed while a client of the same process connects: every connect settles, refused or connected', async (t) => {
  const peer = Peer.start('listener-close');
  try {
    await peer.next('ready');
    const raced = await peer.call({ type: 'race', ms: 3000 }, 'raced', 60_000);
    t.diagnostic(JSON.stringify(raced));
    assert.ok((raced['tries'] as number) >= 20, `only ${String(raced['tries'])} tries`);
    assert.deepEqual(raced['others'], [], 'a connect to a closing listener fails only as ConnectionRefusedError');
    assert.equal((raced['connected'] as number) + (raced['refused'] as number), raced['tries']);
    assert.equal(await peer.stop(), 0, peer.stderr);
  } finally {
    peer.child.kill('SIGKILL');
  }
  assert.doesNotMatch(peer.stderr, /Caught signal|Segmentation/);
});

test('a process that exits while its own client connects to its own listener does not crash', () => {
  // Spins of 0.8-2 ms put the exit where, without the listener's drain, it crashed (docs/reliability.md).
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'peers', 'listener-close.js');
  for (let i = 0; i < 12; i++) {
    const spinMs = 0.8 + (i % 6) * 0.24;
    const result = spawnSync(process.execPath, [script, JSON.stringify({ exitWhileConnectingMs: spinMs })], {
      encoding: 'utf8', timeout: 30_000, env: peerEnvironment(),
    });
    assert.equal(result.signal, null, `run ${i} (${spinMs} ms) killed by ${result.signal}: ${result.stderr}`);
    assert.equal(result.status, 0, `run ${i}: ${result.stderr}`);
    assert.doesNotMatch(result.stderr, /Caught signal|Bug:/);
  }
});

/** Whether a TCP socket whose local port is `port` is in TIME_WAIT (/proc/net/tcp, state 06). */
function timeWaitOnPort(port: number): boolean {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  return readFileSync('/proc/net/tcp', 'latin1').split('\n').slice(1).some((line) => {
    const fields = line.trim().split(/\s+/);
    return fields[1]?.endsWith(`:${hex}`) === true && fields[3] === '06';
  });
}

/**
 * A server whose context has `reuseAddress` as given accepts one client and closes the connection
 * first (so the server's side of it lingers in TIME_WAIT), then closes; returns its port.
 */
async function serverClosedFirst(reuseAddress: boolean): Promise<number> {
  await using old = new Context({ reuseAddress });
  await using other = new Context();
  const listener = old.createWorker().listen({ host: '127.0.0.1', port: 0 });
  const accepted = listener[Symbol.asyncIterator]().next();
  const client = await other.createWorker().connect('127.0.0.1', listener.port);
  const next = await within(accepted, 5000, 'the accepted endpoint');
  assert.ok(next.done !== true);
  const clientClosed = new Promise<void>((resolve) => client.once('close', () => resolve()));
  await next.value.close();
  await within(clientClosed, 5000, "the client seeing the server's close");
  listener.close();
  return listener.port;
}

test('reuseAddress: a restarted server gets its port back at once over its own TIME_WAIT connections; after a server without it, listen() says why the port is busy', async () => {
  const reused = await serverClosedFirst(true);
  assert.ok(timeWaitOnPort(reused), `no TIME_WAIT socket on port ${reused}: the test shows nothing`);
  {
    await using context = new Context();
    const listener = context.createWorker().listen({ host: '127.0.0.1', port: reused });
    assert.equal(listener.port, reused);
    listener.close();
  }
  const held = await serverClosedFirst(false);
  assert.ok(timeWaitOnPort(held), `no TIME_WAIT socket on port ${held}: the test shows nothing`);
  await using context = new Context();
  assert.throws(() => context.createWorker().listen({ host: '127.0.0.1', port: held }), (err: unknown) => {
    assert.ok(err instanceof BusyError, `not a BusyError: ${String(err)}`);
    assert.match(err.message, /TIME_WAIT/);
    return true;
  });
});
