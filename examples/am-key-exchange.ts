/**
 * Asking a peer for its memory key with an active message, then using the key: RMA plus atomics.
 *
 *   npm run build && npm run build:test && node build/examples/am-key-exchange.js
 *
 * The owner registers an AM handler for KEY_REQUEST that answers on the reply endpoint with the
 * serialized key (KEY_REPLY). The client sends the request with `reply: true`, waits for the answer on
 * `worker.amMessages(KEY_REPLY)`, writes into the region, bumps a counter with a remote fetch-add and
 * tells the owner it is done. Two processes; every byte goes through UCX.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Context, createRemoteKeyFromSerialized } from 'ucxx-ts';

const KEY_REQUEST = 10; // client -> owner: "send me your key"
const KEY_REPLY = 11; // owner -> client: the serialized key
const DONE = 12; // client -> owner: finished

async function owner(): Promise<void> {
  await using context = new Context();
  const worker = context.createWorker();
  const region = context.createMemoryHandle(1 << 20);
  region.view().fill(0);

  // Answer key requests on the endpoint the request came from.
  worker.setAmHandler(KEY_REQUEST, (message) => {
    void message.replyEndpoint?.amSend(KEY_REPLY, null, region.createRemoteKey().serialize());
  });
  const done = new Promise<void>((resolve) => worker.setAmHandler(DONE, () => resolve()));

  const listener = worker.listen({ host: '127.0.0.1', port: 0 });
  const child = fork(fileURLToPath(import.meta.url), ['client', String(listener.port)]);
  await done;

  const view = region.view();
  const text = Buffer.from(view.subarray(0, 32)).toString().replace(/\0+$/, '');
  const counter = new DataView(view.buffer, view.byteOffset + 4096, 8).getBigUint64(0, true);
  console.log(`owner: the client wrote "${text}" and counted to ${counter}`);
  await new Promise((resolve) => child.once('exit', resolve));
  listener.close();
}

async function client(port: number): Promise<void> {
  await using context = new Context();
  const worker = context.createWorker();
  const endpoint = await worker.connect('127.0.0.1', port);

  // Ask for the key, and take the first answer.
  const replies = worker.amMessages(KEY_REPLY);
  await endpoint.amSend(KEY_REQUEST, null, null, { reply: true });
  const { value: answer } = await replies.next();
  await replies.return?.();
  if (answer === undefined) throw new Error('no key');
  const key = createRemoteKeyFromSerialized(endpoint, await answer.receive());

  await endpoint.memPut(Buffer.from('hello from the client'), key, 0);
  for (let i = 0; i < 10; i++) await endpoint.fetchAdd(key, 4096, 1n);
  await endpoint.flush(); // everything visible at the owner before we say so
  await endpoint.amSend(DONE, null, null);
  await endpoint.close();
}

if (process.argv[2] === 'client') await client(Number(process.argv[3]));
else await owner();
