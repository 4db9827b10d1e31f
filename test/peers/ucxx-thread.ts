/**
 * The body of a `worker_threads` thread that uses ucxx-ts with its own Context (started by
 * test/threads.test.ts and test/peers/thread-exits.ts). `workerData.role`:
 *
 * - 'exchange': one participant of an all-to-all exchange (see test/helpers/thread-exchange.ts).
 * - 'traffic': connects to the parent's listener and runs tag ping-pong plus memPut/flush into the parent's
 *   region without end, then leaves as `workerData.ending` says: 'return' (stops the traffic and returns,
 *   every object forgotten, its endpoint unref'd), 'exit' (process.exit() with traffic in flight), 'throw' (an uncaught exception
 *   with traffic in flight), 'terminate' (waits for the parent's worker.terminate(), traffic in flight),
 *   'close' (closes its Context, then returns).
 * - 'handle': reports raw handles (bigints) of its objects, for the parent to try on its own ones.
 * - 'send-and-wait': connects to the parent's listener, posts `count` tag sends of `size` bytes that
 *   nobody receives yet, and waits to be terminated (test/peers/thread-terminated-sends.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Context, createRemoteKeyFromSerialized } from 'ucxx-ts';
import { participant, type ExchangeInfo, type Roster } from '../helpers/thread-exchange.js';

const port = parentPort;
if (port === null) throw new Error('ucxx-thread.js runs as a worker_threads thread');
const data = workerData as {
  role: 'exchange' | 'traffic' | 'handle' | 'send-and-wait';
  /** 'send-and-wait': how many messages, of how many bytes, sent how ('tag' default, 'iov': tag, two parts; 'am': id 7, header [i]). */
  mode?: 'tag' | 'iov' | 'am';
  count?: number;
  size?: number;
  id?: number;
  listenerPort?: number;
  key?: Uint8Array;
  ending?: 'return' | 'exit' | 'throw' | 'terminate' | 'close';
  /** Round trips after which the thread says so. */
  rounds?: number;
  /** 'traffic': the tag it sends with; the parent answers with `tag | 2^32`. */
  tag?: number;
};

function waitFor<T>(type: string): Promise<T> {
  return new Promise((resolve) => {
    const onMessage = (message: { type: string }): void => {
      if (message.type !== type) return;
      port?.off('message', onMessage);
      resolve(message as T);
    };
    port?.on('message', onMessage);
  });
}

if (data.role === 'exchange') {
  const id = data.id as number;
  const context = new Context();
  const worker = context.createWorker();
  const region = context.createMemoryHandle(64 * 1024);
  const info: ExchangeInfo = { id, address: worker.getAddress(), key: region.createRemoteKey().serialize() };
  port.postMessage({ type: 'info', info });
  const roster = await waitFor<{ type: string; roster: Roster }>('roster');
  const report = await participant(id, worker, region, roster.roster, async () => {
    port.postMessage({ type: 'phase-done' });
    await waitFor('check');
  });
  await context.close();
  port.postMessage({ type: 'report', report });
} else if (data.role === 'traffic') {
  const context = new Context();
  const worker = context.createWorker();
  const endpoint = await worker.connect('127.0.0.1', data.listenerPort as number);
  const key = createRemoteKeyFromSerialized(endpoint, data.key as Uint8Array);
  const big = new Uint8Array(64 * 1024).fill(7);
  const reply = new Uint8Array(64 * 1024);
  const rounds = data.rounds ?? 50;
  const tag = BigInt(data.tag ?? 1);
  let round = 0;
  let stop = false;
  const traffic = (async (): Promise<void> => {
    while (!stop) {
      const received = worker.tagRecv(reply, tag | (1n << 32n));
      // Rendezvous-sized send, a put and a flush in flight together.
      const sent = endpoint.tagSend(big, tag);
      const put = endpoint.memPut(big.subarray(0, 4096), key, (round % 8) * 4096);
      await Promise.all([sent, put, received, endpoint.flush()]);
      if (++round === rounds) port.postMessage({ type: 'rounds', round });
    }
  })();
  port.postMessage({ type: 'busy' });
  await waitFor('go'); // the parent says when: with traffic in flight
  switch (data.ending) {
    case 'exit':
      process.exit(0);
      break;
    case 'throw':
      setTimeout(() => {
        throw new Error('uncaught in a ucxx-ts thread');
      }, 0);
      break;
    case 'return':
      stop = true;
      await traffic;
      // Everything forgotten: the thread ends when its loop empties, once its open endpoint no longer
      // keeps it alive (as an open socket would).
      endpoint.unref();
      break;
    case 'close':
      stop = true;
      await traffic;
      await context.close();
      break;
    case 'terminate':
    default:
      await new Promise(() => undefined); // keep going until terminated
  }
} else if (data.role === 'send-and-wait') {
  // Posts `count` rendezvous-sized sends (tag i, bytes (i + 7 * j) & 0xff) nobody receives yet,
  // awaits none, and waits to be terminated: UCX keeps sending from these buffers afterwards.
  const context = new Context();
  const worker = context.createWorker();
  const endpoint = await worker.connect('127.0.0.1', data.listenerPort as number);
  const count = data.count ?? 8;
  const size = data.size ?? 64 * 1024;
  for (let i = 0; i < count; i++) {
    const message = new Uint8Array(size);
    for (let j = 0; j < size; j++) message[j] = (i + 7 * j) & 0xff;
    const sent = data.mode === 'am' ? endpoint.amSend(7, new Uint8Array([i]), message)
      : data.mode === 'iov' ? endpoint.tagSend([message.subarray(0, 100), message.subarray(100)], BigInt(i))
      : endpoint.tagSend(message, BigInt(i));
    sent.catch(() => undefined);
  }
  port.postMessage({ type: 'sent' });
  await new Promise(() => undefined);
} else if (data.role === 'handle') {
  const context = new Context();
  const worker = context.createWorker();
  const region = context.createMemoryHandle(4096);
  const key = region.createRemoteKey();
  const endpoint = worker.connectToAddress(worker.getAddress());
  await endpoint.flush();
  const remote = createRemoteKeyFromSerialized(endpoint, key.serialize());
  port.postMessage({
    type: 'handles',
    worker: worker.getHandle(),
    endpoint: endpoint.getHandle(),
    rkey: remote.getHandle(),
    base: remote.getBaseAddress(),
  });
  await waitFor('done');
  await context.close();
  port.postMessage({ type: 'closed' });
}
