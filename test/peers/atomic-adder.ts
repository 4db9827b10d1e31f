/** Test peer: connects, unpacks the key it is sent (tag 1), does N fetch-adds of 1 on word 0, reports. */
import '../helpers/peer-errors.js';
import { Context, createRemoteKeyFromSerialized } from 'ucxx-ts';

process.on('disconnect', () => process.exit(3));
const { port, count, width } = JSON.parse(process.argv[2] ?? '{}') as { port: number; count: number; width: 32 | 64 };
const context = new Context();
const worker = context.createWorker();
const endpoint = await worker.connect('127.0.0.1', port);
process.send?.({ type: 'connected' });
const buffer = new Uint8Array(512);
const info = await endpoint.tagRecv(buffer, 1n);
const key = createRemoteKeyFromSerialized(endpoint, buffer.subarray(0, info.length));
const seen = new Set<string>();
for (let i = 0; i < count; i++) {
  const old = await endpoint.fetchAdd(key, 0, width === 64 ? 1n : 1, { width });
  seen.add(String(old));
}
await endpoint.flush();
process.send?.({ type: 'done', distinct: seen.size });
await new Promise((resolve) => process.once('message', resolve));
await context.close();
process.exit(0);
