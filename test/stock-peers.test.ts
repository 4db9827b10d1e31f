/**
 * Stock UCX programs, run with UCX's defaults, against ucxx-ts run with its defaults.
 *
 * The peer is UCX's own client-server example, `ucp_client_server.c`, which Debian ships with
 * libucx-dev (/usr/share/doc/libucx-dev/examples): nobody wrote it for ucxx-ts. It is compiled as it is
 * and run with an environment that holds PATH and nothing else, so no UCX_* setting of this process
 * reaches it. It moves one message per connection, client to server, with one API (tag, stream or AM,
 * its `-c`), in a context with that one feature; the client asks for peer error handling, the server
 * takes whatever mode the client chose. Its server prints the received string; its client sends
 * `'A' + i % 26` for i < size - 1, then a NUL.
 *
 * What is checked: in both roles and for each API, the bytes arrive exactly (the stock server prints
 * ours; we check the stock client's), nothing crashes on either side, and the stock server stays up for
 * the next client. Where UCX 1.13 itself cannot connect (a stream endpoint in PEER mode between contexts
 * whose features differ), the error says what to set, and setting it works.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Context, UnreachableError, getUcxVersion, type ContextOptions, type Endpoint } from 'ucxx-ts';
import { ucxProfileOfRun } from './helpers/env.js';
import { eventually, within } from './helpers/deadline.js';
import { STOCK_STEP_MS as STEP_MS, StockProgram } from './helpers/stock-program.js';

const TAG = 0xcafen;
const AM_ID = 0;
/** One eager size and one above every rendezvous threshold on this host. */
const SIZES = [16, 200_000];
type Api = 'tag' | 'stream' | 'am';
const APIS: Api[] = ['tag', 'stream', 'am'];

/** A message the stock server will print whole: printable, unique per (api, size), NUL-terminated. */
function ourMessage(api: Api, size: number): Uint8Array {
  const text = `ucxx-ts->${api}:${size}:`;
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size - 1; i++) bytes[i] = i < text.length ? text.charCodeAt(i) : 0x61 + ((i * 7) % 26);
  return bytes;
}

/** What the stock client sends: generate_test_string() in hello_world_util.h. */
function stockMessage(size: number): Uint8Array {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size - 1; i++) bytes[i] = 0x41 + (i % 26);
  return bytes;
}

/** Waits for the stock client to exit, and checks that it exited by itself with status 0. */
async function exitsCleanly(client: StockProgram): Promise<void> {
  const { code, signal } = await withinPeer(client.exited, 'the stock client to exit', client);
  assert.equal(signal, null, `the stock client was killed by ${signal}:\n${client.output}`);
  assert.equal(code, 0, `the stock client failed:\n${client.output}`);
}

/** `within`, with the stock program's output so far in the timeout's message. */
function withinPeer<T>(promise: PromiseLike<T>, what: string, peer: StockProgram, ms = STEP_MS): Promise<T> {
  return within(promise, ms, () => `${what}; stock program output:\n${peer.output}`);
}

/** Sends one message; the stock server closes its endpoint as soon as it has it, so no flush follows. */
async function send(endpoint: Endpoint, api: Api, message: Uint8Array): Promise<void> {
  if (api === 'tag') await endpoint.tagSend(message, TAG);
  else if (api === 'stream') await endpoint.streamSend(message);
  else await endpoint.amSend(AM_ID, null, message);
}

/** ucxx-ts connects to a running stock server, sends one message per size, checks the server printed it. */
async function clientRun(api: Api, contextOptions: ContextOptions, errorHandling?: 'peer'): Promise<void> {
  for (const size of SIZES) {
    const server = new StockProgram(['-p', '0', '-c', api, '-s', String(size)]);
    try {
      const port = Number((await server.waitFor(/listening on IP \S+ port (\d+)/, 'its port'))?.[1]);
      await using context = new Context(contextOptions);
      const worker = context.createWorker();
      const endpoint = await withinPeer(worker.connect('127.0.0.1', port, errorHandling === undefined ? {} : { errorHandling }), 'connect', server);
      const message = ourMessage(api, size);
      await withinPeer(send(endpoint, api, message), `${api} send of ${size} B`, server);
      const printed = Buffer.from(message.subarray(0, size - 1)).toString('latin1');
      await server.waitFor(/UCP TEST SUCCESS/, 'the server to receive', STEP_MS);
      await server.waitFor(printed, `the server to print our ${size} B message`);
      await endpoint.close();
      // The server loops for the next client: it must still be alive after ours closed.
      await server.waitFor(/Waiting for connection...\n[\s\S]*Waiting for connection.../, 'the server to wait for the next client');
      assert.ok(server.running, `the stock server died:\n${server.output}`);
    } finally {
      server.kill();
    }
  }
}

