/**
 * cancelInflightRequests on an endpoint and on a worker, as ucxx's: every operation in flight rejects
 * with CanceledError at once (rendezvous sends nobody receives, receives nobody sends to, flushes), the
 * count says how many, and the endpoint and worker go on working: bytes sent afterwards arrive intact.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { CanceledError, Context, type Endpoint, type Request } from 'ucxx-ts';
import { pattern } from './helpers/pattern.js';

const MiB = 1 << 20;

async function rejectsCanceled(request: Request<unknown>, what: string): Promise<void> {
  await assert.rejects(request.promise, (err: unknown) => {
    assert.ok(err instanceof CanceledError, `${what}: ${String(err)}`);
    return true;
  });
}

test('endpoint.cancelInflightRequests: rendezvous sends and receives in flight reject at once; the endpoint still works', async () => {
  await using context = new Context();
  const serverWorker = context.createWorker();
  const listener = serverWorker.listen({ host: '127.0.0.1', port: 0 });
  const clientWorker = context.createWorker();
  const client = await clientWorker.connect('127.0.0.1', listener.port);
  const server = (await listener[Symbol.asyncIterator]().next()).value as Endpoint;
  // Nobody receives tag 11 or sends tag 12: each waits.
  const sends = [0, 1, 2].map((i) => client.tagSend(pattern(i, 4 * MiB), 11n));
  const receive = client.tagRecv(new Uint8Array(64), 12n);
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.ok(sends.every((s) => !s.completed) && !receive.completed, 'the operations are in flight');
  const started = Date.now();
  assert.equal(client.cancelInflightRequests(), 4);
  for (const [i, send] of sends.entries()) await rejectsCanceled(send, `4 MiB send ${i}`);
  await rejectsCanceled(receive, 'tagRecv');
  assert.ok(Date.now() - started < 1000, 'settled at once');
  assert.equal(client.cancelInflightRequests(), 0, 'nothing left');
  // The endpoint goes on: a message each way, bytes checked.
  assert.equal(client.closed, false);
  const data = pattern(5, 100_000);
  const sent = client.tagSend(data, 20n);
  const buffer = new Uint8Array(100_000);
  const info = await serverWorker.tagRecv(buffer, 20n).promise;
  await sent;
  assert.equal(info.length, data.length);
  assert.deepEqual(buffer, data);
  await server.tagSend(pattern(6, 64), 21n);
  const back = new Uint8Array(64);
  await client.tagRecv(back, 21n);
  assert.deepEqual(back, pattern(6, 64));
});

test("worker.cancelInflightRequests: its own receives and its endpoints' operations, counted; the worker still works", async () => {
  await using context = new Context();
  const serverWorker = context.createWorker();
  const listener = serverWorker.listen({ host: '127.0.0.1', port: 0 });
  const worker = context.createWorker();
  const ep = await worker.connect('127.0.0.1', listener.port);
  const own = [worker.tagRecv(new Uint8Array(8), 1n), worker.tagRecv(new Uint8Array(8), 2n)];
  const viaEndpoint = [ep.tagRecv(new Uint8Array(8), 3n), ep.tagSend(pattern(1, 4 * MiB), 4n)];
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(worker.cancelInflightRequests(), 4);
  for (const request of [...own, ...viaEndpoint]) await rejectsCanceled(request as Request<unknown>, 'an operation');
  assert.equal(worker.cancelInflightRequests(), 0);
  // Still a working worker: a receive posted now gets what the server sends.
  const served = (await listener[Symbol.asyncIterator]().next()).value as Endpoint;
  const buffer = new Uint8Array(32);
  const receive = worker.tagRecv(buffer, 9n);
  await served.tagSend(pattern(3, 32), 9n);
  await receive;
  assert.deepEqual(buffer, pattern(3, 32));
});
