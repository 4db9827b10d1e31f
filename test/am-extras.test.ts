/**
 * Active messages beyond one buffer: a plain-UCP `amSend` of a list of buffers (UCP_DATATYPE_IOV, ucxx's
 * iov amSend) arrives as one message, eager and rendezvous, byte-exact; `endpoint.amProbe()` says when
 * a ucxx active message waits for `amRecv`, as ucxx's amProbe.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { Context, NoMemoryError, type AmMessage, type Endpoint } from 'ucxx-ts';
import { pattern } from './helpers/pattern.js';
import { eventually } from './helpers/deadline.js';

async function connected(context: Context): Promise<{ client: Endpoint; server: Endpoint; serverWorker: ReturnType<Context['createWorker']> }> {
  const serverWorker = context.createWorker();
  const listener = serverWorker.listen({ host: '127.0.0.1', port: 0 });
  const client = await context.createWorker().connect('127.0.0.1', listener.port);
  const server = (await listener[Symbol.asyncIterator]().next()).value as Endpoint;
  return { client, server, serverWorker };
}

test('amSend of a list of buffers arrives as one message, eager and rendezvous, with its header', async () => {
  await using context = new Context();
  const { client, serverWorker } = await connected(context);
  const received: { header: Uint8Array; data: Uint8Array }[] = [];
  let wake: (() => void) | undefined;
  serverWorker.setAmHandler(5, async (msg: AmMessage) => {
    const data = msg.data ?? await msg.receive();
    received.push({ header: msg.header, data: Uint8Array.from(data) });
    wake?.();
  });
  const cases = [[1, 2, 3], [100, 0, 4000], [1 << 20, 3 << 20, 17]];
  for (const [i, sizes] of cases.entries()) {
    const parts = sizes.map((n, k) => pattern(10 * i + k, n));
    const arrived = new Promise<void>((resolve) => { wake = resolve; });
    await client.amSend(5, Buffer.from(`case ${i}`), parts);
    await arrived;
    const got = received[i];
    assert.ok(got !== undefined);
    assert.equal(Buffer.from(got.header).toString(), `case ${i}`);
    assert.ok(Buffer.from(got.data).equals(Buffer.concat(parts)), `case ${i}: the parts, in order, as one message`);
  }
});

test('amProbe says when a ucxx active message waits for amRecv', async () => {
  await using context = new Context();
  const { client, server } = await connected(context);
  assert.equal(server.amProbe(), false);
  await client.amSend(pattern(1, 64));
  assert.equal(await eventually(() => server.amProbe(), 5000, 2), true, 'amProbe() never saw the message');
  const message = await server.amRecv();
  assert.ok(Buffer.from(message.data).equals(pattern(1, 64)));
  assert.equal(server.amProbe(), false);
  await server.close();
  assert.throws(() => server.amProbe(), /closed/i);
});

test('registerAmAllocator: ucxx AM data lands in the buffers it returns, eager and rendezvous; a wrong size refuses that message', async () => {
  await using context = new Context();
  const { client, server, serverWorker } = await connected(context);
  const pool = new SharedArrayBuffer(4 << 20);
  let offset = 0;
  const lengths: number[] = [];
  serverWorker.registerAmAllocator((length) => {
    lengths.push(length);
    const view = new Uint8Array(pool, offset, length);
    offset += length;
    return view;
  });
  for (const [i, n] of [64, 2 << 20].entries()) {
    await client.amSend(pattern(i, n));
    const message = await server.amRecv();
    assert.equal(message.data.buffer, pool, `message ${i} is in the allocator's memory`);
    assert.ok(Buffer.from(message.data).equals(pattern(i, n)), `message ${i}: bytes`);
  }
  assert.deepEqual(lengths, [64, 2 << 20]);
  const warnings: string[] = [];
  const onWarning = (w: Error): void => { warnings.push(w.message); };
  process.on('warning', onWarning);
  try {
    serverWorker.registerAmAllocator(() => new Uint8Array(1));
    await client.amSend(pattern(5, 100));
    await assert.rejects(server.amRecv().promise, NoMemoryError);
    serverWorker.registerAmAllocator(null);
    await client.amSend(pattern(6, 100));
    assert.ok(Buffer.from((await server.amRecv()).data).equals(pattern(6, 100)));
  } finally {
    process.off('warning', onWarning);
  }
  assert.ok(warnings.some((w) => /allocator/.test(w)), warnings.join('\n'));
  assert.throws(() => serverWorker.registerAmAllocator(() => new Uint8Array(0), 'cuda' as 'host'), RangeError);
});
