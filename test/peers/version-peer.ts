/**
 * Test peer for connections between processes on different UCX versions (the test chooses each peer's
 * UCX through UCXX_TS_UCX_LIBDIR). Commands over IPC: 'listen' (reports its port, worker address and
 * UCX version; every accepted connection and what became of it is reported as 'accepted'), 'connect'
 * to a port and 'connect-address' with a worker address (each reports how it ended, and, when it
 * seemed to succeed, whether a tag message then went through), 'exit'. A connection the listener could
 * not accept is reported as 'connection-error'.
 */
import '../helpers/peer-errors.js';
import { ConnectionAcceptError, Context, getUcxVersion, type Endpoint, type EndpointOptions } from 'ucxx-ts';

process.on('disconnect', () => process.exit(3));
const send = (message: object): void => {
  process.send?.(message);
};

const config = JSON.parse(process.argv[2] ?? '{}') as { errorHandling?: EndpointOptions['errorHandling'] };
const options: EndpointOptions = config.errorHandling === undefined ? {} : { errorHandling: config.errorHandling };
const context = new Context();
const worker = context.createWorker();
const version = getUcxVersion().join('.');

/** What an error is, as the test checks it (class, code, status, message). */
function describe(err: unknown): object {
  const e = err as {
    name?: string; code?: unknown; status?: unknown; message?: string; packedBy?: string; cause?: { name?: string; message?: string };
  };
  return {
    name: e.name, code: e.code ?? null, status: e.status ?? null, message: e.message ?? String(err), packedBy: e.packedBy ?? null,
    cause: e.cause === undefined ? null : { name: e.cause.name, message: e.cause.message },
  };
}

/** Whether a tag message gets through `ep` (and back: the test only needs to know it fails or not). */
async function probe(ep: Endpoint, ms: number): Promise<object> {
  const timer = new Promise<object>((resolve) => setTimeout(() => resolve({ outcome: 'pending' }), ms).unref());
  return Promise.race([
    ep.tagSend(new Uint8Array(64).fill(7), 5n).then(() => ep.flush().promise).then(() => ({ outcome: 'sent' }), (err) => ({ outcome: 'failed', error: describe(err) })),
    timer,
  ]);
}

function watch(ep: Endpoint, label: string): void {
  ep.on('error', (err) => send({ type: 'endpoint-error', label, error: describe(err) }));
}

/** Connects as the command says and reports how it ended; the endpoint stays open until 'exit', since
 * closing it at once would race the listener's own probe of it. */
async function connectAndProbe(command: { type: string; port?: number; address?: number[]; probeMs?: number }): Promise<void> {
  const started = Date.now();
  try {
    const ep = command.type === 'connect'
      ? await worker.connect('127.0.0.1', command.port ?? 0, options)
      : worker.connectToAddress(new Uint8Array(command.address ?? []), options);
    watch(ep, 'connected');
    const result = await probe(ep, command.probeMs ?? 2000);
    send({ type: 'connect-result', ok: true, ms: Date.now() - started, probe: result, version });
  } catch (err) {
    send({ type: 'connect-result', ok: false, ms: Date.now() - started, error: describe(err), version });
  }
}

process.on('message', (command: { type: string; port?: number; address?: number[]; probeMs?: number }) => {
  void (async () => {
    switch (command.type) {
      case 'listen': {
        const listener = worker.listen({ host: '127.0.0.1', port: 0, endpoint: options }, (ep) => {
          watch(ep, 'accepted');
          void probe(ep, command.probeMs ?? 2000).then((result) => send({ type: 'accepted', probe: result }));
        });
        listener.on('connectionError', (err) => {
          send({ type: 'connection-error', error: describe(err), ucxStatus: err.ucxStatus, client: err.client, isClass: err instanceof ConnectionAcceptError });
        });
        send({ type: 'listening', port: listener.port, address: [...worker.getAddress()], version });
        break;
      }
      case 'connect':
      case 'connect-address':
        await connectAndProbe(command);
        break;
      case 'exit':
        await context.close();
        process.exit(0);
    }
  })();
});
send({ type: 'ready', version });