for (const api of APIS) {
  test(`stock UCX ${api} server (UCX defaults), ucxx-ts client (defaults): the server gets our bytes and lives on`, async () => {
    await clientRun(api, {});
  });

  test(`stock UCX ${api} client (UCX defaults, peer error handling), ucxx-ts server (defaults): we get its bytes`, async () => {
    for (const size of SIZES) {
      await using context = new Context(api === 'stream' ? { features: ['stream', 'wakeup'] } : {});
      const worker = context.createWorker();
      const listener = worker.listen({ host: '127.0.0.1', port: 0 });
      const accepted = listener[Symbol.asyncIterator]().next();
      const received = new Uint8Array(size);
      let amReceived: Promise<Uint8Array> | undefined;
      if (api === 'am') {
        amReceived = (async () => {
          for await (const message of worker.amMessages(AM_ID)) return (await message.receive()) as Uint8Array;
          throw new Error('the AM iterator ended');
        })();
      }
      const tagReceived = api === 'tag' ? worker.tagRecv(received, TAG) : undefined;
      const client = new StockProgram(['-a', '127.0.0.1', '-p', String(listener.port), '-c', api, '-s', String(size)]);
      try {
        const endpoint = (await withinPeer(accepted, 'the accepted endpoint', client)).value as Endpoint | undefined;
        assert.ok(endpoint !== undefined);
        let bytes: Uint8Array;
        if (api === 'tag') {
          const info = await withinPeer((tagReceived as NonNullable<typeof tagReceived>).promise, 'the tag message', client);
          bytes = received.subarray(0, info.length);
        } else if (api === 'stream') {
          const n = await withinPeer<number>(endpoint.streamRecv(received, { waitAll: true }).promise, 'the stream bytes', client);
          bytes = received.subarray(0, n);
        } else {
          bytes = await withinPeer(amReceived as Promise<Uint8Array>, 'the active message', client);
        }
        assert.deepEqual(Buffer.from(bytes), Buffer.from(stockMessage(size)), `${api} ${size} B from the stock client`);
        await exitsCleanly(client);
        void endpoint.close();
      } finally {
        client.kill();
      }
    }
  });
}

test('stock UCX stream client: an ucxx-ts server takes its bytes by polling (streamReadyEndpoints, streamRecvAvailable)', async () => {
  for (const size of SIZES) {
    await using context = new Context({ features: ['stream', 'wakeup'] });
    const worker = context.createWorker();
    const listener = worker.listen({ host: '127.0.0.1', port: 0 });
    const accepted = listener[Symbol.asyncIterator]().next();
    const client = new StockProgram(['-a', '127.0.0.1', '-p', String(listener.port), '-c', 'stream', '-s', String(size)]);
    try {
      const endpoint = (await withinPeer(accepted, 'the accepted endpoint', client)).value as Endpoint | undefined;
      assert.ok(endpoint !== undefined);
      const received = new Uint8Array(size);
      let filled = 0;
      const deadline = Date.now() + STEP_MS;
      while (filled < size) {
        assert.ok(Date.now() < deadline, `${filled} of ${size} stream bytes by polling:\n${client.output}`);
        for (const ready of worker.streamReadyEndpoints()) {
          assert.equal(ready, endpoint);
          filled += ready.streamRecvAvailable(received.subarray(filled));
        }
        await new Promise(setImmediate);
      }
      assert.deepEqual(Buffer.from(received), Buffer.from(stockMessage(size)), `stream ${size} B by polling`);
      await exitsCleanly(client);
      void endpoint.close();
    } finally {
      client.kill();
    }
  }
});

test('stream in PEER mode between contexts of different features: where UCX cannot wire them (1.13) a clear error naming the fix, where it can (1.20) they talk; the fix works on both', async () => {
  // Between hosts ucxx-ts uses PEER mode, where UCX 1.13 cannot wire a stream endpoint between contexts
  // with different features; 'peer' on one host reproduces that. UCX 1.20 wires them.
  if (ucxProfileOfRun(getUcxVersion()).unavoidableBugs.featureMismatchUnreachable) {
    const server = new StockProgram(['-p', '0', '-c', 'stream', '-s', '16']);
    try {
      const port = Number((await server.waitFor(/listening on IP \S+ port (\d+)/, 'its port'))?.[1]);
      await using context = new Context();
      const worker = context.createWorker();
      const err = await withinPeer(worker.connect('127.0.0.1', port, { errorHandling: 'peer' }).then(
        () => assert.fail('connect succeeded between a full-featured and a stream-only context in PEER mode'),
        (e: unknown) => e,
      ), 'the refused connect', server);
      assert.ok(err instanceof UnreachableError, `expected UnreachableError, got ${String(err)}`);
      assert.match((err as Error).message, /features differ.*features: \['stream', 'wakeup'\]/s);
    } finally {
      server.kill();
    }
  } else {
    await clientRun('stream', {}, 'peer');
  }
  await clientRun('stream', { features: ['stream', 'wakeup'] }, 'peer');
});

