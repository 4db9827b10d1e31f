/**
 * Test peer: exposes a memory region, listens, and sends each connecting endpoint the region's
 * serialized remote key as a tag message (tag 1). Control commands over IPC check or fill its bytes.
 */
import '../helpers/peer-errors.js';
import { Context, type Endpoint, type MemoryAccess, type ProgressMode } from 'ucxx-ts';
import { firstMismatch, pattern } from '../helpers/pattern.js';

interface Config {
  kind?: 'allocated' | 'registered';
  size?: number;
  access?: MemoryAccess;
  progressMode?: ProgressMode;
}

const config = JSON.parse(process.argv[2] ?? '{}') as Config;
// Never outlive the test that started us (it may have crashed).
process.on('disconnect', () => process.exit(3));
const send = (message: object): void => {
  process.send?.(message);
};

const context = new Context();
const worker = context.createWorker({ progressMode: config.progressMode ?? 'event' });
const size = config.size ?? 1 << 20;
const region = config.kind === 'registered'
  ? context.createMemoryHandle(size, Buffer.alloc(size), { access: config.access ?? 'read-write' })
  : context.createMemoryHandle(size, undefined, { access: config.access ?? 'read-write' });
const serialized = region.createRemoteKey().serialize();
const bytes = region.view();
bytes.fill(0);

const accepted: Endpoint[] = [];
const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (endpoint) => {
  accepted.push(endpoint);
  endpoint.tagSend(serialized, 1n).then(
    () => send({ type: 'key-sent' }),
    (err: Error) => send({ type: 'error', message: String(err) }),
  );
});

let manualTimer: NodeJS.Timeout | undefined;
if (config.progressMode === 'manual') manualTimer = setInterval(() => worker.progress(), 1);

process.on('message', (message: { type: string; offset: number; length: number; seed: number }) => {
  switch (message.type) {
    case 'verify': {
      const expected = pattern(message.seed, message.length);
      const actual = bytes.subarray(message.offset, message.offset + message.length);
      send({ type: 'verified', mismatch: firstMismatch(actual, expected) });
      break;
    }
    case 'fill':
      bytes.set(pattern(message.seed, message.length), message.offset);
      send({ type: 'filled' });
      break;
    case 'close-region':
      // The view `bytes` stays valid (a registered buffer is ours; UCX memory stays mapped while viewed).
      region.close();
      send({ type: 'region-closed' });
      break;
    case 'close-endpoints':
      void Promise.all(accepted.map((endpoint) => endpoint.close())).then(() => send({ type: 'endpoints-closed' }));
      break;
    case 'exit':
      if (manualTimer !== undefined) clearInterval(manualTimer);
      listener.close();
      void context.close().then(() => process.exit(0));
      break;
    default:
      send({ type: 'error', message: `unknown command ${message.type}` });
  }
});

send({ type: 'ready', port: listener.port, size, baseAddress: String(region.getBaseAddress()) });
