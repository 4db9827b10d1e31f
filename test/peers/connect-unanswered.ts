/**
 * Test peer: a client whose connect the server never answers (test/teardown.test.ts). With leave
 * 'close' or 'exit' it connects with a timeout of its own (a race against a timer, as a user writes
 * one), then leaves while the connect still waits: 'close' (await context.close(), then exit 0) or
 * 'exit' (process.exit(0)); it reports how the abandoned connect settled. With 'after-timeout' the
 * context's failureTimeout is timeoutMs: the connect itself rejects (EndpointTimeoutError), which it
 * reports, then it closes the context and exits 0.
 *
 * Config: { port, timeoutMs, leave: 'close' | 'exit' | 'after-timeout', errorHandling?: 'peer' | 'none' }.
 */
import '../helpers/peer-errors.js';
import { Context } from 'ucxx-ts';

const args = JSON.parse(process.argv[2] ?? '{}') as {
  port: number; timeoutMs: number; leave: 'close' | 'exit' | 'after-timeout'; errorHandling?: 'peer' | 'none';
};
if (args.leave === 'after-timeout') {
  const context = new Context({ failureTimeout: args.timeoutMs });
  const worker = context.createWorker();
  const outcome = await worker.connect('127.0.0.1', args.port, args.errorHandling === undefined ? {} : { errorHandling: args.errorHandling })
    .then(() => ({ ok: true }), (err: Error & { code?: string }) => ({ ok: false, name: err.name, code: err.code, message: err.message }));
  process.send?.({ type: 'connect-failed', ...outcome });
  await context.close();
  process.send?.({ type: 'closed' });
  process.exit(0);
}
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
