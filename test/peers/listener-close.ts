/**
 * Test peer for closing a listener while connections to it are being set up (UCX 1.13 frees the
 * listener that an accepted, not yet handed over connection still points at:
 * docs/ucx-1.13-bugs/listener_destroy_conn_request.c). Over IPC:
 *
 * - 'listen' -> { type: 'listening', port }; the test then connects a plain TCP socket (its connection
 *   data held back), 'close' -> { type: 'closed', closed, diagnostics }; 'relisten' -> listens on the
 *   same port again -> { type: 'relistened', port }; 'exit' closes the worker and exits 0.
 * - 'race' { ms }: for `ms` milliseconds, listeners that are closed while a client of this process
 *   connects to them -> { type: 'raced', tries, connected, refused, others }.
 *
 * With the config { exitWhileConnectingMs }, it instead starts a connection to its own listener,
 * progresses for that long and exits (status 0) while the connection is being set up.
 */
import '../helpers/peer-errors.js';
import { Context, getDiagnostics, type Listener } from 'ucxx-ts';

const send = (message: object): void => {
  process.send?.(message);
};
process.on('disconnect', () => process.exit(3));

const config = JSON.parse(process.argv[2] ?? '{}') as { exitWhileConnectingMs?: number };
if (config.exitWhileConnectingMs !== undefined) {
  const context = new Context();
  const worker = context.createWorker({ progressMode: 'manual' });
  const own = worker.listen({ host: '127.0.0.1', port: 0 });
  worker.connect('127.0.0.1', own.port).catch(() => undefined);
  await new Promise((resolve) => setImmediate(resolve)); // connect() creates its endpoint after an await
  const until = performance.now() + config.exitWhileConnectingMs;
  while (performance.now() < until) worker.progress();
  process.exit(0);
}

const context = new Context();
const worker = context.createWorker();
let listener: Listener | undefined;

async function race(ms: number): Promise<object> {
  let tries = 0;
  let connected = 0;
  let refused = 0;
  const others: string[] = [];
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const current = worker.listen({ host: '127.0.0.1', port: 0 });
    const connecting = worker.connect('127.0.0.1', current.port);
    // A varying number of event-loop turns before the close, so that closes land at every stage.
    for (let i = 0; i < tries % 8; i++) await new Promise((resolve) => setImmediate(resolve));
    current.close();
    tries++;
    try {
      const endpoint = await connecting;
      connected++;
      await endpoint.close();
    } catch (err) {
      if ((err as Error).name === 'ConnectionRefusedError') refused++;
      else if (others.length < 5) others.push(`${(err as Error).name}: ${(err as Error).message}`);
    }
  }
  return { type: 'raced', tries, connected, refused, others };
}

process.on('message', (command: { type: string; ms?: number }) => {
  void (async () => {
    if (command.type === 'listen') {
      listener = worker.listen({ host: '127.0.0.1', port: 0 });
      send({ type: 'listening', port: listener.port });
    } else if (command.type === 'close') {
      listener?.close();
      send({ type: 'closed', closed: listener?.closed, diagnostics: getDiagnostics() });
    } else if (command.type === 'relisten') {
      const port = listener?.port ?? 0;
      listener = worker.listen({ host: '127.0.0.1', port });
      send({ type: 'relistened', port: listener.port });
    } else if (command.type === 'race') {
      send(await race(command.ms ?? 1000));
    } else if (command.type === 'exit') {
      listener?.close();
      await context.close();
      process.exit(0);
    }
  })();
});
send({ type: 'ready' });
