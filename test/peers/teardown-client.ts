/**
 * Test peer: a client that sends and leaves (test/teardown.test.ts). It connects, posts `count`
 * messages of `size` bytes without awaiting them (tag: tagSend with tag i; am: amSend on id 7), lets
 * them go out for `lingerMs`, then leaves: 'exit' (process.exit), 'close' (await context.close()) or
 * 'natural' (the module ends with the sends still unreceived) or 'stay' (it waits to be killed).
 *
 * Config: { port, mode: 'am' | 'tag', count, size, leave, lingerMs, connect? (worker.connect's options) }.
 */
import '../helpers/peer-errors.js';
import { Context, type EndpointOptions } from 'ucxx-ts';

const args = JSON.parse(process.argv[2] ?? '{}') as {
  port: number; mode: 'am' | 'tag'; count: number; size: number; leave: 'exit' | 'close' | 'natural' | 'stay'; lingerMs?: number;
  connect?: EndpointOptions;
};
const context = new Context();
const worker = context.createWorker();
const ep = await worker.connect('127.0.0.1', args.port, args.connect);
ep.on('error', () => {});
process.send?.({ type: 'connected' });
for (let i = 0; i < args.count; i++) {
  const data = new Uint8Array(args.size);
  for (let j = 0; j < data.byteLength; j++) data[j] = (i + 7 * j) & 0xff;
  const request = args.mode === 'tag' ? ep.tagSend(data, BigInt(i)) : ep.amSend(7, null, data);
  request.catch(() => {}); // never received: the sends fail when the client leaves
}
await new Promise((resolve) => setTimeout(resolve, args.lingerMs ?? 200));
process.send?.({ type: 'sent' });
if (args.leave === 'exit') process.exit(0);
if (args.leave === 'stay') await new Promise(() => setInterval(() => undefined, 1000));
if (args.leave === 'close') {
  await context.close();
  process.exit(0);
}
process.disconnect?.();
