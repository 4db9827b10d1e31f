/** The test harness fails fast and loud: a peer's error reaches the waiting test at once, with its stack. */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { Peer } from './helpers/peer.js';

test("an error a peer reports makes Peer.next() reject at once (not after its timeout), and every later wait too", async () => {
  const peer = Peer.start('rma-target', { kind: 'allocated', size: 4096 });
  try {
    await peer.next('ready', 10_000);
    const started = Date.now();
    await assert.rejects(peer.call({ type: 'no-such-command' }, 'verified', 30_000), /peer rma-target reported: unknown command no-such-command/);
    assert.ok(Date.now() - started < 5000, `rejected after ${Date.now() - started} ms`);
    await assert.rejects(peer.next('filled', 30_000), /unknown command/);
  } finally {
    assert.equal(await peer.stop(5000), 0, peer.stderr);
  }
});

test('an uncaught exception in a peer arrives as an error with its stack, and the peer exits 1', async () => {
  // A negative size throws in the peer's top level, before it is ready.
  const peer = Peer.start('rma-target', { kind: 'allocated', size: -5 });
  const started = Date.now();
  await assert.rejects(peer.next('ready', 30_000), (err: Error) => {
    assert.match(err.message, /uncaught exception in peer .*rma-target\.js: ArgumentOutOfRangeError: size must be/);
    assert.match(err.message, /\n\s+at /, 'the stack is part of the error');
    return true;
  });
  assert.ok(Date.now() - started < 10_000, `rejected after ${Date.now() - started} ms`);
  assert.equal((await peer.exited).code, 1);
});
