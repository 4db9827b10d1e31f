/** ucxx-perf: bad options exit with status 2 and a message; --local runs a test and prints JSON. */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';

const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'cli', 'ucxx-perf.js');

function run(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('bad options: status 2 and a message saying what is wrong', () => {
  for (const [args, message] of [
    [['--bogus'], /bogus/],
    [['-t', 'nope'], /unknown test nope/],
    [['-s', '8:4'], /bad size range/],
    [['-s', '12Q'], /bad size/],
    [['-m', 'gpu'], /memory must be/],
    [['-P', 'sometimes'], /progress must be/],
    [['--local', 'somehost'], /no HOST/],
    [['-B', '50'], /--busy-poll applies to --progress event or polling/],
    [['-F', 'x3'], /flush-every must be a non-negative integer/],
  ] as const) {
    const { status, stderr } = run([...args]);
    assert.equal(status, 2, `${args.join(' ')}: ${stderr}`);
    assert.match(stderr, message);
  }
});

test('--local runs a test and prints one JSON object per size', () => {
  const { status, stdout, stderr } = run(['--local', '-t', 'put_bw', '-s', '8,64K', '-n', '200', '-w', '20', '--json']);
  assert.equal(status, 0, stderr);
  const lines = stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  assert.deepEqual(lines.map((l) => l['size']), [8, 65536]);
  for (const line of lines) {
    assert.equal(line['test'], 'put_bw');
    assert.equal(line['iterations'], 200);
    assert.ok((line['bandwidth_MBps'] as number) > 0);
    assert.ok((line['message_rate'] as number) > 0);
  }
});

test('--local with event progress, error handling and a flush every N: the options reach both sides', () => {
  const { status, stdout, stderr } = run([
    '--local', '-t', 'tag_lat', '-s', '8', '-n', '200', '-w', '20', '-P', 'event', '-B', '0', '-e', '--json',
  ]);
  assert.equal(status, 0, stderr);
  const result = JSON.parse(stdout.trim()) as Record<string, unknown>;
  assert.equal(result['progress'], 'event');
  assert.equal(result['error_handling'], true);
  assert.ok((result['latency_us'] as { p50: number }).p50 > 0);
  const flushed = run(['--local', '-t', 'put_bw', '-s', '8', '-n', '3000', '-F', '1000', '--json']);
  assert.equal(flushed.status, 0, flushed.stderr);
  assert.equal((JSON.parse(flushed.stdout.trim()) as Record<string, unknown>)['iterations'], 3000);
});
