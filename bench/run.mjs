#!/usr/bin/env node
// @ts-check
/**
 * npm run bench (full) / npm run bench:short (CI smoke test).
 *
 * Measures, per test and message size and one after the other (A, B, C, A, B, C...):
 *   A  ucxx-ts, through its CLI: node dist/cli/ucxx-perf.js --local -t TEST -s SIZE ... --json
 *   B  the C baseline, ucx_perftest (ucx-utils, the same libucp): a server and a client on 127.0.0.1
 *   C  Node's own `net` over TCP loopback and a Unix socket (bench/net-baseline.mjs), where the operation
 *      has an equivalent
 * with the same iterations and warm-up for all, one measurement at a time.
 *
 * Writes (full mode): bench/results/<ISO date>.json, bench/results/latest.json, docs/benchmarks.md,
 * docs/benchmarks.svg. Short mode writes the same files to a temporary directory (or --out DIR): its figures
 * are only a smoke test and must not replace the published ones. Exit status 1 if any expected figure is
 * missing (a run failed, timed out or printed nothing parsable), 2 for bad options.
 *
 * Options: --short, --tests a,b, --sizes LIST (overrides the ladder), --progress polling|event|spin,
 * --memory allocated|registered, --out DIR, --no-net, --no-c; --from FILE re-renders docs/benchmarks.md and
 * docs/benchmarks.svg (or --out DIR) from a stored results file without measuring. See docs/performance.md.
 */
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { consoleTable, markdownReport, svgPlot, formatSize, formatFigure, IMPLEMENTATIONS } from './report.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(ROOT, 'dist', 'cli', 'ucxx-perf.js');
const NET = path.join(ROOT, 'bench', 'net-baseline.mjs');
const SCHEMA = 'ucxx-ts-bench/1';

const KiB = 1024;
const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/**
 * Our tests, their ucx_perftest counterpart and their `net` counterpart.
 * kind: which figure is compared: latency (us, p50, lower is better), bandwidth (MB/s) or rate (msg/s).
 * c: ucx_perftest test and fixed options; outstanding: true = pass the same -O as ucxx-perf gets.
 * net: 'lat' (ping-pong, half round trip) or 'bw' (one-way stream), or null with the reason.
 * note: where the definitions differ (the full text is in docs/performance.md).
 * base/progress (progress-mode variants such as 'tag_lat:event'): the ucxx-perf test and -P they run;
 * c.extra: more ucx_perftest options (its wait mode: -E sleep for 'event').
 * @typedef {{ kind: 'latency' | 'bandwidth' | 'rate',
 *   c: { test: string, outstanding: number | 'same', extra?: string[] } | null,
 *   net: 'lat' | 'bw' | null, noNet?: string, sizes?: number[], note?: string, base?: string, progress?: string,
 *   ucxxExtra?: string[] }} TestSpec
 * @type {Record<string, TestSpec>}
 */
const TESTS = {
  put_lat: {
    kind: 'latency', c: { test: 'ucp_put_lat', outstanding: 1 }, net: null,
    noNet: 'no net equivalent (one-sided put + flush)',
    note: 'ucxx-ts times put + flush (a full round trip to the target); ucp_put_lat is half a put ping-pong',
  },
  put_bw: { kind: 'bandwidth', c: { test: 'ucp_put_bw', outstanding: 'same' }, net: 'bw' },
  get_lat: { kind: 'latency', c: { test: 'ucp_get', outstanding: 1 }, net: null, noNet: 'no net equivalent (one-sided get)' },
  get_bw: { kind: 'bandwidth', c: { test: 'ucp_get', outstanding: 'same' }, net: null, noNet: 'no net equivalent (one-sided get)' },
  tag_lat: { kind: 'latency', c: { test: 'tag_lat', outstanding: 1 }, net: 'lat' },
  tag_bw: { kind: 'bandwidth', c: { test: 'tag_bw', outstanding: 'same' }, net: 'bw' },
  stream_bw: { kind: 'bandwidth', c: { test: 'stream_bw', outstanding: 'same' }, net: 'bw' },
  am_lat: { kind: 'latency', c: { test: 'ucp_am_lat', outstanding: 1 }, net: 'lat' },
  am_bw: { kind: 'bandwidth', c: { test: 'ucp_am_bw', outstanding: 'same' }, net: 'bw' },
  atomic_lat: {
    kind: 'latency', c: { test: 'ucp_fadd', outstanding: 1 }, net: null, noNet: 'no net equivalent (remote atomic)',
    sizes: [8],
  },
  atomic_rate: {
    kind: 'rate', c: { test: 'ucp_add', outstanding: 'same' }, net: null, noNet: 'no net equivalent (remote atomic)',
    sizes: [8],
  },
  // The issue's rate target: 8 B puts with one flush per 1,000.
  'put_bw:flush1000': {
    kind: 'rate', c: { test: 'ucp_put_bw', outstanding: 'same' }, net: null,
    noNet: 'no net equivalent (one-sided put + flush)', sizes: [8], base: 'put_bw', ucxxExtra: ['-F', '1000'],
    note: 'ucxx-ts flushes after every 1,000 puts; ucp_put_bw flushes once, at the end',
  },
};
// The issue's latency targets are per progress mode: 8 B latency with the library's own 'polling' and
// 'event' progress (Promises, the event loop running), against ucx_perftest polling (its default) and
// sleeping (-E sleep: ucp_worker_wait between operations).
for (const base of /** @type {const} */ (['put_lat', 'tag_lat', 'am_lat'])) {
  for (const progress of /** @type {const} */ (['polling', 'event'])) {
    const spec = TESTS[base];
    // ucp_put_lat is one-sided (each side watches its own memory): it cannot sleep, -E sleep hangs.
    const sleeps = progress === 'event' && base !== 'put_lat';
    const c = spec.c === null ? null : { ...spec.c, ...(sleeps ? { extra: ['-E', 'sleep'] } : {}) };
    /** @type {TestSpec} */
    const variant = { ...spec, c, sizes: [8], base, progress };
    if (progress === 'event') {
      variant.note = `ucxx-ts -P event (sleeps in epoll after a 50 us grace period); ${sleeps ? 'ucx_perftest -E sleep' : 'ucx_perftest polls (ucp_put_lat cannot sleep)'}` +
        (spec.note === undefined ? '' : `; ${spec.note}`);
    }
    TESTS[`${base}:${progress}`] = variant;
  }
}

