/**
 * The request engine's parts on their own (src/engine/), without a peer: the decorators by which an
 * operation reports what it throws through its result, the waiting tag probes, a parameter block's
 * per-operation fields, and the progress call's bracket. The rest of the engine (posting, completion
 * dispatch, the progress engine's modes) is exercised through the public API by every other suite.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { CanceledError, ClosedError, Context, Request, UcxError, getDiagnostics, getUcxVersion } from 'ucxx-ts';
import { ucxProfileOfRun } from './helpers/env.js';
import { promiseOperation, requestOperation } from '#ucxx-ts/engine/operations.js';
import { ProbeWaits } from '#ucxx-ts/engine/probe-waits.js';
import { ParamBlock } from '#ucxx-ts/engine/param-blocks.js';
import { progressOnce } from '#ucxx-ts/engine/completions.js';
import { CONSTANTS, UCS_ERR_INVALID_PARAM, layouts } from '#ucxx-ts/ffi/index.js';

// The library is loaded (the ffi constants and layouts are those of the UCX in use).
assert.ok(getUcxVersion()[0] >= 1);

/** What post() returns when nothing throws: the decorator must hand it back as it is. */
const SENTINEL = { returned: true } as unknown as Request<void>;

class Operations {
  calls = 0;

  @requestOperation
  post(mode: string, _b?: number, _c?: number): Request<void> {
    this.calls++;
    if (mode === 'ucx') throw new UcxError(-6, 'no resource here');
    if (mode === 'closed') throw new ClosedError('the Worker');
    if (mode === 'plain') throw new RangeError('offset out of range');
    if (mode === 'string') throw 'not an Error' as unknown as Error;
    return SENTINEL;
  }

  @promiseOperation
  async wait(mode: string): Promise<number> {
    if (mode === 'sync') throw new TypeError('bad argument');
    return 7;
  }

  @promiseOperation
  waitSync(mode: string): Promise<number> {
    if (mode === 'sync') throw new TypeError('thrown before any Promise exists');
    return Promise.resolve(8);
  }
}

test("requestOperation: a throw becomes the returned Request's failure (a UcxError's status, else INVALID_PARAM); a return passes through", async () => {
  const ops = new Operations();
  const ucx = ops.post('ucx');
  assert.ok(ucx instanceof Request);
  assert.equal(ucx.completed, true);
  assert.ok(ucx.error instanceof UcxError);
  assert.equal(ucx.status, -6);
  await assert.rejects(ucx.promise, (err: Error) => err instanceof UcxError && err.status === -6);

  const closed = ops.post('closed');
  assert.ok(closed.error instanceof ClosedError);
  assert.equal(closed.status, UCS_ERR_INVALID_PARAM);
  await assert.rejects(closed.promise, ClosedError);

  const range = ops.post('plain');
  assert.ok(range.error instanceof RangeError);
  assert.equal(range.status, UCS_ERR_INVALID_PARAM);
  await assert.rejects(range.promise, RangeError);

  const odd = ops.post('string');
  assert.ok(odd.error instanceof Error);
  assert.match(odd.error.message, /not an Error/);
  await assert.rejects(odd.promise, /not an Error/);

  const passed = ops.post('ok');
  assert.equal(passed, SENTINEL, "the method's own result, untouched");
  assert.equal(ops.calls, 5);
  // The wrapper keeps the method's name and declared arity (stack traces, fn.length).
  assert.equal(Operations.prototype.post.name, 'post');
  assert.equal(Operations.prototype.post.length, 3);
});

test('promiseOperation: a synchronous throw becomes a rejection, never a throw; a result passes through', async () => {
  const ops = new Operations();
  let rejected: Promise<number> | undefined;
  assert.doesNotThrow(() => { rejected = ops.waitSync('sync'); });
  await assert.rejects(rejected as Promise<number>, { name: 'TypeError', message: 'thrown before any Promise exists' });
  assert.equal(await ops.waitSync('ok'), 8);
  await assert.rejects(ops.wait('sync'), TypeError);
  assert.equal(await ops.wait('ok'), 7);
  assert.equal(Operations.prototype.waitSync.name, 'waitSync');
  assert.equal(Operations.prototype.waitSync.length, 1);
});

test('ProbeWaits: found at once without holding the worker; holds it while any waits; oldest first; abort and close reject with CanceledError', async () => {
  const holds: number[] = [];
  const waits = new ProbeWaits<string>((delta) => holds.push(delta));
  // Found at once: resolves, nothing held.
  assert.equal(await waits.wait(() => 'now', undefined), 'now');
  assert.deepEqual(holds, []);

  // Two waiters for the same message kind: one hold for both.
  let available: string | null = null;
  const look = (): string | null => {
    const found = available;
    available = null;
    return found;
  };
  const first = waits.wait(look, undefined);
  const second = waits.wait(look, undefined);
  assert.equal(waits.size, 2);
  assert.deepEqual(holds, [1]);
  waits.check(); // nothing there yet
  assert.equal(waits.size, 2);
  available = 'a';
  waits.check(); // one message: the oldest waiter takes it
  assert.equal(await first, 'a');
  assert.equal(waits.size, 1);
  assert.deepEqual(holds, [1]);

  // Abort the second: CanceledError with the signal's reason as cause; the hold is released.
  const controller = new AbortController();
  const third = waits.wait(() => null, controller.signal);
  assert.equal(waits.size, 2);
  controller.abort(new Error('enough'));
  await assert.rejects(third, (err: Error) => err instanceof CanceledError && (err.cause as Error).message === 'enough');
  assert.equal(waits.size, 1);
  waits.cancelAll();
  await assert.rejects(second, (err: Error) => err instanceof CanceledError && /worker was closed/.test(err.message));
  assert.equal(waits.size, 0);
  assert.deepEqual(holds, [1, -1]);

  // A signal aborted before the wait: rejected at once, nothing held.
  await assert.rejects(waits.wait(() => 'x', AbortSignal.abort()), CanceledError);
  assert.deepEqual(holds, [1, -1]);
});

