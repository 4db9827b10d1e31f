/**
 * Test peer, the server of the fault tests (runs in host B): listens on `config.host` (and
 * `config.port`, 0 for any), exposes a 1-MiB registered region and sends its serialized key to every
 * endpoint that connects (tag 1). It never posts a tag receive (a rendezvous tag send to it waits),
 * receives active messages with id 1, and reports each endpoint's 'error'/'close' (with the time) over
 * IPC. Commands: 'verify' (a pattern in the region), 'exit'.
 */
import '../helpers/peer-errors.js';
import { Context, type Endpoint } from 'ucxx-ts';
import { firstMismatch, pattern } from '../helpers/pattern.js';

interface Config {
  host: string;
  port?: number;
  failureTimeout?: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as Config;
process.on('disconnect', () => process.exit(3));
const send = (message: object): void => {
  process.send?.(message);
};

const SIZE = 1 << 20;
const context = new Context({ failureTimeout: config.failureTimeout });
const worker = context.createWorker();
const region = context.createMemoryHandle(SIZE, Buffer.alloc(SIZE));
const key = region.createRemoteKey().serialize();
const endpoints: Endpoint[] = [];

worker.setAmHandler(1, async (message) => {
  // A rendezvous message whose sender was cut off or killed fails to arrive: that is the test.
  await message.receive().catch((err: Error) => console.error(`[fault-server] AM receive: ${err.name}: ${err.message}`));
});

const listener = worker.listen({ host: config.host, port: config.port ?? 0 }, (ep) => {
  const index = endpoints.push(ep) - 1;
  ep.on('error', (err) => {
    console.error(`[fault-server] endpoint ${index}: ${err.name}: ${err.message}`);
    send({ type: 'ep-error', index, name: err.name, at: Date.now() });
  });
  ep.on('close', () => send({ type: 'ep-close', index, at: Date.now() }));
  ep.tagSend(key, 1n).then(
    () => send({ type: 'connected', index }),
    (err: Error) => send({ type: 'connect-failed', message: String(err) }),
  );
});

process.on('message', (command: { type: string; offset?: number; length?: number; seed?: number }) => {
  if (command.type === 'exit') {
    void context.close().then(() => process.exit(0));
  } else if (command.type === 'verify') {
    const view = region.view().subarray(command.offset ?? 0, (command.offset ?? 0) + (command.length ?? 0));
    send({ type: 'reply', mismatch: firstMismatch(view, pattern(command.seed ?? 0, view.byteLength)) });
  }
});

send({ type: 'ready', port: listener.port });
