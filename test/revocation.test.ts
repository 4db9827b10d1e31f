/**
 * What closing a MemoryHandle guarantees, measured on one host (README, trust model): closing the
 * handle does not stop a peer that already holds its key (CMA writes into a registered buffer, and
 * UCX-allocated memory stays mapped while a view of it lives); closing the endpoints to that peer does.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { Context, UcxError, createRemoteKeyFromSerialized } from 'ucxx-ts';
import { Peer } from './helpers/peer.js';
import { pattern } from './helpers/pattern.js';
import { failsAtOnce } from './helpers/fails-at-once.js';

const SIZE = 1 << 16;

async function setUp(kind: 'allocated' | 'registered') {
  const peer = Peer.start('rma-target', { kind, size: SIZE });
  const ready = await peer.next('ready', 10_000);
  const context = new Context();
  const worker = context.createWorker();
  const endpoint = await worker.connect('127.0.0.1', ready['port'] as number);
  const buffer = new Uint8Array(512);
  const info = await worker.tagRecv(buffer, 1n, undefined, { signal: AbortSignal.timeout(10_000) });
  const key = createRemoteKeyFromSerialized(endpoint, buffer.subarray(0, info.length));
  const verify = async (seed: number, length: number): Promise<number> =>
    (await peer.call({ type: 'verify', offset: 0, length, seed }, 'verified', 10_000))['mismatch'] as number;
  return { peer, context, endpoint, key, verify };
}

for (const kind of ['registered', 'allocated'] as const) {
  test(`${kind} memory: closing the handle does not stop a peer holding the key; closing its endpoints does`, async () => {
    const { peer, context, endpoint, key, verify } = await setUp(kind);
    try {
      await endpoint.memPut(pattern(1, 4096), key, 0);
      await endpoint.flush();
      assert.equal(await verify(1, 4096), -1, 'the first put did not land');

      await peer.call({ type: 'close-region' }, 'region-closed', 10_000);
      await endpoint.memPut(pattern(2, 4096), key, 0);
      await endpoint.flush();
      // Measured: the write lands in the owner's memory although its handle is closed.
      assert.equal(await verify(2, 4096), -1, 'a put after the owner closed its handle did not land (update the trust model)');

      const closed = new Promise<void>((resolve) => endpoint.once('close', () => resolve()));
      await peer.call({ type: 'close-endpoints' }, 'endpoints-closed', 10_000);
      await Promise.race([closed, new Promise((_, reject) => setTimeout(() => reject(new Error('no close after the owner closed the endpoint')), 10_000))]);
      failsAtOnce(() => endpoint.memPut(pattern(3, 4096), key, 0), (err: unknown) => err instanceof Error && (err as UcxError).code !== undefined);
      assert.equal(await verify(2, 4096), -1, 'the owner\'s bytes changed after it closed the endpoint');
    } finally {
      await context.close();
      await peer.stop();
    }
  });
}
