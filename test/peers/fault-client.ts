/**
 * Test peer, the client of the fault tests (runs in host A): on 'connect' opens one endpoint per
 * operation kind to fault-server, receives its key on each; on 'start' posts that operation on each
 * endpoint (all at once, so that one fault hits them all) and records, with the time, how each
 * operation settled and each endpoint's 'error' and 'close'; 'report' returns the records. Also
 * 'put-verified' (a pattern put and flushed before the fault, for the server to check), 'cancel' (an
 * operation cancelled by cancel() or an AbortSignal while it waits), and 'reconnect'.
 */
import '../helpers/peer-errors.js';
import {
  Context, createRemoteKeyFromSerialized, type Endpoint, type RemoteKey, type Request,
} from 'ucxx-ts';
import { pattern } from '../helpers/pattern.js';

interface Command {
  type: string;
  host?: string;
  port?: number;
  kinds?: string[];
  seed?: number;
  offset?: number;
  length?: number;
  how?: 'cancel' | 'signal';
  kind?: string;
}

interface Record {
  kind: string;
  posted: number;
  immediate: boolean;
  op?: { ok: boolean; name?: string; at: number };
  error?: { name: string; message: string; at: number };
  close?: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as { failureTimeout?: number };
process.on('disconnect', () => process.exit(3));
const send = (message: object): void => {
  process.send?.(message);
};

const MiB = 1 << 20;
const context = new Context({ failureTimeout: config.failureTimeout });
const worker = context.createWorker();
let endpoints: { kind: string; ep: Endpoint; key: RemoteKey }[] = [];
const records: Record[] = [];

async function open(host: string, port: number, kind: string): Promise<{ kind: string; ep: Endpoint; key: RemoteKey }> {
  const ep = await worker.connect(host, port);
  ep.on('error', (err) => console.error(`[fault-client] ${kind} endpoint: ${err.name}: ${err.message}`));
  const buffer = new Uint8Array(4096);
  const { length } = await ep.tagRecv(buffer, 1n);
  return { kind, ep, key: createRemoteKeyFromSerialized(ep, buffer.subarray(0, length)) };
}

function post(kind: string, ep: Endpoint, key: RemoteKey, signal?: AbortSignal): Request<unknown> {
  switch (kind) {
    case 'tag-eager': return ep.tagSend(new Uint8Array(64), 10n, { signal });
    case 'tag-rndv': return ep.tagSend(new Uint8Array(4 * MiB), 11n, { signal });
    case 'tag-sync': return ep.tagSendSync(new Uint8Array(64), 12n, { signal });
    case 'stream': return ep.streamSend(new Uint8Array(32 * MiB), { signal });
    case 'am': return ep.amSend(1, null, new Uint8Array(4 * MiB), { protocol: 'rendezvous', signal });
    case 'put': return ep.memPut(new Uint8Array(512 * 1024).fill(7), key, 0, { signal });
    case 'get': return ep.memGet(new Uint8Array(512 * 1024), key, 0, { signal });
    case 'atomic': return ep.fetchAdd(key, 1024, 1n, { signal });
    case 'flush': {
      ep.memPut(new Uint8Array(8).fill(9), key, 2048);
      return ep.flush({ signal });
    }
    default: throw new Error(`unknown kind ${kind}`);
  }
}

async function handle(command: Command): Promise<object> {
  switch (command.type) {
    case 'connect': {
      endpoints = await Promise.all((command.kinds ?? []).map((kind) => open(command.host as string, command.port as number, kind)));
      return {};
    }
    case 'put-verified': {
      const { ep, key } = endpoints[0] as { ep: Endpoint; key: RemoteKey };
      await ep.memPut(pattern(command.seed ?? 0, command.length ?? 0), key, command.offset ?? 0);
      await ep.flush();
      return {};
    }
    case 'start': {
      for (const { kind, ep, key } of endpoints) {
        const record: Record = { kind, posted: Date.now(), immediate: false };
        records.push(record);
        ep.on('error', (err) => { record.error = { name: err.name, message: err.message, at: Date.now() }; });
        ep.on('close', () => { record.close = Date.now(); });
        const request = post(kind, ep, key);
        record.immediate = request.completed;
        request.then(
          () => { record.op = { ok: true, at: Date.now() }; },
          (err: Error) => { record.op = { ok: false, name: err.name, at: Date.now() }; },
        );
      }
      return { posted: Date.now() };
    }
    case 'report':
      return { records };
    case 'cancel': {
      // An operation that waits (the peer is stopped), then cancel() or abort: it must settle at once.
      const { ep, key } = endpoints[0] as { ep: Endpoint; key: RemoteKey };
      const controller = new AbortController();
      const request = post(command.kind as string, ep, key, controller.signal);
      const waiting = !request.completed;
      const started = performance.now();
      if (command.how === 'signal') controller.abort();
      else request.cancel();
      let name = 'none';
      try {
        await request;
      } catch (err) {
        name = (err as Error).name;
      }
      return { waiting, name, ms: performance.now() - started };
    }
    case 'reconnect': {
      const { ep, key } = await open(command.host as string, command.port as number, 'reconnect');
      await ep.memPut(pattern(command.seed ?? 0, 4096), key, 4096);
      await ep.flush();
      const back = new Uint8Array(4096);
      await ep.memGet(back, key, 4096);
      await ep.close();
      return { same: Buffer.from(back).equals(Buffer.from(pattern(command.seed ?? 0, 4096))) };
    }
    case 'connect-refused': {
      try {
        await worker.connect(command.host as string, command.port as number);
        return { name: 'connected' };
      } catch (err) {
        return { name: (err as Error).name, message: (err as Error).message };
      }
    }
    case 'close-all': {
      const started = Date.now();
      await Promise.all(endpoints.map(({ ep }) => ep.close()));
      return { ms: Date.now() - started };
    }
    default:
      throw new Error(`unknown command ${command.type}`);
  }
}

process.on('message', (command: Command) => {
  if (command.type === 'exit') {
    void context.close().then(() => process.exit(0));
    return;
  }
  handle(command).then(
    (result) => send({ type: 'reply', ...result }),
    (err: Error) => send({ type: 'reply', error: `${err.name}: ${err.message}` }),
  );
});

send({ type: 'ready' });
