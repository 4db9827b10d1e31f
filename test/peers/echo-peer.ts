/**
 * Test peer for messaging: listens; echoes tag messages (any tag, same tag back), stream bytes and
 * active messages (id 1 -> id 2 on the reply endpoint); exposes an 8-KiB UCX-allocated region and an
 * 8-KiB registered one for atomics (keys as tag messages 1 and 2 on request). IPC commands drive the
 * rest. All data goes through UCX; IPC carries control only.
 */
import '../helpers/peer-errors.js';
import { Context, getDiagnostics, type Endpoint } from 'ucxx-ts';
import { pattern } from '../helpers/pattern.js';
import { sharedMappings } from '../helpers/shared-mappings.js';

process.on('disconnect', () => process.exit(3));
const send = (message: object): void => {
  process.send?.(message);
};

const MAX = 17 << 20;
const context = new Context();
const worker = context.createWorker();
const allocated = context.createMemoryHandle(8192);
const registered = context.createMemoryHandle(8192, new Uint8Array(8192));
allocated.view().fill(0);
/** Every endpoint that connected, in order; the first is the test's own and gets the tag echoes. */
const endpoints: Endpoint[] = [];
let endpoint: Endpoint | undefined;
let echoTags = true;

/** `{ "fastLane": false }`: the listener offers no fast lanes (default: it does). */
const config = JSON.parse(process.argv[2] ?? '{}') as { fastLane?: boolean };
const listener = worker.listen({ host: '127.0.0.1', port: 0, fastLane: config.fastLane }, (ep) => {
  endpoints.push(ep);
  endpoint ??= ep;
  void streamEcho(ep);
  send({ type: 'connected', fastLane: ep.fastLane });
});

async function tagEcho(): Promise<void> {
  const buffer = new Uint8Array(MAX);
  while (!worker.closed) {
    if (!echoTags) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      continue;
    }
    let info;
    try {
      // Tags >= 2^63 are echoed; smaller ones are for commands below.
      info = await worker.tagRecv(buffer, 1n << 63n, 1n << 63n);
    } catch {
      return;
    }
    await endpoint?.tagSend(buffer.slice(0, info.length), info.senderTag);
  }
}

async function streamEcho(ep: Endpoint): Promise<void> {
  try {
    for await (const chunk of ep.streamChunks({ chunkSize: 1 << 20 })) await ep.streamSend(chunk);
  } catch {
    // endpoint closed
  }
}

// A synchronous handler: rejecting or throwing inside it reaches the sender of a rendezvous message.
worker.setAmHandler(1, (message) => {
  if (message.header[0] === 0x52 /* 'R' */) {
    message.reject(-23);
    return;
  }
  if (message.header[0] === 0x54 /* 'T' */) throw new Error('handler failure requested by the test');
  void message.receive().then((data) => message.replyEndpoint?.amSend(2, message.header, data, { reply: false }));
});

process.on('message', (command: {
  type: string; size?: number; tag?: string; seed?: number; offset?: number; width?: number; which?: string;
  id?: number; count?: number; protocol?: 'eager' | 'rendezvous';
}) => {
  void (async () => {
    switch (command.type) {
      case 'send-tag':
        await endpoint?.tagSend(pattern(command.seed ?? 0, command.size ?? 0), BigInt(command.tag ?? '0'));
        send({ type: 'sent' });
        break;
      case 'pause-echo':
        echoTags = false;
        send({ type: 'paused' });
        break;
      case 'recv-tag': {
        const buffer = new Uint8Array(command.size ?? 0);
        const info = await worker.tagRecv(buffer, BigInt(command.tag ?? '0'));
        send({ type: 'received', length: info.length });
        break;
      }
      case 'send-keys': {
        await endpoint?.tagSend(allocated.createRemoteKey().serialize(), 1n);
        await endpoint?.tagSend(registered.createRemoteKey().serialize(), 2n);
        send({ type: 'keys-sent' });
        break;
      }
      case 'send-keys-all': {
        const key = allocated.createRemoteKey().serialize();
        await Promise.all(endpoints.slice(1).map((ep) => ep.tagSend(key, 1n)));
        send({ type: 'keys-sent-all' });
        break;
      }
      case 'read-word': {
        const region = command.which === 'registered' ? registered : allocated;
        const view = new DataView(region.view().buffer, region.view().byteOffset, 8192);
        const value = command.width === 64
          ? view.getBigUint64(command.offset ?? 0, true).toString()
          : String(view.getUint32(command.offset ?? 0, true));
        send({ type: 'word', value });
        break;
      }
      case 'write-word': {
        const region = command.which === 'registered' ? registered : allocated;
        const view = new DataView(region.view().buffer, region.view().byteOffset, 8192);
        if (command.width === 64) view.setBigUint64(command.offset ?? 0, BigInt(command.tag ?? '0'), true);
        else view.setUint32(command.offset ?? 0, Number(command.tag ?? '0'), true);
        send({ type: 'written' });
        break;
      }
      case 'send-am': {
        // `count` messages of `size` bytes on AM id `id`, header [i], payload pattern(seed + i): reports
        // 'am-sent' once all were posted and the eager ones completed, then 'am-done' with each outcome.
        const outcomes: Promise<string>[] = [];
        for (let i = 0; i < (command.count ?? 1); i++) {
          const request = endpoint?.amSend(command.id ?? 0, new Uint8Array([i]),
            pattern((command.seed ?? 0) + i, command.size ?? 0), { protocol: command.protocol ?? 'eager' });
          outcomes.push(Promise.resolve(request).then(() => 'ok', (err: { code?: string }) => String(err.code)));
        }
        if (command.protocol !== 'rendezvous') await Promise.all(outcomes);
        send({ type: 'am-sent' });
        send({ type: 'am-done', outcomes: await Promise.all(outcomes) });
        break;
      }
      case 'shm-maps':
        send({ type: 'shm-maps', count: sharedMappings() });
        break;
      case 'diagnostics':
        send({ type: 'diagnostics', ...getDiagnostics() });
        break;
      case 'close-last':
        await endpoints.at(-1)?.close();
        send({ type: 'closed-last' });
        break;
      case 'exit':
        listener.close();
        await context.close();
        process.exit(0);
    }
  })().catch((err: unknown) => send({ type: 'error', message: String(err) }));
});

void tagEcho();
send({ type: 'ready', port: listener.port });
