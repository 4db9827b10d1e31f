/**
 * Test peer: creates every kind of UCX object, uses them, and forgets them (never closes anything).
 * With mode 'natural' the process must exit by itself (an idle worker with its one endpoint unref'd
 * keeps nothing alive); with
 * 'exit' it calls process.exit() while a listener is open and a receive is in flight. Either way the
 * exit must be clean: no crash in UCX at exit.
 */
import { Context, createRemoteKeyFromSerialized } from 'ucxx-ts';

const args = JSON.parse(process.argv[2] ?? '{}') as { mode?: string; progressMode?: 'event' | 'polling' };
const mode = args.mode ?? 'natural';
if (mode === 'connecting') {
  // A manual worker whose progress timer does not hold the process: it exits (status 13, an unsettled
  // top-level await) while a connection is half set up and UCX's async thread is serving it.
  const context = new Context();
  const worker = context.createWorker({ progressMode: 'manual' });
  setInterval(() => worker.progress(), 1).unref();
  const listener = worker.listen({ host: '127.0.0.1', port: 0 });
  await Promise.all([worker.connect('127.0.0.1', listener.port), listener[Symbol.asyncIterator]().next()]);
  console.log('forgotten: connected before the loop emptied');
}
const context = new Context();
const worker = context.createWorker({ progressMode: args.progressMode ?? 'event' });
const region = context.createMemoryHandle(1 << 16);
region.view().fill(5);
const registered = context.createMemoryHandle(4096, new Uint8Array(4096));
// An open endpoint keeps the process alive, as a socket does: this one is unref'd, so that 'natural'
// ends with every object still open.
const endpoint = worker.connectToAddress(worker.getAddress()).unref();
await endpoint.flush();
const key = createRemoteKeyFromSerialized(endpoint, region.createRemoteKey().serialize());
await endpoint.memPut(new Uint8Array([1, 2, 3]), key, 0);
await endpoint.flush();
if (region.view()[2] !== 3) process.exit(2);
// Many 0 <-> 1 changes of the in-flight count: the engine must still let the process go once idle.
const ping = new Uint8Array(8);
for (let i = 0; i < 200; i++) {
  const received = worker.tagRecv(ping, 77n);
  await endpoint.tagSend(new Uint8Array([i, 1, 2, 3, 4, 5, 6, 7]), 77n);
  if ((await received).length !== 8 || ping[0] !== i) process.exit(3);
}
void registered;
if (mode === 'exit') {
  worker.listen({ host: '127.0.0.1', port: 0 });
  void worker.tagRecv(new Uint8Array(8), 12345n);
  setTimeout(() => process.exit(0), 50);
}
console.log('forgotten: done');