const FULL_SIZES = [8, 64, 512, 4 * KiB, 32 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB, 64 * MiB];
const SHORT_SIZES = [8, 64 * KiB];
const OUTSTANDING = 32; // ucx_perftest's own default for tag_bw, ucp_put_bw and ucp_am_bw

/**
 * Iterations and warm-up for one point, the same for every implementation.
 * Latency tests: ~256 MiB of ping-pong traffic, 5..20000 round trips. Bandwidth: ~2 GiB, 8..100000
 * messages. Rate tests: 200,000 operations (1,000,000 for the puts with a flush per 1,000).
 * Warm-up: JavaScript needs thousands of iterations of a loop before V8 has compiled it with its
 * optimizing tiers, and until then its compiler threads take CPU from the busy-polling peers. Messages
 * up to 64 KiB get 20,000 warm-up operations (10,000 for bandwidth); larger ones up to 2,000 (latency)
 * or 10,000 (bandwidth), bounded to ~1 GiB / ~4 GiB of traffic. ucx_perftest and net get the same.
 * @param {string} test @param {number} size @param {boolean} short
 */
function iterationsFor(test, size, short) {
  const spec = /** @type {TestSpec} */ (TESTS[test]);
  if (short) {
    const n = spec.kind === 'latency' ? 200 : Math.max(8, Math.min(500, Math.floor((64 * MiB) / size)));
    return { iterations: n, warmup: Math.max(2, Math.floor(n / 10)) };
  }
  if (spec.kind === 'rate') {
    const n = spec.ucxxExtra !== undefined ? 1_000_000 : 200_000;
    return { iterations: n, warmup: n / 10 };
  }
  const clamp = (/** @type {number} */ x, /** @type {number} */ lo, /** @type {number} */ hi) => Math.max(lo, Math.min(hi, x));
  const small = size <= 64 * KiB;
  if (spec.kind === 'latency') {
    const n = clamp(Math.floor((256 * MiB) / size), 5, 20_000);
    return { iterations: n, warmup: small ? 20_000 : Math.max(Math.floor(n / 10), Math.min(2000, Math.floor(GiB / size))) };
  }
  // 2 GiB keeps a 1 MiB point's measured window at ~50 ms or more: at 512 MiB it was ~13 ms, short
  // enough for one descheduling of a few ms (a neighbour process on this VM wakes every 50 ms) to move
  // a round by 10-20%.
  const n = clamp(Math.floor((2 * GiB) / size), 8, 100_000);
  return {
    iterations: n,
    warmup: small ? Math.max(10_000, Math.floor(n / 10)) : Math.max(Math.floor(n / 10), Math.min(10_000, Math.floor((4 * GiB) / size))),
  };
}

/** A generous bound for one child run: start-up plus the traffic at a pessimistic 50 MB/s and 0.5 ms/op. */
function timeoutFor(/** @type {number} */ size, /** @type {number} */ ops, /** @type {number} */ copies = 1) {
  return Math.ceil(15 + copies * ops * (0.0005 + (2 * size) / 50e6));
}

// ---- child processes --------------------------------------------------------------------------------

/** @type {Set<import('node:child_process').ChildProcess>} */
const live = new Set();
const HAVE_TIMEOUT = existsSync('/usr/bin/timeout') || existsSync('/bin/timeout');

/** Kills a child's whole process group (it is a group leader: detached), and so its own children. */
function killGroup(/** @type {import('node:child_process').ChildProcess} */ child) {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    try { child.kill('SIGKILL'); } catch { /* gone */ }
  }
}

function killAll() {
  for (const child of live) killGroup(child);
}
process.on('exit', killAll);
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM', 'SIGHUP'])) {
  process.on(signal, () => {
    killAll();
    process.stderr.write(`\nbench: ${signal}, children killed\n`);
    process.exit(130);
  });
}

