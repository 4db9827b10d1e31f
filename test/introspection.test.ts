/**
 * ucxx's introspection: `context.getInfo()` and `worker.getInfo()` (UCX's own print_info text, as
 * ucxx's getInfo and Python's get_ucp_worker_info) and `worker.queryAttributes()`; each refuses a closed
 * object with ClosedError.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { ClosedError, Context } from 'ucxx-ts';

test('getInfo and queryAttributes report what UCX says, and refuse closed objects', async () => {
  const context = new Context();
  const worker = context.createWorker();
  const contextInfo = context.getInfo();
  assert.match(contextInfo, /^# UCP context$/m);
  assert.match(contextInfo, /component \d+ +: +self/);
  const workerInfo = worker.getInfo();
  assert.match(workerInfo, /^# UCP worker '[^']+'$/m);
  assert.match(workerInfo, /address: \d+ bytes/);
  const attributes = worker.queryAttributes();
  assert.equal(attributes.threadMode, 'single');
  // The limit ucxx-ts checks AM headers against (UCX 1.13 aborts on a larger one).
  assert.ok(Number.isInteger(attributes.maxAmHeader) && attributes.maxAmHeader > 0, String(attributes.maxAmHeader));
  assert.match(attributes.name, /^\S+$/);
  await context.close();
  assert.throws(() => worker.getInfo(), ClosedError);
  assert.throws(() => worker.queryAttributes(), ClosedError);
  assert.throws(() => context.getInfo(), ClosedError);
});
