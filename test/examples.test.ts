/** The examples run as documented and succeed (they are also the README's demo). */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { assertNoUcxNoise } from './helpers/ucx-noise.js';

const EXAMPLES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'examples');

function run(name: string): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [path.join(EXAMPLES, name)], { encoding: 'utf8', timeout: 90_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

test('the RMA demo verifies every transfer on both sides', () => {
  const { status, stdout, stderr } = run('rma-demo.js');
  assert.equal(status, 0, `${stdout}\n${stderr}`);
  const ok = /rma-demo: OK: (\d+) transfers verified by both processes/.exec(stdout);
  assert.ok(ok, stdout);
  const transfers = Number(ok[1]);
  assert.ok(transfers >= 4, stdout);
  // Each transfer is two rows (put+flush, get) whose last column is verified initiator/owner: 'yes/yes'.
  const verifiedRows = stdout.split('\n').filter((line) => /^(put\+flush|get)\s.*\byes\/yes$/.test(line));
  assert.equal(verifiedRows.length, 2 * transfers, stdout);
  assert.doesNotMatch(stdout, /\bNO\b/);
  assertNoUcxNoise(`${stdout}\n${stderr}`, 'the RMA demo');
});

test('the active-message key exchange: the owner sees what the client wrote and counted', () => {
  const { status, stdout, stderr } = run('am-key-exchange.js');
  assert.equal(status, 0, `${stdout}\n${stderr}`);
  assert.match(stdout, /the client wrote "hello from the client" and counted to 10/);
  assertNoUcxNoise(`${stdout}\n${stderr}`, 'the active-message key exchange');
});

test("ucxx's echo, ported: the server answers and closes, the client gets its bytes back", () => {
  const { status, stdout, stderr } = run('ucxx-echo.js');
  assert.equal(status, 0, `${stdout}\n${stderr}`);
  assert.match(stdout, /echo server: listening on port \d+/);
  assert.match(stdout, /echo server: echoed \d+ bytes to 127\.0\.0\.1/);
  assert.match(stdout, /echo client: OK: \d+ bytes came back/);
  assertNoUcxNoise(`${stdout}\n${stderr}`, "ucxx's echo");
});