/**
 * Starts a command in its own process group, under coreutils `timeout` as a second line of defence (it
 * kills the group even if this process dies without cleaning up).
 * @param {string} command @param {string[]} args @param {number} timeoutS
 */
function start(command, args, timeoutS) {
  const [file, argv] = HAVE_TIMEOUT
    ? ['timeout', ['-s', 'KILL', String(timeoutS + 5), command, ...args]]
    : [command, args];
  const child = spawn(file, argv, { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
  live.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (d) => { stdout += d; });
  child.stderr?.setEncoding('utf8').on('data', (d) => { stderr += d; });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child);
  }, timeoutS * 1000);
  const started = process.hrtime.bigint();
  /** @type {Promise<{ code: number | null, signal: string | null, stdout: string, stderr: string, timedOut: boolean, wallS: number }>} */
  const done = new Promise((resolve) => {
    child.on('error', (err) => { stderr += `\nspawn error: ${err.message}`; });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      live.delete(child);
      // The group may still hold a grandchild (a server the child forked): take it down too.
      try { if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL'); } catch { /* none left */ }
      resolve({
        code, signal, stdout, stderr, timedOut: timedOut || code === 137 || (HAVE_TIMEOUT && code === 124),
        wallS: Number(process.hrtime.bigint() - started) / 1e9,
      });
    });
  });
  return { child, done, command: [command, ...args].map(shellQuote).join(' ') };
}