test('every accepted connection is handed out: stock clients that send one tag message and close at once', async () => {
  const CLIENTS = 8;
  await using context = new Context();
  const worker = context.createWorker();
  const accepted: Endpoint[] = [];
  const closed: Promise<void>[] = [];
  const errors: string[] = [];
  const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (endpoint) => {
    accepted.push(endpoint);
    endpoint.on('error', (err: Error) => errors.push(`${endpoint.peer}: ${err.message}`));
    closed.push(new Promise((resolve) => endpoint.once('close', () => resolve())));
  });
  for (let i = 0; i < CLIENTS; i++) {
    const client = new StockProgram(['-a', '127.0.0.1', '-p', String(listener.port), '-c', 'tag', '-s', '16']);
    try {
      const { code, signal } = await withinPeer(client.exited, `stock client #${i} to exit`, client);
      assert.equal(signal, null, client.output);
      assert.equal(code, 0, client.output);
    } finally {
      client.kill();
    }
  }
  // Every connection reaches the application, and every message waits in the worker for a receive.
  await eventually(() => accepted.length >= CLIENTS, STEP_MS, 10);
  assert.equal(accepted.length, CLIENTS, `${accepted.length} of ${CLIENTS} accepted connections were handed out`);
  for (let i = 0; i < CLIENTS; i++) {
    const buffer = new Uint8Array(16);
    const info = await worker.tagRecv(buffer, TAG, undefined, { signal: AbortSignal.timeout(STEP_MS) }).promise;
    assert.equal(info.length, 16);
    assert.deepEqual(Buffer.from(buffer), Buffer.from(stockMessage(16)));
  }
  // Each handed-out endpoint reports that its client left.
  await Promise.race([
    Promise.all(closed),
    new Promise((_, reject) => setTimeout(() => reject(new Error('not every accepted endpoint reported its close')), STEP_MS)),
  ]);
  // The stock client closes its endpoint: a close, not a failure, on this side.
  assert.deepEqual(errors, [], "a client's close is no 'error'");
  assert.ok(accepted.every((endpoint) => endpoint.closedByPeer), 'every accepted endpoint says its peer closed it');
});

// A server that exits by process.exit() right after UCX's stock AM client sent it a message: its
// endpoint's close by the peer may be half done then, and the teardown at exit closed that ucp_ep a
// second time (UCX 1.13: an assertion in ucp_ep_close_nbx, 1.20: SIGSEGV), in most runs.
test('process.exit() right after an active message from the stock client: no crash at exit (eager and rendezvous, event and polling, 20 runs)', { timeout: 240_000 }, async () => {
  const server = join(dirname(fileURLToPath(import.meta.url)), 'peers', 'am-exit-server.js');
  // Whether the peer's close had reached the endpoint when the process exited, per run (both occur).
  const outcomes: string[] = [];
  for (let run = 0; run < 20; run++) {
    const size = run % 2 === 0 ? 16 : 200_000;
    const mode = run % 4 < 2 ? 'event' : 'polling';
    const child = spawn(process.execPath, [server, String(size), mode], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    let client: StockProgram | undefined;
    try {
      const deadline = Date.now() + STEP_MS;
      while (!/^PORT \d+$/m.test(output)) {
        assert.ok(child.exitCode === null && Date.now() < deadline, `run ${run}: the server did not listen:\n${output}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const port = Number(/^PORT (\d+)$/m.exec(output)?.[1]);
      client = new StockProgram(['-a', '127.0.0.1', '-p', String(port), '-c', 'am', '-s', String(size)]);
      const { code, signal } = await withinPeer(exited, `run ${run}: the server to exit`, client);
      assert.deepEqual({ code, signal }, { code: 0, signal: null }, `run ${run} (${size} B, ${mode}): the server's exit; its output:\n${output}`);
      assert.match(output, new RegExp(`^GOT ${size} `, 'm'));
      outcomes.push(/^GOT \d+ (\w+)/m.exec(output)?.[1] ?? '?');
    } finally {
      client?.kill();
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }
  assert.equal(outcomes.length, 20);
});
