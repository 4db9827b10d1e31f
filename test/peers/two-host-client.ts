/**
 * Test peer, the client of the two-host tests (runs in host A, or in host B as the same-host control):
 * connects to two-host-server on command, receives its serialized keys through UCX (tags 1 and 2),
 * and runs one operation per IPC command, checking the bytes itself or leaving them for the server to
 * check. Replies carry results only; every byte under test moves through UCX.
 */
import '../helpers/peer-errors.js';
import { performance } from 'node:perf_hooks';
import {
  Context, createRemoteKeyFromSerialized, type Endpoint, type RemoteKey,
} from 'ucxx-ts';
import { firstMismatch, pattern } from '../helpers/pattern.js';
import { decodeSerializedRemoteKey, encodeSerializedRemoteKey } from '#ucxx-ts/internal/serialized-remote-key.js';
import { parsePackedRkey } from '#ucxx-ts/internal/packed-rkey.js';
import { mdComponents } from '../helpers/md-components.js';

interface Command {
  type: string;
  via?: 'listener' | 'address';
  host?: string;
  port?: number;
  address?: string;
  errorHandling?: boolean;
  fastLane?: boolean;
  key?: string;
  as?: string;
  bytes?: string;
  offset?: number;
  size?: number;
  seed?: number;
  headerSize?: number;
  iterations?: number;
  tag?: string;
}

process.on('disconnect', () => process.exit(3));
const send = (message: object): void => {
  process.send?.(message);
};

const context = new Context();
const worker = context.createWorker({ progressMode: 'polling' });
const endpoints: Partial<Record<'listener' | 'address', Endpoint>> = {};
/** Serialized keys as received from the server (by name). */
const serialized = new Map<string, Uint8Array>();
/** Keys unpacked per endpoint: `${via}:${name}`. */
const keys = new Map<string, RemoteKey>();
let nextTag = 1n << 63n;

function endpoint(via: 'listener' | 'address' = 'listener'): Endpoint {
  const ep = endpoints[via];
  if (ep === undefined) throw new Error(`no ${via} endpoint`);
  return ep;
}

function key(command: Command): RemoteKey {
  const via = command.via ?? 'listener';
  const name = command.key ?? 'allocated';
  let k = keys.get(`${via}:${name}`);
  if (k === undefined) {
    const bytes = serialized.get(name);
    if (bytes === undefined) throw new Error(`no key '${name}'`);
    k = createRemoteKeyFromSerialized(endpoint(via), bytes);
    keys.set(`${via}:${name}`, k);
  }
  return k;
}

/** The key with the shmid of its sysv record replaced by one that names no segment, checksum resealed. */
function forge(bytes: Uint8Array): Uint8Array {
  const decoded = decodeSerializedRemoteKey(bytes);
  const packed = decoded.packedRkey.slice();
  const components = mdComponents(context);
  const sysv = parsePackedRkey(packed).mds.find((md) => components.get(md.index) === 'sysv');
  if (sysv === undefined) throw new Error('the key has no sysv record');
  new DataView(packed.buffer, packed.byteOffset).setUint32(sysv.offset, 0x7ffffff0, true);
  return encodeSerializedRemoteKey({
    packedRkey: packed, baseAddress: decoded.baseAddress, size: decoded.size, access: decoded.access,
  });
}

let amWaiter: ((m: { header: Uint8Array; data: Uint8Array }) => void) | undefined;
worker.setAmHandler(2, (message) => {
  void message.receive().then((data) => amWaiter?.({ header: message.header.slice(), data: new Uint8Array(data) }));
});

