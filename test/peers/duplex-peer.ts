/**
 * Test peer for the Duplex's end and half-close: connects to the port in its config, wraps the
 * endpoint in `createEndpointDuplex(ep, { allowHalfOpen })`, writes `size` bytes of pattern(seed)
 * through `pipeline` (1 MiB writes, then end) while it reads and checks what the other side writes
 * (`expectSize` bytes of pattern(expectSeed)) until 'end', as a program does. It reports 'sent' once
 * its writing pipeline finished, 'read' once its reading one did (with what it read, and whether the
 * endpoint is still open), then waits for 'exit'. `features` sets the Context's features.
 */
import '../helpers/peer-errors.js';
import { Context, createEndpointDuplex } from 'ucxx-ts';
import { readAll, writeAll, type DuplexPeerPlan } from '../helpers/duplex-run.js';

interface Config extends DuplexPeerPlan {
  port: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as Config;
const send = (message: object): void => {
  process.send?.(message);
};
const exit = new Promise<void>((resolve) => {
  process.on('message', (message: { type: string }) => {
    if (message.type === 'exit') resolve();
  });
});
process.on('disconnect', () => process.exit(3));

const context = new Context(config.features === undefined ? {} : { features: config.features });
const worker = context.createWorker();
const ep = await worker.connect('127.0.0.1', config.port);
const duplex = createEndpointDuplex(ep, { allowHalfOpen: config.allowHalfOpen ?? false });
const writing = writeAll(duplex, config.seed, config.size).then(() => send({ type: 'sent', open: !ep.closed }));
const reading = readAll(duplex, config.expectSeed, config.expectSize)
  .then((report) => send({ type: 'read', ...report, open: !ep.closed }));
await Promise.all([writing, reading]);
await exit;
await context.close();
process.exit(0);
