/** The test harness fails fast and loud: a peer's error reaches the waiting test at once, with its stack. */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Peer } from './helpers/peer.js';
import { eventually } from './helpers/deadline.js';

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

// A test file's process that ends (normally, or by a signal) takes its peers with it, even stopped
// ones; a peer whose owner was SIGKILLed ends when its IPC channel closes. No peer outlives its test.
for (const how of ['exit', 'SIGTERM', 'SIGKILL'] as const) {
  test(`a peer does not outlive the test process that started it (that process ends by ${how})`, async () => {
    const script = `
      import { Peer } from ${JSON.stringify(new URL('./helpers/peer.js', import.meta.url).href)};
      const peer = Peer.start('rma-target', { kind: 'allocated', size: 4096 });
      await peer.next('ready', 10_000);
      // A stopped peer cannot notice anything (as a hung one): only its owner can end it. A SIGKILLed
      // owner cannot: there the peer must notice its channel closing.
      if (${JSON.stringify(how)} !== 'SIGKILL') peer.child.kill('SIGSTOP');
      console.log('PEER ' + peer.child.pid);
      if (${JSON.stringify(how)} === 'exit') process.exit(0);
      setInterval(() => {}, 1000);
    `;
    // A file, not -e: fork() passes the owner's execArgv (--input-type) on to the peer.
    const file = join(mkdtempSync(join(tmpdir(), 'ucxx-ts-owner-')), 'owner.mjs');
    writeFileSync(file, script);
    const owner = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    owner.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
    const deadline = Date.now() + 20_000;
    while (!/PEER (\d+)/.test(out)) {
      assert.ok(Date.now() < deadline && owner.exitCode === null, `the owner did not start its peer: ${out}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const pid = Number(/PEER (\d+)/.exec(out)?.[1]);
    if (how !== 'exit') owner.kill(how);
    await new Promise((resolve) => (owner.exitCode !== null || owner.signalCode !== null ? resolve(null) : owner.once('exit', resolve)));
    const alive = (): boolean => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    const survived = !(await eventually(() => !alive(), 5000, 20));
    if (survived) process.kill(pid, 'SIGKILL');
    assert.equal(survived, false, `peer ${pid} outlived its owner (ended by ${how})`);
  });
}