function shellQuote(/** @type {string} */ s) {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`;
}

/** @param {{ code: number | null, signal: string | null, stdout: string, stderr: string, timedOut: boolean }} r @param {number} timeoutS */
function describeFailure(r, timeoutS) {
  const why = r.timedOut ? `timed out after ${timeoutS} s (killed)` : r.signal !== null ? `killed by ${r.signal}` : `exit status ${r.code}`;
  const tail = (/** @type {string} */ s) => s.trim().split('\n').slice(-8).join('\n');
  const out = [tail(r.stderr), tail(r.stdout)].filter((s) => s.length > 0).join('\n');
  return out.length > 0 ? `${why}; output:\n${out}` : `${why}; no output`;
}

// ---- the three implementations ----------------------------------------------------------------------

/**
 * @typedef {{ status: 'ok' | 'failed' | 'skipped' | 'n/a', latency_us?: { p50: number | null, avg: number | null, p99: number | null },
 *   bandwidth_MBps?: number | null, message_rate?: number | null, iterations?: number, command?: string, wall_s?: number,
 *   error?: string, detail?: Record<string, unknown>, timedOut?: boolean, rounds?: (number | null)[] }} Measurement
 * (timedOut is internal: removed before the report is written)
 */

/**
 * @param {{ test: string, size: number, iterations: number, warmup: number, outstanding: number }} point
 * @param {{ progress: string, memory: string }} config
 * @returns {Promise<Measurement>}
 */
async function runUcxx(point, config) {
  const spec = /** @type {TestSpec} */ (TESTS[point.test]);
  const test = spec.base ?? point.test;
  const args = [CLI, '--local', '-t', test, '-s', String(point.size), '-n', String(point.iterations),
    '-w', String(point.warmup), '-m', config.memory, '-P', spec.progress ?? config.progress, ...(spec.ucxxExtra ?? []),
    '--json'];
  if (spec.kind !== 'latency') args.splice(args.length - 1, 0, '-O', String(point.outstanding));
  const timeoutS = timeoutFor(point.size, point.iterations + point.warmup);
  const run = start(process.execPath, args, timeoutS);
  const r = await run.done;
  const command = run.command.replace(process.execPath, 'node').replace(ROOT + '/', '');
  /** @type {any} */
  let found = null;
  for (const line of r.stdout.split('\n')) {
    if (!line.trim().startsWith('{')) continue;
    try {
      const obj = JSON.parse(line);
      if (obj.tool === 'ucxx-perf' && obj.test === test && obj.size === point.size) found = obj;
    } catch { /* not JSON */ }
  }
  if (r.code !== 0 || found === null) {
    const error = found === null && r.code === 0 ? `exit status 0 but no JSON line for size ${point.size}; stdout:\n${r.stdout.trim().slice(-800)}` : describeFailure(r, timeoutS);
    return { status: 'failed', command, wall_s: round(r.wallS), error, timedOut: r.timedOut, ...(found ? { detail: found } : {}) };
  }
  return {
    status: 'ok', command, wall_s: round(r.wallS), iterations: found.iterations,
    latency_us: found.latency_us, bandwidth_MBps: found.bandwidth_MBps, message_rate: found.message_rate,
    detail: { memory: found.memory, progress: found.progress },
  };
}

/** Ports that some socket on this machine uses (any state), from /proc. */
function portsInUse() {
  /** @type {Set<number>} */
  const ports = new Set();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try { text = readFileSync(file, 'utf8'); } catch { continue; }
    for (const line of text.split('\n').slice(1)) {
      const local = line.trim().split(/\s+/)[1];
      if (local !== undefined) ports.add(Number.parseInt(local.slice(local.lastIndexOf(':') + 1), 16));
    }
  }
  return ports;
}

/**
 * A port for ucx_perftest's server. Not from the kernel's ephemeral range: a port that bind(0) handed us
 * and that we then closed can be handed to any other process (UCX listeners bind port 0) before
 * ucx_perftest binds it. Below the ephemeral range nobody gets it by chance.
 */
async function freePort() {
  let low = 32768;
  try {
    low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || low;
  } catch { /* not Linux */ }
  const hi = Math.min(low, 65536) - 1;
  const lo = Math.max(1024, hi - 12000);
  const used = portsInUse();
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = lo + Math.floor(Math.random() * (hi - lo + 1));
    if (used.has(port)) continue;
    const ok = await new Promise((resolve) => {
      const server = net.createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
    });
    if (ok) return port;
  }
  throw new Error('no free port for ucx_perftest');
}

/** True once something listens on TCP `port` (read from /proc: a test connection would be taken as the client). */
function listening(/** @type {number} */ port) {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try { text = readFileSync(file, 'utf8'); } catch { continue; }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[1]?.endsWith(`:${hex}`) && cols[3] === '0A') return true;
    }
  }
  return false;
}

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * @param {{ test: string, size: number, iterations: number, warmup: number, outstanding: number }} point
 * @returns {Promise<Measurement>}
 */
async function runPerftest(point) {
  // A port can still be lost to a race (another process binding it first): then the client is refused or
  // the server cannot bind. Try again on another port, twice at most; anything else is a real failure.
  let result = await runPerftestOnce(point);
  for (let attempt = 0; attempt < 2 && result.status === 'failed' && /Connection refused|bind\(\) failed|did not listen/.test(result.error ?? ''); attempt++) {
    result = await runPerftestOnce(point);
  }
  return result;
}

/**
 * @param {{ test: string, size: number, iterations: number, warmup: number, outstanding: number }} point
 * @returns {Promise<Measurement>}
 */
async function runPerftestOnce(point) {
  const spec = /** @type {TestSpec} */ (TESTS[point.test]);
  const c = /** @type {NonNullable<TestSpec['c']>} */ (spec.c);
  const outstanding = c.outstanding === 'same' ? point.outstanding : c.outstanding;
  const timeoutS = timeoutFor(point.size, point.iterations + point.warmup);
  const port = await freePort();
  const server = start('ucx_perftest', ['-p', String(port)], timeoutS + 10);
  const args = ['127.0.0.1', '-p', String(port), '-t', c.test, '-s', String(point.size), '-n', String(point.iterations),
    '-w', String(point.warmup), '-O', String(outstanding), ...(c.extra ?? [])];
  const command = `ucx_perftest -p ${port} & ucx_perftest ${args.join(' ')}`;
  try {
    const deadline = Date.now() + 10_000;
    let serverExit = null;
    server.done.then((r) => { serverExit = r; });
    while (!listening(port)) {
      if (serverExit !== null) return { status: 'failed', command, error: `the server exited before listening: ${describeFailure(serverExit, timeoutS)}` };
      if (Date.now() > deadline) return { status: 'failed', command, error: 'the server did not listen within 10 s' };
      await sleep(20);
    }
    const client = start('ucx_perftest', args, timeoutS);
    const r = await client.done;
    // The server ends by itself after one test; give it a moment, then make sure.
    await Promise.race([server.done, sleep(5000)]);
    killGroup(server.child);
    const final = /^Final:\s+(.*)$/m.exec(r.stdout);
    const cols = final?.[1]?.trim().split(/\s+/).map(Number) ?? [];
    if (r.code !== 0 || cols.length < 8 || cols.some((x) => !Number.isFinite(x))) {
      const s = await server.done;
      const error = r.code === 0 ? `no parsable "Final:" line; stdout:\n${r.stdout.trim().slice(-800)}` : describeFailure(r, timeoutS);
      return { status: 'failed', command, wall_s: round(r.wallS), error: `${error}${s.stderr.trim() ? `\nserver stderr: ${s.stderr.trim().slice(-400)}` : ''}`, timedOut: r.timedOut };
    }
    const [iters, p50, avg, overall, bwAvgMiBps, bwOverall, mrAvg, mrOverall] = /** @type {number[]} */ (cols);
    return {
      status: 'ok', command, wall_s: round(r.wallS), iterations: iters,
      // "overall" is the whole run's average; "average" is the last report interval's (the same in Final
      // unless the run was long enough for intermediate reports).
      latency_us: { p50, avg: overall, p99: null },
      // ucx_perftest's "MB/s" are MiB/s (bytes / 2^20); ucxx-perf and net-baseline report 10^6 bytes/s.
      bandwidth_MBps: round(/** @type {number} */ (bwOverall) * 1.048576), message_rate: mrOverall,
      detail: { test: c.test, outstanding, final: { iterations: iters, p50, avg, overall, bwAvgMiBps, bwOverallMiBps: bwOverall, mrAvg, mrOverall } },
    };
  } finally {
    killGroup(server.child);
    await server.done;
  }
}

/**
 * Both net transports in one run (one server process, TCP then Unix).
 * @param {{ test: string, size: number, iterations: number, warmup: number }} point
 * @param {'lat' | 'bw'} mode
 * @returns {Promise<Record<'net-tcp' | 'net-unix', Measurement>>}
 */
async function runNet(point, mode) {
  const timeoutS = timeoutFor(point.size, point.iterations + point.warmup, 2);
  const args = [NET, '--mode', mode, '--transport', 'tcp,unix', '-s', String(point.size), '-n', String(point.iterations),
    '-w', String(point.warmup), '--timeout', String(timeoutS), '--json'];
  const run = start(process.execPath, args, timeoutS + 5);
  const r = await run.done;
  const command = run.command.replace(process.execPath, 'node').replace(ROOT + '/', '');
  /** @type {Record<string, any>} */
  const byTransport = {};
  for (const line of r.stdout.split('\n')) {
    if (!line.trim().startsWith('{')) continue;
    try {
      const obj = JSON.parse(line);
      if (obj.tool === 'net-baseline' && obj.size === point.size) byTransport[obj.transport] = obj;
    } catch { /* not JSON */ }
  }
  /** @type {Record<'net-tcp' | 'net-unix', Measurement>} */
  const out = /** @type {any} */ ({});
  for (const t of /** @type {const} */ (['tcp', 'unix'])) {
    const found = byTransport[t];
    out[`net-${t}`] = found === undefined
      ? { status: 'failed', command, wall_s: round(r.wallS), error: r.code === 0 ? `no JSON line for ${t}` : describeFailure(r, timeoutS), timedOut: r.timedOut }
      : {
        status: 'ok', command, wall_s: round(r.wallS), iterations: found.iterations, latency_us: found.latency_us,
        bandwidth_MBps: found.bandwidth_MBps, message_rate: found.message_rate, detail: { mode },
      };
  }
  return out;
}

// ---- figures and ratios -----------------------------------------------------------------------------

/** The compared figure of a measurement, by the test's kind. */
function figure(/** @type {Measurement} */ m, /** @type {TestSpec['kind']} */ kind) {
  if (m.status !== 'ok') return null;
  const v = kind === 'latency' ? m.latency_us?.p50 : kind === 'bandwidth' ? m.bandwidth_MBps : m.message_rate;
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** Rounds for the points the issue's targets are read from. */
const REPEATS = 5;
/**
 * More ucxx-ts / ucx_perftest rounds (without net, the slow part of a round) for the 1 MiB bandwidth
 * targets: one round of either moves by up to a factor of two with this VM's phases, so five pairs
 * left the ratio at the mercy of one or two rounds.
 */
const EXTRA_PAIRS = 6;

/**
 * ucxx-ts's figure over `other`'s, one ratio per round where both have one, sorted. The two ran back to
 * back, so the ratio of a round cancels the machine's slow and fast phases (which last minutes) where a
 * ratio of medians mixes rounds from different phases. The reported ratio is the median of these.
 * @param {Record<string, Measurement>[]} rounds @param {string} other @param {TestSpec['kind']} kind
 */
function pairedRatios(rounds, other, kind) {
  const out = [];
  for (const r of rounds) {
    const a = r['ucxx-ts'] === undefined ? null : figure(r['ucxx-ts'], kind);
    const b = r[other] === undefined ? null : figure(/** @type {Measurement} */ (r[other]), kind);
    if (a !== null && b !== null && b !== 0) out.push(a / b);
  }
  return out.sort((x, y) => x - y);
}

/** 8 B latency (every progress mode), 1 MiB bandwidth and the rate tests: what the targets name. */
function isTargetPoint(/** @type {{ test: string, size: number }} */ point) {
  const kind = /** @type {TestSpec} */ (TESTS[point.test]).kind;
  return kind === 'rate' || (kind === 'latency' && point.size === 8) || (kind === 'bandwidth' && point.size === MiB);
}

/**
 * The round whose figure is the median (lower middle for an even count of successful rounds); the
 * figures of all rounds are kept in `rounds`. A failed round counts only when none succeeded.
 * @param {Measurement[]} measurements @param {TestSpec['kind']} kind @returns {Measurement}
 */
function medianRound(measurements, kind) {
  if (measurements.length === 1) return /** @type {Measurement} */ (measurements[0]);
  const ok = measurements.filter((m) => figure(m, kind) !== null);
  if (ok.length === 0) return /** @type {Measurement} */ (measurements[0]);
  ok.sort((a, b) => /** @type {number} */ (figure(a, kind)) - /** @type {number} */ (figure(b, kind)));
  const chosen = /** @type {Measurement} */ (ok[Math.floor((ok.length - 1) / 2)]);
  return { ...chosen, rounds: measurements.map((m) => figure(m, kind)) };
}

const METRIC = {
  latency: { metric: 'latency_us.p50', unit: 'us', better: 'lower' },
  bandwidth: { metric: 'bandwidth_MBps', unit: 'MB/s', better: 'higher' },
  rate: { metric: 'message_rate', unit: 'msg/s', better: 'higher' },
};

function round(/** @type {number} */ x, digits = 3) {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

// ---- machine ----------------------------------------------------------------------------------------

function tryRun(/** @type {string} */ file, /** @type {string[]} */ args) {
  try {
    return execFileSync(file, args, { cwd: ROOT, encoding: 'utf8', timeout: 20_000, stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

function machineInfo() {
  const cpus = os.cpus();
  let distro = null;
  try {
    distro = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] ?? null;
  } catch { /* not Linux */ }
  const ucxInfo = tryRun('ucx_info', ['-v']);
  const ucxLoaded = tryRun(process.execPath, ['--input-type=module', '-e',
    `import(${JSON.stringify(path.join(ROOT, 'dist', 'index.js'))}).then((m) => console.log(m.getUcxVersion().join('.')))`]);
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const status = tryRun('git', ['status', '--porcelain', '--untracked-files=no']);
  return {
    os: `${os.type()} ${os.release()}`,
    distro,
    arch: os.arch(),
    hostname: os.hostname(),
    cpuModel: cpus[0]?.model.trim() ?? null,
    cpuCount: cpus.length,
    totalMemoryBytes: os.totalmem(),
    node: process.version,
    ucx: {
      ucxxTs: ucxLoaded,
      ucxPerftest: ucxInfo === null ? null : (/Version\s+(\S+)/.exec(ucxInfo)?.[1] ?? null),
      package: tryRun('dpkg-query', ['-W', '-f', '${Version}', 'ucx-utils']),
    },
    ucxxTsVersion: pkg.version,
    git: { commit: tryRun('git', ['rev-parse', 'HEAD']), dirty: status === null ? null : status.length > 0 },
  };
}

// ---- main -------------------------------------------------------------------------------------------

function parseCommandLine() {
  const { values } = parseArgs({
    options: {
      short: { type: 'boolean' },
      tests: { type: 'string' },
      sizes: { type: 'string' },
      progress: { type: 'string' },
      memory: { type: 'string' },
      out: { type: 'string' },
      'no-net': { type: 'boolean' },
      'no-c': { type: 'boolean' },
      from: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    console.log(readFileSync(fileURLToPath(import.meta.url), 'utf8').split('*/')[0]?.replace(/^[\s\S]*?\/\*\*/, '').replace(/^ \* ?/gm, ''));
    process.exit(0);
  }
  const tests = values.tests === undefined ? Object.keys(TESTS) : values.tests.split(',');
  for (const t of tests) if (!(t in TESTS)) throw new Error(`unknown test ${t}; one of ${Object.keys(TESTS).join(' ')}`);
  const progress = values.progress ?? 'spin';
  if (!['polling', 'event', 'spin'].includes(progress)) throw new Error('--progress: polling, event or spin');
  const memory = values.memory ?? 'allocated';
  if (!['allocated', 'registered'].includes(memory)) throw new Error('--memory: allocated or registered');
  /** @type {number[] | null} */
  let sizes = null;
  if (values.sizes !== undefined) {
    sizes = values.sizes.split(',').map((s) => {
      const m = /^(\d+)([kKmM]?)$/.exec(s.trim());
      if (m === null) throw new Error(`bad size ${s}`);
      return Number(m[1]) * ({ '': 1, k: KiB, m: MiB }[(m[2] ?? '').toLowerCase()] ?? 1);
    });
  }
  return {
    short: values.short === true, tests, sizes, progress, memory, out: values.out ?? null,
    net: values['no-net'] !== true, c: values['no-c'] !== true, from: values.from ?? null,
  };
}

async function main() {
  /** @type {ReturnType<typeof parseCommandLine>} */
  let options;
  try {
    options = parseCommandLine();
  } catch (err) {
    console.error(`bench: ${/** @type {Error} */ (err).message}`);
    process.exit(2);
  }
  if (options.from !== null) {
    const stored = JSON.parse(readFileSync(options.from, 'utf8'));
    if (stored.schema !== SCHEMA) throw new Error(`${options.from}: schema ${stored.schema}, expected ${SCHEMA}`);
    const docsDir = options.out !== null ? path.resolve(options.out) : path.join(ROOT, 'docs');
    mkdirSync(docsDir, { recursive: true });
    writeFileSync(path.join(docsDir, 'benchmarks.md'), markdownReport(stored));
    writeFileSync(path.join(docsDir, 'benchmarks.svg'), svgPlot(stored));
    console.log(consoleTable(stored));
    console.log(`\nwritten: ${path.join(docsDir, 'benchmarks.md')}, ${path.join(docsDir, 'benchmarks.svg')}`);
    return;
  }
  const mode = options.short ? 'short' : 'full';
  const started = new Date();
  const loadStart = os.loadavg();
  const machine = machineInfo();
  /** @type {string[]} */
  const problems = [];
  if (!existsSync(CLI)) problems.push(`${path.relative(ROOT, CLI)} is missing: build it with npm run build`);
  if (options.c && tryRun('sh', ['-c', 'command -v ucx_perftest']) === null) problems.push('ucx_perftest is not on PATH (apt-get install ucx-utils)');
  console.error(`bench (${mode}): ${machine.cpuModel} x${machine.cpuCount}, ${(machine.totalMemoryBytes / 2 ** 30).toFixed(1)} GiB, ` +
    `node ${machine.node}, UCX ${machine.ucx.ucxxTs ?? machine.ucx.ucxPerftest ?? '?'}, load ${loadStart.map((x) => x.toFixed(2)).join(' ')}`);
  if (loadStart[0] !== undefined && loadStart[0] > 1.5 * machine.cpuCount / 2) {
    console.error(`bench: warning: the load average is ${loadStart[0].toFixed(2)} on ${machine.cpuCount} CPUs: figures will be noisy`);
  }
  for (const p of problems) console.error(`bench: ${p}`);

  /** @type {any[]} */
  const results = [];
  const points = [];
  for (const test of options.tests) {
    const spec = /** @type {TestSpec} */ (TESTS[test]);
    const sizes = spec.sizes ?? options.sizes ?? (options.short ? SHORT_SIZES : FULL_SIZES);
    for (const size of sizes) points.push({ test, size, ...iterationsFor(test, size, options.short), outstanding: OUTSTANDING });
  }
  /** Per implementation and test: the size at which it timed out (larger sizes are then skipped). */
  /** @type {Map<string, number>} */
  const timedOutAt = new Map();
  const benchStart = Date.now();
  for (const [index, point] of points.entries()) {
    const spec = /** @type {TestSpec} */ (TESTS[point.test]);
    const skip = (/** @type {string} */ impl) => {
      const at = timedOutAt.get(`${impl}/${point.test}`);
      return at === undefined ? null : { status: /** @type {const} */ ('skipped'), error: `skipped: it timed out at ${formatSize(at)}` };
    };
    const noteTimeout = (/** @type {string} */ impl, /** @type {any} */ m) => {
      if (m.status === 'failed' && m.timedOut === true) timedOutAt.set(`${impl}/${point.test}`, point.size);
      delete m.timedOut;
      return m;
    };
    /**
     * One round: ucxx-ts, ucx_perftest and net (TCP then Unix), one at a time. The order rotates from
     * round to round: the first run of a round follows the last run of the previous one (a net run
     * moves gigabytes through two Node processes), and a fixed order would hand whatever that leaves
     * behind to the same implementation every time. Without net (the extra pairs) the two alternate.
     */
    const measureOnce = async (/** @type {number} */ roundIndex, /** @type {boolean} */ withNet) => {
      /** @type {Record<string, Measurement>} */
      const got = {};
      const runUcxxTs = async () => {
        got['ucxx-ts'] = problems.some((p) => p.includes('missing'))
          ? { status: 'failed', error: problems.join('; ') }
          : skip('ucxx-ts') ?? noteTimeout('ucxx-ts', await runUcxx(point, options));
      };
      const runC = async () => {
        got.ucx_perftest = !options.c ? { status: 'n/a', error: 'disabled (--no-c)' }
          : spec.c === null ? { status: 'n/a', error: 'no ucx_perftest equivalent' }
          : problems.some((p) => p.includes('ucx_perftest')) ? { status: 'failed', error: problems.join('; ') }
          : skip('ucx_perftest') ?? noteTimeout('ucx_perftest', await runPerftest(point));
      };
      const runNetBoth = async () => {
        if (!options.net || spec.net === null) {
          const why = !options.net ? 'disabled (--no-net)' : spec.noNet ?? 'no net equivalent';
          got['net-tcp'] = { status: 'n/a', error: why };
          got['net-unix'] = { status: 'n/a', error: why };
          return;
        }
        const skipped = skip('net');
        if (skipped !== null) {
          got['net-tcp'] = skipped;
          got['net-unix'] = skipped;
          return;
        }
        const both = await runNet(point, spec.net);
        got['net-tcp'] = noteTimeout('net', both['net-tcp']);
        got['net-unix'] = both['net-unix'];
        delete got['net-unix'].timedOut;
      };
      const order = withNet ? [runUcxxTs, runC, runNetBoth] : [runUcxxTs, runC];
      for (let i = 0; i < order.length; i++) await /** @type {() => Promise<void>} */ (order[(i + roundIndex) % order.length])();
      return got;
    };
    // The points the issue's targets are read from run REPEATS rounds; the 1 MiB bandwidth targets also
    // get EXTRA_PAIRS rounds of ucxx-ts and ucx_perftest alone. Each implementation's figure is its
    // median round; the other points run once.
    const target = isTargetPoint(point) && !options.short;
    const rounds = [];
    for (let r = 0; r < (target ? REPEATS : 1); r++) rounds.push(await measureOnce(r, true));
    if (target && spec.kind === 'bandwidth') for (let r = 0; r < EXTRA_PAIRS; r++) rounds.push(await measureOnce(r, false));
    /** @type {Record<string, Measurement>} */
    const raw = {};
    for (const impl of IMPLEMENTATIONS) {
      raw[impl] = medianRound(rounds.flatMap((r) => (r[impl] === undefined ? [] : [/** @type {Measurement} */ (r[impl])])), spec.kind);
    }
    /** @type {Record<string, number | null>} */
    const figures = {};
    for (const impl of IMPLEMENTATIONS) figures[impl] = figure(/** @type {Measurement} */ (raw[impl]), spec.kind);
    /** @type {Record<string, number | null>} */
    const ratios = {};
    /** @type {Record<string, number[]>} */
    const ratioRounds = {};
    for (const other of IMPLEMENTATIONS.slice(1)) {
      const paired = pairedRatios(rounds, other, spec.kind);
      ratioRounds[`ucxx-ts/${other}`] = paired.map((x) => round(x, 4));
      ratios[`ucxx-ts/${other}`] = paired.length === 0 ? null : round(/** @type {number} */ (paired[Math.floor((paired.length - 1) / 2)]), 4);
    }
    const record = {
      test: point.test, size: point.size, kind: spec.kind, ...METRIC[spec.kind],
      iterations: point.iterations, warmup: point.warmup, outstanding: spec.kind === 'latency' ? 1 : point.outstanding,
      equivalents: { ucx_perftest: spec.c?.test ?? null, net: spec.net === null ? null : `${spec.net} (tcp, unix)` },
      note: spec.note ?? null,
      figures, ratios, ratioRounds, raw,
    };
    results.push(record);
    const show = IMPLEMENTATIONS.map((impl) => {
      const m = /** @type {Measurement} */ (raw[impl]);
      const f = figures[impl];
      return `${impl} ${f !== null ? `${formatFigure(f)}` : m.status === 'n/a' ? '-' : m.status.toUpperCase()}`;
    }).join(' | ');
    const elapsed = Math.round((Date.now() - benchStart) / 1000);
    console.error(`[${index + 1}/${points.length} ${elapsed}s] ${point.test} ${formatSize(point.size)} (${METRIC[spec.kind].unit}): ${show}`);
  }

  const failures = [];
  for (const r of results) {
    for (const impl of IMPLEMENTATIONS) {
      const m = r.raw[impl];
      if (m.status === 'failed' || m.status === 'skipped') failures.push({ test: r.test, size: r.size, implementation: impl, status: m.status, command: m.command ?? null, error: m.error ?? null });
    }
  }
  const report = {
    schema: SCHEMA,
    date: started.toISOString(),
    mode,
    durationS: Math.round((Date.now() - started.getTime()) / 1000),
    machine: { ...machine, loadAverage: { start: loadStart.map((x) => round(x, 2)), end: os.loadavg().map((x) => round(x, 2)) } },
    config: {
      order: 'per test and size: ucxx-ts, ucx_perftest, net (tcp then unix), the order rotating from round to round; one measurement at a time',
      rounds: options.short ? 1 : REPEATS,
      extraPairs: options.short ? 0 : EXTRA_PAIRS,
      ucxxPerf: { memory: options.memory, progress: options.progress, outstanding: OUTSTANDING },
      ucxPerftest: 'server and client on 127.0.0.1, default transports, UCX-allocated buffers (its only host mode)',
      net: 'bench/net-baseline.mjs: TCP 127.0.0.1 (TCP_NODELAY) and a Unix socket, server in a child process',
      latencyMetric: 'latency_us.p50 (per-operation median; half a round trip for ping-pong tests)',
      ratio: 'ucxx-ts figure / other figure, the median over the rounds where both ran (ratioRounds): latency < 1 = ucxx-ts faster; bandwidth and rate > 1 = ucxx-ts faster',
    },
    implementations: IMPLEMENTATIONS,
    results,
    failures,
  };

  // Outputs.
  const outDir = options.out !== null ? path.resolve(options.out)
    : options.short ? mkdtempSync(path.join(os.tmpdir(), 'ucxx-bench-short-')) : null;
  const resultsDir = outDir ?? path.join(ROOT, 'bench', 'results');
  const docsDir = outDir ?? path.join(ROOT, 'docs');
  mkdirSync(resultsDir, { recursive: true });
  mkdirSync(docsDir, { recursive: true });
  const stamp = started.toISOString().replace(/\.\d+Z$/, 'Z').replaceAll(':', '-');
  const json = `${JSON.stringify(report, null, 2)}\n`;
  const written = [];
  for (const file of [path.join(resultsDir, `${stamp}.json`), path.join(resultsDir, 'latest.json')]) {
    writeFileSync(file, json);
    written.push(file);
  }
  writeFileSync(path.join(docsDir, 'benchmarks.md'), markdownReport(report));
  writeFileSync(path.join(docsDir, 'benchmarks.svg'), svgPlot(report));
  written.push(path.join(docsDir, 'benchmarks.md'), path.join(docsDir, 'benchmarks.svg'));

  console.log(consoleTable(report));
  console.log(`\nwritten: ${written.map((f) => path.relative(process.cwd(), f) || f).join(', ')}`);

  // Every part must have produced its figures and files.
  const missingFiles = written.filter((f) => !existsSync(f) || readFileSync(f).length === 0);
  if (missingFiles.length > 0) failures.push({ test: '-', size: 0, implementation: 'report', status: 'failed', command: null, error: `empty or missing: ${missingFiles.join(', ')}` });
  if (failures.length > 0) {
    console.error(`\nbench: ${failures.length} figure(s) missing:`);
    for (const f of failures) {
      console.error(`- ${f.implementation} ${f.test} ${formatSize(f.size)}: ${f.status}${f.command ? `\n  command: ${f.command}` : ''}\n  ${String(f.error).replaceAll('\n', '\n  ')}`);
    }
    process.exitCode = 1;
  } else {
    console.error(`bench: all ${results.length} points measured in ${report.durationS} s`);
  }
}

main().catch((err) => {
  killAll();
  console.error(`bench: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  process.exit(1);
});
