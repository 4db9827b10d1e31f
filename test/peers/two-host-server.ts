/**
 * Test peer, the server of the two-host tests (runs in host B): listens on `config.host`, exposes two
 * 1-MiB regions (UCX-allocated and registered) and sends their serialized keys to each endpoint that
 * connects (tags 1 and 2). Echoes tag messages (tags >= 2^63, same tag back on the first endpoint),
 * stream bytes (per endpoint) and active messages (id 1 -> id 2 on the first endpoint). IPC commands
 * check and fill its memory, so that every byte under test moves through UCX; each gets one 'reply'.
 */
import '../helpers/peer-errors.js';
import { Context, type Endpoint, type MemoryHandle } from 'ucxx-ts';
import { firstMismatch, pattern } from '../helpers/pattern.js';

interface Config {
  host: string;
}

interface Command {
  type: string;
  which?: 'allocated' | 'registered';
  offset?: number;
  length?: number;
  seed?: number;
  width?: 32 | 64;
  value?: string;
  tag?: string;
}

const config = JSON.parse(process.argv[2] ?? '{}') as Config;
process.on('disconnect', () => process.exit(3));
const send = (message: object): void => {
  process.send?.(message);
};

const SIZE = 1 << 20;
const MAX_MESSAGE = 8 << 20;
const context = new Context();
const worker = context.createWorker();
const regions: Record<'allocated' | 'registered', MemoryHandle> = {
  allocated: context.createMemoryHandle(SIZE),
  registered: context.createMemoryHandle(SIZE, Buffer.alloc(SIZE)),
};
regions.allocated.view().fill(0);
const keys = {
  allocated: regions.allocated.createRemoteKey().serialize(),
  registered: regions.registered.createRemoteKey().serialize(),
};
const endpoints: Endpoint[] = [];

const listener = worker.listen({ host: config.host, port: 0 }, (ep) => {
  endpoints.push(ep);
  void streamEcho(ep);
  Promise.all([ep.tagSend(keys.allocated, 1n), ep.tagSend(keys.registered, 2n)]).then(
    () => send({ type: 'connected', count: endpoints.length }),
    (err: Error) => send({ type: 'error', message: String(err) }),
  );
});

async function tagEcho(): Promise<void> {
  const buffer = new Uint8Array(MAX_MESSAGE);
  while (!worker.closed) {
    let info;
    try {
      info = await worker.tagRecv(buffer, 1n << 63n, 1n << 63n);
    } catch {
      return;
    }
    await endpoints[0]?.tagSend(buffer.slice(0, info.length), info.senderTag);
  }
}

async function streamEcho(ep: Endpoint): Promise<void> {
  try {
    for await (const chunk of ep.streamChunks({ chunkSize: 1 << 20 })) await ep.streamSend(chunk);
  } catch {
    // endpoint closed
  }
}

worker.setAmHandler(1, (message) => {
  void message.receive().then((data) => endpoints[0]?.amSend(2, message.header, data));
});

function view(which: 'allocated' | 'registered' | undefined): Uint8Array {
  return regions[which ?? 'allocated'].view();
}

process.on('message', (command: Command) => {
  void (async () => {
    switch (command.type) {
      case 'verify': {
        const expected = pattern(command.seed ?? 0, command.length ?? 0);
        const offset = command.offset ?? 0;
        const actual = view(command.which).subarray(offset, offset + expected.length);
        send({ type: 'reply', mismatch: firstMismatch(actual, expected) });
        break;
      }
      case 'fill':
        view(command.which).set(pattern(command.seed ?? 0, command.length ?? 0), command.offset ?? 0);
        send({ type: 'reply' });
        break;
      case 'read-word': {
        const bytes = view(command.which);
        const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        const value = command.width === 32 ? String(dv.getUint32(command.offset ?? 0, true))
          : dv.getBigUint64(command.offset ?? 0, true).toString();
        send({ type: 'reply', value });
        break;
      }
      case 'write-word': {
        const bytes = view(command.which);
        const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        if (command.width === 32) dv.setUint32(command.offset ?? 0, Number(command.value ?? '0'), true);
        else dv.setBigUint64(command.offset ?? 0, BigInt(command.value ?? '0'), true);
        send({ type: 'reply' });
        break;
      }
      case 'recv-tag': {
        // A tag message on the worker (e.g. from an endpoint made with connectToAddress), checked here.
        const expected = pattern(command.seed ?? 0, command.length ?? 0);
        const buffer = new Uint8Array(expected.length);
        const info = await worker.tagRecv(buffer, BigInt(command.tag ?? '0'));
        send({ type: 'reply', length: info.length, mismatch: firstMismatch(buffer, expected) });
        break;
      }
      case 'transports':
        send({ type: 'reply', transports: endpoints[0]?.getTransports() ?? [] });
        break;
      case 'exit':
        listener.close();
        await context.close();
        process.exit(0);
        break;
      default:
        send({ type: 'reply', error: `unknown command ${command.type}` });
    }
  })().catch((err: unknown) => send({ type: 'reply', error: String((err as Error).stack ?? err) }));
});

void tagEcho();
send({
  type: 'ready',
  port: listener.port,
  address: Buffer.from(worker.getAddress()).toString('hex'),
});
