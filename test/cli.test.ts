/**
 * ucxx-perf: bad options exit with status 2 and a message; --local runs a test and prints JSON; a
 * server whose client dies mid-test goes back to listening. ucxx-info reports what UCX sees.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { getUcxVersion } from 'ucxx-ts';
import { PERF_TESTS } from '../cli/perf/tests.js';
import { ucxLibDir } from './helpers/env.js';
import { assertNoUcxNoise } from './helpers/ucx-noise.js';

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
    [['-n', '0'], /iterations must be at least 1/],
    [['-O', '0'], /outstanding must be at least 1/],
    [['-s', '0'], /size must be at least 1 byte/],
    [['-s', '0,8'], /size must be at least 1 byte/],
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
  assertNoUcxNoise(stderr, 'ucxx-perf --local');
});

test('a clean ucxx-perf run prints no UCX error or warning, in either error mode, for every kind of test', () => {
  for (const t of ['put_lat', 'get_bw', 'tag_lat', 'tag_bw', 'stream_bw', 'am_bw', 'atomic_rate']) {
    for (const mode of [[], ['-e']]) {
      const { status, stdout, stderr } = run(['--local', '-t', t, '-s', '8,256K', '-n', '100', '-w', '10', ...mode]);
      assert.equal(status, 0, `${t} ${mode.join(' ')}: ${stdout}\n${stderr}`);
      assertNoUcxNoise(stderr, `ucxx-perf --local -t ${t} ${mode.join(' ')}`);
    }
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
  const latency = result['latency_us'] as { p50: number; p90: number; avg: number; p99: number; p999: number };
  assert.ok(latency.p50 > 0);
  // The percentiles a tail is judged by, in order (a latency test keeps every sample).
  assert.ok(latency.p50 <= latency.p90 && latency.p90 <= latency.p99 && latency.p99 <= latency.p999, JSON.stringify(latency));
  const flushed = run(['--local', '-t', 'put_bw', '-s', '8', '-n', '3000', '-F', '1000', '--json']);
  assert.equal(flushed.status, 0, flushed.stderr);
  assert.equal((JSON.parse(flushed.stdout.trim()) as Record<string, unknown>)['iterations'], 3000);
});

test('a server whose client is killed mid-test says so, goes back to listening, and serves the next client', async () => {
  for (const progress of ['spin', 'event']) {
    const server = spawn(process.execPath, [CLI, '-p', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    const seen = (pattern: RegExp, what: string): Promise<RegExpMatchArray> => new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}; server stderr:\n${stderr}`)), 60_000);
      const look = (): void => {
        const match = pattern.exec(stderr);
        if (match === null) return;
        clearTimeout(timer);
        server.stderr?.off('data', look);
        resolve(match);
      };
      server.stderr?.on('data', look);
      look();
    });
    server.stderr?.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    try {
      const port = (await seen(/listening on port (\d+)/, 'the server to listen'))[1] as string;
      // A client that would run for minutes, killed while it measures (or still sets up, on a slow
      // machine: the server must recover from either).
      const client = spawn(process.execPath, [CLI, '127.0.0.1', '-p', port, '-t', 'tag_lat', '-n', '100000000', '-P', progress],
        { stdio: 'ignore' });
      await new Promise((resolve) => setTimeout(resolve, 2000));
      client.kill('SIGKILL');
      await seen(/the client left mid-test/, `the server (${progress}) to notice the dead client`);
      await seen(/listening again/, 'the server to listen again');
      const next = spawnSync(process.execPath, [CLI, '127.0.0.1', '-p', port, '-t', 'tag_lat', '-n', '200', '-P', progress, '--json'],
        { encoding: 'utf8', timeout: 60_000 });
      assert.equal(next.status, 0, `${next.stderr}\nserver:\n${stderr}`);
      assert.equal((JSON.parse(next.stdout.trim()) as Record<string, unknown>)['progress'], progress);
    } finally {
      server.kill('SIGKILL');
    }
  }
});

test('docs/performance.md describes each test of the table, with the ucx_perftest counterpart the bench runs', () => {
  const doc = readFileSync(path.join(path.dirname(CLI), '..', '..', 'docs', 'performance.md'), 'utf8');
  const rows = new Map<string, string>();
  for (const line of doc.split('\n')) {
    const row = /^\| `([a-z_]+)` \|(.*)$/.exec(line);
    if (row !== null) rows.set(row[1] as string, row[2] as string);
  }
  const options = /^\| `-t TEST` \| `([^`]*)` \|/m.exec(doc);
  assert.deepEqual(options?.[1]?.split(' '), [...PERF_TESTS.keys()], 'the -t row lists the tests in the table\'s order');
  for (const test of PERF_TESTS.values()) {
    const row = rows.get(test.name);
    assert.ok(row !== undefined, `no row for ${test.name}`);
    assert.ok(row.includes(`\`${test.ucxPerftest.test}`), `${test.name}: the row does not name ${test.ucxPerftest.test}`);
    assert.equal(/\| none( \(one-sided\))? \|$/.test(row), test.net.mode === null, `${test.name}: the net column`);
  }
  assert.deepEqual([...rows.keys()].filter((name) => !PERF_TESTS.has(name)), [], 'rows for tests that do not exist');
  const usage = run(['--help']);
  for (const name of PERF_TESTS.keys()) assert.match(usage.stdout, new RegExp(`^ +${name} `, 'm'));
});

const INFO = path.join(path.dirname(CLI), 'ucxx-info.js');

test('ucxx-info: the UCX version, the transports this host has, what ucxx-ts sets, the configuration', () => {
  const json = spawnSync(process.execPath, [INFO, '--json'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(json.status, 0, json.stderr);
  const info = JSON.parse(json.stdout) as {
    ucx: string; ucxLibrary: { path: string; from: string }; resources: { transport: string; device: string }[];
    environment: { name: string }[]; config: Record<string, string>;
  };
  // The UCX this run chose (UCXX_TS_UCX_LIBDIR, else the system's), and the file it came from.
  assert.equal(info.ucx, getUcxVersion().join('.'));
  const libDir = ucxLibDir();
  assert.equal(info.ucxLibrary.from, libDir === undefined ? 'system' : 'UCXX_TS_UCX_LIBDIR');
  assert.match(path.basename(info.ucxLibrary.path), /^libucp\.so/);
  if (libDir !== undefined) assert.equal(path.dirname(info.ucxLibrary.path), realpathSync(libDir));
  else assert.ok(existsSync(info.ucxLibrary.path), info.ucxLibrary.path);
  const text = spawnSync(process.execPath, [INFO], { encoding: 'utf8', timeout: 30_000 });
  assert.match(text.stdout, new RegExp(`^# ucxx-ts \\S+ on UCX ${info.ucx.replace(/\./g, '\\.')}\n# libucp: ${info.ucxLibrary.path.replace(/[.]/g, '\\.')} `, 'm'));
  const transports = new Set(info.resources.map((r) => r.transport));
  for (const t of ['tcp', 'sysv', 'posix', 'cma', 'self']) assert.ok(transports.has(t), `no ${t} in ${[...transports].join(', ')}`);
  assert.ok(info.resources.some((r) => r.transport === 'tcp' && r.device === 'lo'));
  assert.deepEqual(info.environment.map((e) => e.name), ['UCX_MEM_MMAP_HOOK_MODE', 'UCX_MEM_MALLOC_HOOKS', 'UCX_MEM_EVENTS', 'UCX_LOG_FILE']);
  assert.equal(info.config['TLS'], 'all');
  // A setting of the user's shows in the configuration; a stream-only context has fewer resources.
  const config = spawnSync(process.execPath, [INFO, '-c', '--features', 'stream,wakeup'], {
    encoding: 'utf8', timeout: 30_000, env: { ...process.env, UCX_TLS: 'tcp,self' },
  });
  assert.equal(config.status, 0, config.stderr);
  assert.match(config.stdout, /^UCX_TLS=tcp,self$/m);
  const bad = spawnSync(process.execPath, [INFO, '--bogus'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /bogus/);
});
