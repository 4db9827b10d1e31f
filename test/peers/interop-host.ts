/**
 * Test peer of test/two-hosts-interop.test.ts: ucxx-ts in one "host", facing C programs in the other
 * (UCX's stock ucp_client_server example, and test/c/rma_peer.c). One session at a time (a Context of
 * the features asked for, a worker, one endpoint), one IPC command at a time; every byte under test
 * moves through UCX, replies carry results only.
 *
 * Commands (each answered by one 'reply', with `error` when it failed):
 *   connect { host, port, features? }       new session; connect (errorHandling 'auto': PEER to another
 *                                           host). Reply { ok: true, lanes } or { ok: false, name, message }.
 *   listen { host, features?, api, size }   new session; listen, and post the receive for a stock client's
 *                                           message (tag 0xcafe, AM id 0, or the stream). Reply { port }.
 *   send-stock { api, size }                send our message for the stock server to print.
 *   receive-stock { api, size }             the stock client's message: { length, mismatch, lanes }
 *                                           (lanes null when the client had closed already).
 *   rma { direction }                       rma_peer.c's protocol on the session's endpoint (both roles),
 *                                           then BYE and close: { results, lanes }.
 *   close                                   end the session.
 *   exit
 */
import '../helpers/peer-errors.js';
import {
  Context, type ContextOptions, type Endpoint, type Feature, type Listener, type Worker,
} from 'ucxx-ts';
import { receiveBye, tsExposes, tsInitiates, type Guard } from '../helpers/rma-protocol.js';

type Api = 'tag' | 'stream' | 'am';

interface Command {
  type: string;
  host?: string;
  port?: number;
  features?: Feature[];
  api?: Api;
  size?: number;
  direction?: 'c-exposes' | 'ts-exposes' | 'both';
}

const TAG = 0xcafen;
const AM_ID = 0;
const STEP_MS = 15_000;

process.on('disconnect', () => process.exit(3));
const send = (message: object): void => {
  process.send?.(message);
};

const guard: Guard = (promise, what) => {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    Promise.resolve(promise).finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${STEP_MS} ms: ${what}`)), STEP_MS);
    }),
  ]);
};

/** Our message to a stock server, printable and NUL-terminated (as in test/stock-peers.test.ts). */
function ourMessage(api: Api, size: number): Uint8Array {
  const text = `ucxx-ts->${api}:${size}:`;
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size - 1; i++) bytes[i] = i < text.length ? text.charCodeAt(i) : 0x61 + ((i * 7) % 26);
  return bytes;
}

/** What the stock client sends: generate_test_string() in hello_world_util.h. */
function stockMessage(size: number): Uint8Array {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size - 1; i++) bytes[i] = 0x41 + (i % 26);
  return bytes;
}

interface Session {
  context: Context;
  worker: Worker;
  endpoint?: Endpoint;
  listener?: Listener;
  accepted?: Promise<Endpoint>;
  received?: Promise<Uint8Array>;
}

let session: Session | undefined;

async function endSession(): Promise<void> {
  const s = session;
  session = undefined;
  if (s !== undefined) await s.context.close();
}

async function newSession(features: Feature[] | undefined): Promise<Session> {
  await endSession();
  const options: ContextOptions = features === undefined ? {} : { features };
  const context = new Context(options);
  session = { context, worker: context.createWorker() };
  return session;
}

function current(): Session & { endpoint: Endpoint } {
  if (session?.endpoint === undefined) throw new Error('no endpoint');
  return session as Session & { endpoint: Endpoint };
}

function lanes(endpoint: Endpoint): string {
  return endpoint.getTransports().map((l) => `${l.transport}/${l.device}[${l.usage.join(',')}]`).join(' ');
}

async function handle(command: Command): Promise<object> {
  switch (command.type) {
    case 'connect': {
      const s = await newSession(command.features);
      try {
        s.endpoint = await guard(s.worker.connect(command.host as string, command.port as number), 'connect');
      } catch (err) {
        const e = err as Error;
        return { ok: false, name: e.name, message: e.message };
      }
      return { ok: true, lanes: lanes(s.endpoint) };
    }
    case 'listen': {
      const s = await newSession(command.features);
      const size = command.size as number;
      const buffer = new Uint8Array(size);
      if (command.api === 'tag') {
        s.received = s.worker.tagRecv(buffer, TAG).promise.then(({ length }) => buffer.subarray(0, length));
      } else if (command.api === 'am') {
        const iterator = s.worker.amMessages(AM_ID);
        s.received = iterator.next().then(async (next) => {
          if (next.done === true) throw new Error('the AM iterator ended');
          return (await next.value.receive()) as Uint8Array;
        });
      }
      s.received?.catch(() => undefined);
      const listener = s.worker.listen({ host: command.host as string, port: 0 });
      s.listener = listener;
      s.accepted = listener[Symbol.asyncIterator]().next().then((next) => {
        if (next.done === true) throw new Error('the listener ended without a connection');
        s.endpoint = next.value;
        listener.close();
        if (command.api === 'stream') {
          s.received = next.value.streamRecv(buffer, { waitAll: true }).promise.then((n) => buffer.subarray(0, n));
        }
        return next.value;
      });
      s.accepted.catch(() => undefined);
      return { port: listener.port };
    }
    case 'send-stock': {
      const { endpoint } = current();
      const message = ourMessage(command.api as Api, command.size as number);
      // The lanes first: the stock server closes as soon as it has printed the message, so the endpoint
      // may be closed by its peer once the send completes.
      const wired = lanes(endpoint);
      if (command.api === 'tag') await guard(endpoint.tagSend(message, TAG), 'tag send');
      else if (command.api === 'stream') await guard(endpoint.streamSend(message), 'stream send');
      else await guard(endpoint.amSend(AM_ID, null, message), 'AM send');
      return { lanes: wired };
    }
    case 'receive-stock': {
      const s = session;
      if (s?.accepted === undefined) throw new Error('not listening');
      const endpoint = await guard(s.accepted, 'the stock client to connect');
      // The stock client closes as soon as its send completes: its endpoint may be gone already.
      const wired = endpoint.closed ? null : lanes(endpoint);
      const bytes = await guard(s.received as Promise<Uint8Array>, `the stock client's ${command.api} message`);
      const expected = stockMessage(command.size as number);
      let mismatch = bytes.length === expected.length ? -1 : Math.min(bytes.length, expected.length);
      for (let i = 0; mismatch < 0 && i < bytes.length; i++) if (bytes[i] !== expected[i]) mismatch = i;
      return { length: bytes.length, mismatch, lanes: wired };
    }
    case 'rma': {
      const s = session;
      if (s === undefined) throw new Error('no session');
      const endpoint = s.endpoint ?? await guard(s.accepted as Promise<Endpoint>, 'the C client to connect');
      const wired = lanes(endpoint);
      const bye = receiveBye(s.worker);
      bye.catch(() => undefined);
      const results: object[] = [];
      if (command.direction !== 'ts-exposes') results.push(await tsInitiates(endpoint, guard));
      if (command.direction !== 'c-exposes') {
        const { verdict, keyLengths } = await tsExposes(s.context, endpoint, guard);
        results.push({ verdict, keyLengths });
      }
      await guard(bye, 'BYE from the C program');
      // The C program exits after its BYE: the reply must not wait for our close, which 'close' does.
      return { results, lanes: wired };
    }
    case 'close':
      await endSession();
      return {};
    case 'exit':
      await endSession();
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
