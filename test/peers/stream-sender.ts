/**
 * Test peer for stream close: connects to the port in its config, sends `size` bytes of pattern(seed)
 * on the endpoint's stream and closes it gracefully, as a user's program does, then reports 'sent'
 * and exits. `how`: 'send' (one `await streamSend(all)`, then `await ep.close()`) or 'duplex' (1 MiB
 * writes through `pipeline` into `createEndpointDuplex(ep, { closeOnFinish: true })`).
 */
import '../helpers/peer-errors.js';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Context, createEndpointDuplex } from 'ucxx-ts';
import { pattern } from '../helpers/pattern.js';

const config = JSON.parse(process.argv[2] ?? '{}') as {
  port: number; size: number; seed: number; how: 'send' | 'duplex'; errorHandling?: 'peer' | 'none';
};
const data = pattern(config.seed, config.size);
const context = new Context();
const worker = context.createWorker();
const ep = await worker.connect('127.0.0.1', config.port, config.errorHandling === undefined ? {} : { errorHandling: config.errorHandling });
if (config.how === 'duplex') {
  const MiB = 1 << 20;
  const chunks = function* (): Generator<Uint8Array> {
    for (let offset = 0; offset < data.byteLength; offset += MiB) yield data.subarray(offset, offset + MiB);
  };
  await pipeline(Readable.from(chunks(), { objectMode: false }), createEndpointDuplex(ep, { closeOnFinish: true }));
} else {
  await ep.streamSend(data);
  await ep.close();
}
await context.close();
process.send?.({ type: 'sent' });
process.disconnect?.();
