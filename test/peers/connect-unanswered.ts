/**
 * Test peer: a client whose connect the server never answers (test/teardown.test.ts). It connects
 * with a timeout of its own (a race against a timer, as a user writes one), then leaves while the
 * connect still waits: 'close' (await context.close(), then exit 0) or 'exit' (process.exit(0)). It
 * reports how the abandoned connect settled.
 *
 * Config: { port, timeoutMs, leave: 'close' | 'exit' }.
 */
import '../helpers/peer-errors.js';
import { Context } from 'ucxx-ts';

const args = JSON.parse(process.argv[2] ?? '{}') as { port: number; timeoutMs: number; leave: 'close' | 'exit' };
const context = new Context();
const worker = context.createWorker();
const connecting = worker.connect('127.0.0.1', args.port);
let settled: Record<string, unknown> = { settled: false };
connecting.then(
  () => { settled = { settled: true, ok: true }; },
  (err: { name?: string; code?: string }) => { settled = { settled: true, ok: false, name: err.name, code: err.code }; },
);
const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), args.timeoutMs));
const first = await Promise.race([connecting.then(() => 'connected' as const, () => 'failed' as const), timer]);
process.send?.({ type: 'timed-out', first });
if (args.leave === 'exit') process.exit(0);
await context.close();
await new Promise(setImmediate); // the connect's rejection handler runs
process.send?.({ type: 'closed', ...settled });
process.exit(0);