async function handle(command: Command): Promise<object> {
  switch (command.type) {
    case 'connect': {
      const ep = await worker.connect(command.host ?? '', command.port ?? 0, {
        errorHandling: command.errorHandling ?? true, ...(command.fastLane === undefined ? {} : { fastLane: command.fastLane }),
      });
      endpoints.listener = ep;
      for (const [name, tag] of [['allocated', 1n], ['registered', 2n]] as const) {
        const buffer = new Uint8Array(4096);
        const info = await ep.tagRecv(buffer, tag);
        serialized.set(name, buffer.slice(0, info.length));
      }
      return { type: 'connected' };
    }
    case 'connect-address': {
      endpoints.address = worker.connectToAddress(Buffer.from(command.address ?? '', 'hex'), {
        errorHandling: command.errorHandling ?? true,
      });
      await endpoints.address.flush();
      return { type: 'connected' };
    }
    case 'unpack': {
      // Unpacks serialized key `key` (or its forged copy) on an endpoint and stores it as `as`.
      const source = serialized.get(command.key ?? 'allocated');
      if (source === undefined) throw new Error(`no key '${command.key}'`);
      const bytes = command.bytes === 'forged' ? forge(source) : source;
      try {
        const k = createRemoteKeyFromSerialized(endpoint(command.via), bytes);
        keys.set(`${command.via ?? 'listener'}:${command.as ?? 'unpacked'}`, k);
        return { type: 'unpacked', ok: true };
      } catch (err) {
        return { type: 'unpacked', ok: false, name: (err as Error).name, message: (err as Error).message };
      }
    }
    case 'tag': {
      const ep = endpoint(command.via);
      const data = pattern(command.seed ?? 0, command.size ?? 0);
      const back = new Uint8Array(data.length);
      const tag = nextTag++;
      const received = ep.tagRecv(back, tag);
      await ep.tagSend(data, tag);
      const info = await received;
      return { type: 'tag', length: info.length, mismatch: firstMismatch(back, data) };
    }
    case 'tag-to': {
      // A tag message that the server receives and checks itself (command 'recv-tag').
      await endpoint(command.via).tagSend(pattern(command.seed ?? 0, command.size ?? 0), BigInt(command.tag ?? '0'));
      return { type: 'tag-sent' };
    }
    case 'stream': {
      const ep = endpoint(command.via);
      const data = pattern(command.seed ?? 0, command.size ?? 0);
      const back = new Uint8Array(data.length);
      const received = ep.streamRecv(back, { waitAll: true });
      await ep.streamSend(data);
      const length = await received;
      return { type: 'stream', length, mismatch: firstMismatch(back, data) };
    }
    case 'am': {
      const header = pattern((command.seed ?? 0) + 1, command.headerSize ?? 0);
      const data = pattern(command.seed ?? 0, command.size ?? 0);
      const reply = new Promise<{ header: Uint8Array; data: Uint8Array }>((resolve) => { amWaiter = resolve; });
      await endpoint(command.via).amSend(1, header, data);
      const echoed = await reply;
      return {
        type: 'am', length: echoed.data.length,
        headerMismatch: firstMismatch(echoed.header, header), mismatch: firstMismatch(echoed.data, data),
      };
    }
    case 'put': {
      const ep = endpoint(command.via);
      await ep.memPut(pattern(command.seed ?? 0, command.size ?? 0), key(command), command.offset ?? 0);
      await ep.flush();
      return { type: 'put' };
    }
    case 'get': {
      const back = new Uint8Array(command.size ?? 0);
      await endpoint(command.via).memGet(back, key(command), command.offset ?? 0);
      return { type: 'get', mismatch: firstMismatch(back, pattern(command.seed ?? 0, command.size ?? 0)) };
    }
    case 'atomics': {
      // The server wrote 10 (64-bit) at offset and 7 (32-bit) at offset + 8.
      const ep = endpoint(command.via);
      const k = key(command);
      const at = command.offset ?? 0;
      const results = [
        await ep.fetchAdd(k, at, 5n),
        await ep.compareAndSwap(k, at, 15n, 100n),
        await ep.compareAndSwap(k, at, 1n, 2n),
        await ep.fetchAdd(k, at + 8, 3, { width: 32 }),
        await ep.compareAndSwap(k, at + 8, 10, 42, { width: 32 }),
        await ep.compareAndSwap(k, at + 8, 0, 1, { width: 32 }),
      ];
      await ep.flush();
      return { type: 'atomics', results: results.map(String) };
    }
    case 'latency': {
      // Tag ping-pong through the server's echo: half the median round trip.
      const ep = endpoint(command.via);
      const data = pattern(1, command.size ?? 8);
      const back = new Uint8Array(data.length);
      const samples: number[] = [];
      for (let i = 0; i < (command.iterations ?? 1000); i++) {
        const tag = nextTag++;
        const t0 = performance.now();
        const received = ep.tagRecv(back, tag);
        await ep.tagSend(data, tag);
        await received;
        samples.push((performance.now() - t0) * 1000);
      }
      samples.sort((x, y) => x - y);
      return { type: 'latency', halfRoundTripUs: (samples[samples.length >> 1] ?? 0) / 2 };
    }
    case 'transports':
      return { type: 'transports', transports: endpoint(command.via).getTransports() };
    case 'exit':
      await context.close();
      process.exit(0);
    // eslint-disable-next-line no-fallthrough
    default:
      throw new Error(`unknown command ${command.type}`);
  }
}

process.on('message', (command: Command) => {
  // Every command gets one 'reply': its result, or `error` with what went wrong.
  handle(command).then(
    (result) => send({ ...result, type: 'reply' }),
    (err: unknown) => send({ type: 'reply', error: String((err as Error).stack ?? err) }),
  );
});

send({ type: 'ready' });
