/**
 * Test peer (a plain child, no IPC): a ucxx-ts server for UCX's stock AM client. It prints "PORT <n>",
 * takes the connection, receives one active message on id 0, checks its size against argv[2]
 * (UCX's example sends a NUL-terminated string of that many bytes), prints "GOT <n>" and calls
 * process.exit() with its endpoint, worker and context still open: the teardown at exit must not
 * crash, whatever state the peer's close left the endpoint in. argv[3]: the progress mode.
 */
import { Context, type ProgressMode } from 'ucxx-ts';

const size = Number(process.argv[2]);
const progressMode = (process.argv[3] ?? 'event') as ProgressMode;
const context = new Context();
const worker = context.createWorker({ progressMode });
const listener = worker.listen({ host: '127.0.0.1', port: 0 });
console.log(`PORT ${listener.port}`);
const accepted = listener[Symbol.asyncIterator]().next();
const received = (async () => {
  for await (const message of worker.amMessages(0)) return await message.receive();
  throw new Error('the AM iterator ended');
})();
const endpoint = (await accepted).value;
const data = await received;
console.log(`GOT ${data.byteLength} ${endpoint?.closed === true ? 'closed' : 'open'}`);
process.exit(data.byteLength === size ? 0 : 3);
