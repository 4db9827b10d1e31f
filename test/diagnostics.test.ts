/** getDiagnostics(): live object counts per thread, back to zero once everything is closed. */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { Worker as Thread } from 'node:worker_threads';
import { Context, createRemoteKeyFromSerialized, getDiagnostics } from 'ucxx-ts';
import { within } from './helpers/deadline.js';
import { spawnSync } from 'node:child_process';
import { peerEnvironment } from './helpers/env.js';

test('counts follow creation and close, and return to zero', async () => {
  const before = getDiagnostics();
  const context = new Context();
  const worker = context.createWorker();
  const listener = worker.listen({ host: '127.0.0.1', port: 0 });
  const endpoint = await worker.connect('127.0.0.1', listener.port);
  const region = context.createMemoryHandle(4096);
  createRemoteKeyFromSerialized(endpoint, region.createRemoteKey().serialize());
  const receive = worker.tagRecv(new Uint8Array(8), 5n);
  const live = getDiagnostics();
  assert.equal(live.contexts, before.contexts + 1);
  assert.equal(live.workers, before.workers + 1);
  assert.equal(live.listeners, before.listeners + 1);
  assert.ok(live.endpoints >= before.endpoints + 1, 'the client endpoint (the accepted one may still be on its way)');
  assert.ok(live.memoryMappings >= before.memoryMappings + 1);
  assert.equal(live.remoteKeys, before.remoteKeys + 1);
  assert.ok(live.requestsInFlight >= 1);
  assert.equal(live.relayThreads, 0, 'the main thread watches its fd with a koffi poll');
  await context.close();
  await receive.catch(() => undefined);
  assert.deepEqual(getDiagnostics(), before);
});

test('in a worker thread: one relay thread per worker while it lives', async () => {
  const code = `
    const { parentPort } = require('node:worker_threads');
    import(${JSON.stringify(import.meta.resolve('ucxx-ts'))}).then(async ({ Context, getDiagnostics }) => {
      const context = new Context();
      context.createWorker();
      context.createWorker({ progressMode: 'manual' });
      const live = getDiagnostics();
      await context.close();
      // Relays see STOP within their poll timeout: wait for that, up to 5 s (the machine may be loaded).
      const deadline = Date.now() + 5000;
      while (getDiagnostics().relayThreads !== 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      parentPort.postMessage({ live, after: getDiagnostics() });
    });`;
  const thread = new Thread(code, { eval: true });
  const { live, after } = await within(new Promise<{ live: Record<string, number>; after: Record<string, number> }>(
    (resolve, reject) => { thread.once('message', resolve); thread.once('error', reject); }), 20_000, "the thread's report");
  assert.equal(live['workers'], 2);
  assert.equal(live['relayThreads'], 1, "an 'event' worker has a relay, a 'manual' one none");
  assert.deepEqual(Object.values(after).filter((n) => n !== 0), [], JSON.stringify(after));
});

// Five in a row, so that an exit held now and then shows.
test('in a worker thread: the thread exits once its context is closed (5 threads, one after another)', async () => {
  const code = `
    import(${JSON.stringify(import.meta.resolve('ucxx-ts'))}).then(async ({ Context }) => {
      const context = new Context();
      context.createWorker();
      context.createWorker({ progressMode: 'manual' });
      await context.close();
    });`;
  for (let i = 0; i < 5; i++) {
    const thread = new Thread(code, { eval: true });
    const exited = new Promise<number>((resolve) => thread.once('exit', resolve));
    thread.once('error', () => undefined);
    assert.equal(await within(exited, 10_000, `thread ${i} exits`), 0);
  }
});

test('NODE_DEBUG=ucxx logs the lifecycle of contexts, workers, listeners and endpoints, and a refused connect', async () => {
  // A child, since util.debuglog reads NODE_DEBUG once per process.
  const code = `
    import(${JSON.stringify(import.meta.resolve('ucxx-ts'))}).then(async ({ Context }) => {
      const context = new Context();
      const worker = context.createWorker();
      const listener = worker.listen({ host: '127.0.0.1', port: 0 });
      const endpoint = await worker.connect('127.0.0.1', listener.port);
      await endpoint.close();
      const port = listener.port;
      listener.close();
      await worker.connect('127.0.0.1', port).then(() => { throw new Error('connected to a closed listener'); }, () => undefined);
      await context.close();
      console.log('DONE');
    });
  `;
  const run = (env: NodeJS.ProcessEnv) => spawnSync(process.execPath, ['--input-type=module', '-e', code], {
    env: peerEnvironment(env), encoding: 'utf8', timeout: 30_000,
  });
  const logged = run({ NODE_DEBUG: 'ucxx' });
  assert.equal(logged.status, 0, logged.stderr);
  assert.match(logged.stdout, /^DONE$/m);
  const lines = logged.stderr.split('\n').filter((line) => /^UCXX \d+: /.test(line)).map((line) => line.replace(/^UCXX \d+: /, ''));
  const expect = [
    /^context created \(features .*tag.*\)/,
    /^worker created \(progress event\)/,
    /^listener on 127\.0\.0\.1:\d+ open$/,
    /^endpoint #\d+ to 127\.0\.0\.1:\d+ created \(error handling (none|peer)\)$/,
    /^connect to 127\.0\.0\.1:\d+ established/,
    /^endpoint #\d+ to 127\.0\.0\.1:\d+ closed$/,
    /^listener on :\d+ closed$/,
    /^connect to 127\.0\.0\.1:\d+ refused/,
    /^worker destroyed \(the worker was closed; 0 operations abandoned\)$/,
    /^context closed$/,
  ];
  for (const re of expect) assert.ok(lines.some((line) => re.test(line)), `no line matches ${re}:\n${lines.join('\n')}`);
  // In order: creation before use, destruction last.
  const at = (re: RegExp) => lines.findIndex((line) => re.test(line));
  assert.ok(at(/^context created/) < at(/^worker created/) && at(/^worker destroyed/) < at(/^context closed$/), lines.join('\n'));
  // Without NODE_DEBUG, nothing.
  const quiet = run({});
  assert.equal(quiet.status, 0, quiet.stderr);
  assert.doesNotMatch(quiet.stderr, /^UCXX \d+:/m);
});

test('a Context whose construction failed is not counted', () => {
  const before = getDiagnostics().contexts;
  // Both are refused by the option check that runs after ucp_init.
  for (const config of [{ NOT_AN_OPTION: 'x' }, { TCP_NOT_AN_OPTION: 'x' }] as Record<string, string>[]) {
    assert.throws(() => new Context({ config }), (err: { code?: string }) => err.code === 'UCS_ERR_NO_ELEM');
    assert.equal(getDiagnostics().contexts, before, JSON.stringify(config));
  }
});
