/**
 * ucxx-ts in `worker_threads`: threads with their own Context talk to each other and to the main thread;
 * every way a thread can end leaves the process alive and its exit clean; a region whose owner's main
 * thread blocks is served by a progress thread (examples/blocking-owner.ts).
 */
import { describe, test } from 'node:test';
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { Worker as Thread } from 'node:worker_threads';
import { Context, createRemoteKeyFromSerialized } from 'ucxx-ts';
import { participant, type ExchangeInfo, type ExchangeReport } from './helpers/thread-exchange.js';
import { within } from './helpers/deadline.js';
import { failsAtOnce } from './helpers/fails-at-once.js';
import { assertNoUcxNoise } from './helpers/ucx-noise.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const THREAD = path.join(HERE, 'peers', 'ucxx-thread.js');
const EXAMPLES = path.join(HERE, '..', 'examples');

function nextMessage<T>(thread: Thread, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: { type: string }): void => {
      if (message.type !== type) return;
      thread.off('message', onMessage);
      thread.off('error', reject);
      resolve(message as T);
    };
    thread.on('message', onMessage);
    thread.once('error', reject);
  });
}

describe('threads', () => {
  test('two threads and the main thread, each with its own Context, exchange tag messages and RMA byte-exact', async () => {
    await using context = new Context();
    const worker = context.createWorker();
    const region = context.createMemoryHandle(64 * 1024);
    const threads = [1, 2].map((id) => new Thread(THREAD, { workerData: { role: 'exchange', id } }));
    const exited = threads.map((thread) => new Promise<number>((resolve) => thread.once('exit', resolve)));
    const infos = await Promise.all(threads.map((thread) => nextMessage<{ info: ExchangeInfo }>(thread, 'info')));
    const roster: ExchangeInfo[] = [
      { id: 0, address: worker.getAddress(), key: region.createRemoteKey().serialize() },
      ...infos.map((m) => m.info),
    ];
    const phaseDone = threads.map((thread) => nextMessage(thread, 'phase-done'));
    const reports = threads.map((thread) => nextMessage<{ report: ExchangeReport }>(thread, 'report'));
    for (const thread of threads) thread.postMessage({ type: 'roster', roster });
    const mine = await participant(0, worker, region, roster, async () => {
      await Promise.all(phaseDone); // everybody has written everywhere
      for (const thread of threads) thread.postMessage({ type: 'check' });
    });
    const all = [mine, ...(await Promise.all(reports)).map((m) => m.report)];
    for (const report of all) {
      const others = [0, 1, 2].filter((id) => id !== report.id);
      assert.deepEqual([...report.tagOk].sort(), others, `participant ${report.id}: tag messages`);
      assert.deepEqual([...report.rmaOk].sort(), others, `participant ${report.id}: put/get`);
      assert.deepEqual([...report.regionOk].sort(), others, `participant ${report.id}: its region`);
    }
    assert.deepEqual(await Promise.all(exited), [0, 0]);
  });

  // The threads connect through a listener on their defaults: on 1.20.1 (PEER mode) that is the fast
  // lane, over shared memory. Over TCP (fastLane: false) UCX aborts now and then answering a software
  // put from a thread that just ended (ucp_put_handler, ucp_request.inl:319; docs/ucx-versions.md).
  test('every way a thread can end, with traffic in flight, 3 times each: the process survives and exits 0', () => {
    const result = spawnSync(process.execPath, [path.join(HERE, 'peers', 'thread-exits.js'), '{"repeat":3}'], {
      encoding: 'utf8', timeout: 240_000,
    });
    const output = `${result.stdout}\n${result.stderr}`;
    assert.equal(result.signal, null, `killed by ${result.signal}:\n${output}`);
    assert.equal(result.status, 0, output);
    assert.doesNotMatch(output, /FATAL ERROR|Segmentation fault|Aborted|Caught signal/);
    const lines = result.stdout.split('\n').filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { ending: string; exitCode: number });
    const expected: Record<string, number> = { return: 0, exit: 0, throw: 1, terminate: 1, close: 0 };
    assert.equal(lines.length, 15, output);
    for (const line of lines) assert.equal(line.exitCode, expected[line.ending], `${line.ending}: ${output}`);
    assert.match(result.stdout, /thread-exits: done/);
  });

  test("a raw rkey handle from another thread is refused by this thread's endpoints", async () => {
    await using context = new Context();
    const worker = context.createWorker();
    const region = context.createMemoryHandle(4096);
    const endpoint = worker.connectToAddress(worker.getAddress());
    await endpoint.flush();
    const own = createRemoteKeyFromSerialized(endpoint, region.createRemoteKey().serialize());
    const thread = new Thread(THREAD, { workerData: { role: 'handle' } });
    const handles = await nextMessage<{ rkey: bigint; base: bigint }>(thread, 'handles');
    const buffer = new Uint8Array(8);
    // The foreign handle is a live ucp_rkey_h, valid in its own thread: it must never reach ucp_put_nbx here.
    failsAtOnce(() => endpoint.memPut(buffer, handles.base, handles.rkey), /not the handle of a live RemoteKey/);
    failsAtOnce(() => endpoint.memGet(buffer, handles.base, handles.rkey), /not the handle of a live RemoteKey/);
    // This endpoint's own key, in the same raw form, works.
    await endpoint.memPut(new Uint8Array([9, 8, 7]), region.getBaseAddress(), own.getHandle() as bigint);
    await endpoint.flush();
    assert.deepEqual([...region.view().subarray(0, 3)], [9, 8, 7]);
    const closed = nextMessage(thread, 'closed');
    thread.postMessage({ type: 'done' });
    await within(closed, 10_000, "the thread's 'closed'");
    await within(new Promise((resolve) => thread.once('exit', resolve)), 10_000, 'the thread exits');
  });
});

describe('a region whose owner blocks', () => {
  test("a peer's memPuts land byte-exact while the owner's main thread spins in a synchronous loop", () => {
    const result = spawnSync(process.execPath, [path.join(EXAMPLES, 'blocking-owner.js')], {
      encoding: 'utf8', timeout: 90_000,
    });
    const output = `${result.stdout}\n${result.stderr}`;
    assert.equal(result.status, 0, output);
    assert.match(result.stdout, /landed meanwhile; byte-exact: yes/, output);
    assert.match(result.stdout, /main: blocked for \d+ ms/, output);
    assertNoUcxNoise(output, 'the blocking-owner example');
  });
});