test('ParamBlock: the mask is written once; per-operation fields land at ucp_request_param_t\'s offsets', () => {
  const offsets = layouts.ucp_request_param_t.offsets;
  const mask = Number(CONSTANTS.UCP_OP_ATTR_FIELD_USER_DATA | CONSTANTS.UCP_OP_ATTR_FIELD_FLAGS | CONSTANTS.UCP_OP_ATTR_FIELD_MEMH);
  let filled = false;
  const block = new ParamBlock(mask, false, () => { filled = true; });
  assert.equal(filled, true);
  assert.equal(block.bracketed, false);
  assert.equal(typeof block.address, 'bigint');
  assert.notEqual(block.address, 0n);
  const view = new DataView(block.buffer.buffer, block.buffer.byteOffset, block.buffer.byteLength);
  assert.equal(view.getUint32(offsets.op_attr_mask, true), mask);
  block.setId(123_456);
  block.setFlags(0x5);
  block.setMemh(0x1234_5678_9abc_def0n);
  assert.equal(view.getUint32(offsets.user_data, true), 123_456);
  assert.equal(view.getUint32(offsets.flags, true), 0x5);
  assert.equal(view.getBigUint64(offsets.memh, true), 0x1234_5678_9abc_def0n);
  // Nothing else moved: the mask is still the one written at creation.
  assert.equal(view.getUint32(offsets.op_attr_mask, true), mask);
});

test('progressOnce: returns what the progress call returns, passes the worker, and leaves its bracket closed when the call throws', () => {
  const seen: bigint[] = [];
  assert.equal(progressOnce((worker) => { seen.push(worker); return 3; }, 42n), 3);
  assert.deepEqual(seen, [42n]);
  assert.throws(() => progressOnce(() => { throw new Error('inside progress'); }, 1n), /inside progress/);
  // The bracket is closed again: the next call runs normally.
  assert.equal(progressOnce(() => 0, 2n), 0);
});

test('operation handles (UCX 1.20 profile): a buffer range reused is kept, a fresh buffer\'s is not, at most 256 are kept per worker, none is left after close, and none counts as the application\'s', {
  skip: ucxProfileOfRun(getUcxVersion()).workarounds.peerRendezvousOwnMemh ? false : 'this UCX version maps no handle per operation (profile peerRendezvousOwnMemh off)',
}, async () => {
  const mappings = (): number => getDiagnostics().operationMappings;
  const before = mappings();
  const applicationMappings = getDiagnostics().memoryMappings;
  const context = new Context();
  try {
    const server = context.createWorker();
    const client = context.createWorker();
    const listener = server.listen({ host: '127.0.0.1', port: 0, fastLane: false });
    const endpoint = await client.connect('127.0.0.1', listener.port, { errorHandling: 'peer', fastLane: false });
    const size = 4096;
    const roundTrip = async (outbox: Uint8Array, inbox: Uint8Array, tag: bigint): Promise<void> => {
      const received = server.tagRecv(inbox, tag);
      await endpoint.tagSend(outbox, tag);
      assert.equal((await received).length, size);
      assert.ok(Buffer.from(inbox).equals(Buffer.from(outbox)), 'the bytes arrive');
    };
    // The same two buffers 300 times: one handle each, kept from their second use.
    const outbox = new Uint8Array(size);
    const inbox = new Uint8Array(size);
    for (let i = 0; i < 300; i++) {
      outbox.fill(i & 0xff);
      await roundTrip(outbox, inbox, 1n);
    }
    assert.equal(mappings() - before, 2, 'one handle per buffer');
    assert.equal(getDiagnostics().memoryMappings, applicationMappings, 'none is counted as an application mapping');
    // Fresh buffers each time: mapped for their operation only, never kept.
    for (let i = 0; i < 400; i++) await roundTrip(new Uint8Array(size).fill(i & 0xff), new Uint8Array(size), 2n);
    const live = mappings() - before;
    assert.equal(live, 2, 'fresh buffers keep no handle');
    // 300 buffers used twice each: each worker keeps at most 256 of their handles.
    const reused = Array.from({ length: 300 }, () => [new Uint8Array(size), new Uint8Array(size)] as const);
    for (let k = 0; k < 2; k++) for (const [o, i] of reused) await roundTrip(o, i, 5n);
    const kept = mappings() - before;
    assert.ok(kept > 2 && kept <= 2 * 256, `${kept} handles kept in the two workers`);
    // Receives still posted when the workers close: their handles go with the workers too.
    const abandoned = [server.tagRecv(new Uint8Array(size), 3n), server.tagRecv(inbox, 4n)];
    for (const receive of abandoned) receive.promise.catch(() => undefined);
    assert.ok(mappings() - before > kept, 'the fresh buffer was given a handle');
  } finally {
    await context.close();
  }
  assert.equal(mappings(), before, 'every handle unmapped by the close');
});
