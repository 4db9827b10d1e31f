#!/usr/bin/env node
/**
 * npm run bench (full) / npm run bench:short (CI smoke test).
 *
 * Measures, per test and message size and one after the other (A, B, C, A, B, C...):
 *   A  ucxx-ts, through its CLI: node dist/cli/ucxx-perf.js --local -t TEST -s SIZE ... --json
 *   B  the C baseline, ucx_perftest (ucx-utils, the same libucp): a server and a client on 127.0.0.1
 *   C  Node's own `net` over TCP loopback and a Unix socket (bench/net-baseline.ts), where the operation
 *      has an equivalent
 * then ucxx-ts beside real ucxx (--no-ucxx skips it): ucxx C++ (bench/ucxx-cpp/ucxx_bench.cpp, built with
 * g++ against .venv's libucxx wheel) and ucxx Python (.venv/bin/python -m ucxx.benchmarks.send_recv),
 * tag at 8 B, 4 KiB and 1 MiB, PEER and NONE endpoints, all polling; those run on the wheel's UCX.
 * with the same iterations and warm-up for all, one measurement at a time.
 *
 * Writes (full mode): bench/results/<ISO date>.json, bench/results/latest.json, docs/benchmarks.md,
 * docs/benchmarks.svg. Short mode writes the same files to a temporary directory (or --out DIR): its figures
 * are only a smoke test and must not replace the published ones. Exit status 1 if any expected figure is
 * missing (a run failed, timed out or printed nothing parsable), 2 for bad options.
 *
 * Options: --short, --tests a,b, --sizes LIST (overrides the ladder), --progress polling|event|spin,
 * --memory allocated|registered, --out DIR, --no-net, --no-c, --no-ucxx; --from FILE re-renders docs/benchmarks.md and
 * docs/benchmarks.svg (or --out DIR) from a stored results file without measuring. See docs/performance.md.
 */
// --help prints the comment above, read from this source file (bench/run.ts); npm run bench runs its
// compiled form, build/bench/run.js (npm run build:test, tsconfig.test.json).
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  consoleTable, markdownReport, svgPlot, formatSize, formatFigure, IMPLEMENTATIONS,
  type BenchReport, type Failure, type Kind, type LatencyFigures, type MachineInfo, type Measurement,
  type ResultRecord, type UcxxColumn, type UcxxComparison, type UcxxRow, type UcxxTarget,
} from './report.js';
import { PERF_TESTS } from '../cli/perf/tests.js';
import { freePort, useUcxLibDir } from './ucx-perftest.js';
import { TwoHosts, twoHostsUnavailable } from '../test/helpers/two-hosts.js';
import { findUcxxWheel, ucxxLinkArgs, type UcxxWheel } from '../test/helpers/ucxx-wheel.js';

// This file runs as build/bench/run.js (tsconfig.test.json: rootDir ".", outDir "build"): the repository
// root is two levels up from it.
const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const SOURCE = path.join(ROOT, 'bench', 'run.ts');
const CLI = path.join(ROOT, 'dist', 'cli', 'ucxx-perf.js');
const NET = path.join(ROOT, 'build', 'bench', 'net-baseline.js');
const FLOOR = path.join(ROOT, 'build', 'bench', 'ffi-floor.js');
const SCHEMA = 'ucxx-ts-bench/1';

const KiB = 1024;
const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

// ---- the tests --------------------------------------------------------------------------------------

/** A ping-pong (half round trip) or a one-way stream: the two modes of bench/net-baseline.ts. */
export type NetMode = 'lat' | 'bw';

/** The ucx_perftest counterpart of a test. */
export interface PerftestEquivalent {
  /** ucx_perftest's -t. */
  test: string;
  /** Its -O: a number, or 'same' for the -O that ucxx-perf gets. */
  outstanding: number | 'same';
  /** More ucx_perftest options (its wait mode: -E sleep for 'event'). */
  extra?: string[];
}

/** One of our tests, its ucx_perftest counterpart and its `net` counterpart. */
export interface TestSpec {
  /** Which figure is compared: latency (us, p50, lower is better), bandwidth (MB/s) or rate (msg/s). */
  kind: Kind;
  /** The ucx_perftest test and fixed options, or null: none. */
  c: PerftestEquivalent | null;
  /** 'lat' (ping-pong, half round trip) or 'bw' (one-way stream), or null with the reason in noNet. */
  net: NetMode | null;
  noNet?: string;
  /** The sizes it runs at, instead of the ladder (and of --sizes). */
  sizes?: number[];
  /** Where the definitions differ (the full text is in docs/performance.md). */
  note?: string;
  /** Progress-mode variants such as 'tag_lat:event': the ucxx-perf test they run... */
  base?: string;
  /** ...and its -P. */
  progress?: string;
  /** More ucxx-perf options. */
  ucxxExtra?: string[];
}

/**
 * Every test the bench knows, by name (its --tests): each of ucxx-perf's tests (cli/perf/tests.ts, where
 * its counterparts are defined with it), then the variants below.
 */
const TESTS: Record<string, TestSpec> = {};
for (const test of PERF_TESTS.values()) {
  TESTS[test.name] = {
    kind: test.kind,
    c: { test: test.ucxPerftest.test, outstanding: test.ucxPerftest.outstanding },
    net: test.net.mode,
    ...(test.net.mode === null ? { noNet: test.net.why } : {}),
    ...(test.sizes === undefined ? {} : { sizes: [...test.sizes] }),
    ...(test.note === undefined ? {} : { note: test.note }),
  };
}
// The rate target of 8 B puts with one flush per 1,000.
TESTS['put_bw:flush1000'] = {
  kind: 'rate', c: { test: 'ucp_put_bw', outstanding: 'same' }, net: null,
  noNet: 'no net equivalent (one-sided put + flush)', sizes: [8], base: 'put_bw', ucxxExtra: ['-F', '1000'],
  note: 'ucxx-ts flushes after every 1,000 puts; ucp_put_bw flushes once, at the end',
};
// The rate targets of 8 B tag and active messages: the bandwidth tests at 8 B, counted as messages per
// second over the rate tests' 1,000,000 operations.
TESTS['tag_bw:rate'] = {
  kind: 'rate', c: { test: 'tag_bw', outstanding: 'same' }, net: null,
  noNet: 'the 8 B net stream is in the tag_bw rows', sizes: [8], base: 'tag_bw',
};
TESTS['am_bw:rate'] = {
  kind: 'rate', c: { test: 'ucp_am_bw', outstanding: 'same' }, net: null,
  noNet: 'the 8 B net stream is in the am_bw rows', sizes: [8], base: 'am_bw',
};
// The latency targets are per progress mode: 8 B latency with the library's own 'polling' and 'event'
// progress (Promises, the event loop running), against ucx_perftest polling (its default) and, for the
// two-sided tests, sleeping (-E sleep: ucp_worker_wait between operations). Each runs twice: tuned
// (await only what is pending, through the native Promise) and as the README writes it (`await
// request`, ucxx-perf -A): TEST:MODE and TEST:MODE:await.
for (const test of PERF_TESTS.values()) {
  if (test.kind !== 'latency') continue;
  const spec = TESTS[test.name] as TestSpec;
  for (const progress of ['polling', 'event'] as const) {
    // The one-sided tests (put, get, atomics) cannot make ucx_perftest sleep: in ucp_put_lat each side
    // watches its own memory, and -E sleep hangs.
    const sleeps = progress === 'event' && test.server !== undefined;
    const c = spec.c === null ? null : { ...spec.c, ...(sleeps ? { extra: ['-E', 'sleep'] } : {}) };
    const event = progress !== 'event' ? [] : [
      `ucxx-ts -P event (sleeps in epoll after a 50 us grace period); ${sleeps ? 'ucx_perftest -E sleep' : 'ucx_perftest polls (a one-sided test cannot sleep)'}`,
    ];
    for (const style of ['tuned', 'await'] as const) {
      const notes = [...event, ...(style === 'await' ? ['ucxx-ts awaits every request (-A, the README\'s idiom)'] : []), ...(spec.note === undefined ? [] : [spec.note])];
      TESTS[`${test.name}:${progress}${style === 'await' ? ':await' : ''}`] = {
        ...spec, c, sizes: [8], base: test.name, progress,
        ...(style === 'await' ? { ucxxExtra: ['-A'] } : {}),
        ...(notes.length === 0 ? {} : { note: notes.join('; ') }),
      };
    }
  }
}

// PEER error handling (ucxx's default, and ucxx-ts's 'auto' from UCX 1.19 on) against ucx_perftest -e:
// TEST:peer at 8 B (latency) and 1 MiB (bandwidth). The rows without :peer are NONE mode on both sides.
for (const name of ['tag_lat', 'put_lat', 'tag_bw', 'put_bw', 'stream_bw'] as const) {
  const spec = TESTS[name] as TestSpec;
  const c = spec.c === null ? null : { ...spec.c, extra: [...(spec.c.extra ?? []), '-e'] };
  TESTS[`${name}:peer`] = {
    ...spec, c, net: null, noNet: 'net has no error-handling mode (see the rows without :peer)',
    sizes: [spec.kind === 'latency' ? 8 : MiB], base: name, ucxxExtra: ['-e'],
    note: ['PEER error handling on both sides (ucxx-perf -e, ucx_perftest -e)', ...(spec.note === undefined ? [] : [spec.note])].join('; '),
  };
}

// The fast lane (ucxx-ts's default between two ucxx-ts processes on one host from UCX 1.19 on: PEER
// mode, data over shared memory) against ucx_perftest in NONE mode, the speed it is meant to reach:
// TEST:lane at 8 B (latency) and 1 MiB (bandwidth).
for (const name of ['tag_lat', 'put_lat', 'tag_bw', 'put_bw', 'stream_bw'] as const) {
  const spec = TESTS[name] as TestSpec;
  TESTS[`${name}:lane`] = {
    ...spec, net: null, noNet: 'net has no error-handling mode (see the rows without :lane)',
    sizes: [spec.kind === 'latency' ? 8 : MiB], base: name, ucxxExtra: ['-L'],
    note: ['ucxx-ts PEER mode with the fast lane (ucxx-perf -L), ucx_perftest NONE', ...(spec.note === undefined ? [] : [spec.note])].join('; '),
  };
}

// ---- iterations ------------------------------------------------------------------------------------

/** One test at one size, with its iterations, warm-up and -O (the same for every implementation). */
interface Point {
  test: string;
  size: number;
  iterations: number;
  warmup: number;
  outstanding: number;
}

/** The TESTS entry of a test: the names come from TESTS (parseCommandLine checks --tests against it). */
function specOf(test: string): TestSpec {
  return TESTS[test] as TestSpec;
}

/**
 * --two-hosts: two network namespaces joined by a veth pair, each in its own UTS and IPC namespace
 * (test/helpers/two-hosts.ts), so that UCX takes them for two machines and uses TCP only. Each server
 * runs in host B, each client in host A. null: both on this host, over loopback.
 */
let hosts: TwoHosts | null = null;
/**
 * The tests and sizes of --two-hosts: the latency tests at 8 B, the bandwidth tests at 64 KiB and 1 MiB.
 * Not get_lat: its server sleeps between checks for the client's DONE, as ucx_perftest's does, and
 * between hosts every get waits for the server (both tools read about 1 ms).
 */
const TWO_HOST_TESTS = ['tag_lat', 'am_lat', 'put_lat', 'tag_bw', 'put_bw', 'get_bw', 'stream_bw', 'am_bw'];
const TWO_HOST_SIZES = { latency: [8], bandwidth: [64 * KiB, MiB] };

/** The argv prefix that runs a program in host A (the client) or B (the server); none on one host. */
function inHost(label: 'A' | 'B'): string[] {
  return hosts === null ? [] : hosts.wrapper(label === 'A' ? hosts.a : hosts.b);
}

/** Starts `command args` in host A or B (or here). */
function startIn(label: 'A' | 'B', command: string, args: string[], timeoutS: number): Started {
  const wrapper = inHost(label);
  if (wrapper.length === 0) return start(command, args, timeoutS);
  const run = start(wrapper[0] as string, [...wrapper.slice(1), command, ...args], timeoutS);
  return { ...run, command: `[host ${label}] ${[command, ...args].map(shellQuote).join(' ')}` };
}

const FULL_SIZES = [8, 64, 512, 4 * KiB, 32 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB, 64 * MiB];
const SHORT_SIZES = [8, 64 * KiB];
const OUTSTANDING = 32; // ucx_perftest's own default for tag_bw, ucp_put_bw and ucp_am_bw

/**
 * Iterations and warm-up for one point, the same for every implementation.
 * Latency tests: ~256 MiB of ping-pong traffic, 5..20000 round trips. Bandwidth: ~2 GiB, 8..100000
 * messages. Rate tests: 1,000,000 operations after 100,000 of warm-up.
 * Warm-up: JavaScript needs thousands of iterations of a loop before V8 has compiled it with its
 * optimizing tiers, and until then its compiler threads take CPU from the busy-polling peers. Messages
 * up to 64 KiB get 20,000 warm-up operations (10,000 for bandwidth); larger ones up to 2,000 (latency)
 * or 10,000 (bandwidth), bounded to ~1 GiB / ~4 GiB of traffic. ucx_perftest and net get the same.
 */
function iterationsFor(test: string, size: number, short: boolean): { iterations: number; warmup: number } {
  const spec = specOf(test);
  if (short) {
    const n = spec.kind === 'latency' ? 200 : Math.max(8, Math.min(500, Math.floor((64 * MiB) / size)));
    return { iterations: n, warmup: Math.max(2, Math.floor(n / 10)) };
  }
  if (spec.kind === 'rate') {
    // V8's code for these loops settles only after a few hundred thousand operations
    // (docs/performance.md); every implementation gets the same.
    return { iterations: 1_000_000, warmup: 100_000 };
  }
  const clamp = (x: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, x));
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
function timeoutFor(size: number, ops: number, copies = 1): number {
  return Math.ceil(15 + copies * ops * (0.0005 + (2 * size) / 50e6));
}

// ---- child processes --------------------------------------------------------------------------------

const live = new Set<ChildProcess>();
const HAVE_TIMEOUT = existsSync('/usr/bin/timeout') || existsSync('/bin/timeout');

/** Kills a child's whole process group (it is a group leader: detached), and so its own children. */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    try { child.kill('SIGKILL'); } catch { /* gone */ }
  }
}

function killAll(): void {
  for (const child of live) killGroup(child);
}
process.on('exit', killAll);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    killAll();
    process.stderr.write(`\nbench: ${signal}, children killed\n`);
    process.exit(130);
  });
}

/** How a child process ended, and what it printed. */
interface ChildResult {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  wallS: number;
}

/** A started child: the process, its end, and its command line as a shell would read it. */
interface Started {
  child: ChildProcess;
  done: Promise<ChildResult>;
  command: string;
}

/**
 * Starts a command in its own process group, under coreutils `timeout` as a second line of defence (it
 * kills the group even if this process dies without cleaning up).
 */
function start(command: string, args: string[], timeoutS: number): Started {
  const [file, argv]: [string, string[]] = HAVE_TIMEOUT
    ? ['timeout', ['-s', 'KILL', String(timeoutS + 5), command, ...args]]
    : [command, args];
  const child = spawn(file, argv, { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
  live.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr?.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child);
  }, timeoutS * 1000);
  const started = process.hrtime.bigint();
  const done = new Promise<ChildResult>((resolve) => {
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

function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`;
}

function describeFailure(r: Omit<ChildResult, 'wallS'>, timeoutS: number): string {
  const why = r.timedOut ? `timed out after ${timeoutS} s (killed)` : r.signal !== null ? `killed by ${r.signal}` : `exit status ${r.code}`;
  const tail = (s: string) => s.trim().split('\n').slice(-8).join('\n');
  const out = [tail(r.stderr), tail(r.stdout)].filter((s) => s.length > 0).join('\n');
  return out.length > 0 ? `${why}; output:\n${out}` : `${why}; no output`;
}

// ---- the three implementations ----------------------------------------------------------------------

/** An object parsed from a JSON line (a line that starts with '{' parses to one, or throws). */
function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null;
}

/** The JSON line of `ucxx-perf --json` (cli/ucxx-perf.ts), the fields read here. */
type UcxxPerfLine = {
  tool: 'ucxx-perf';
  test: string;
  size: number;
  iterations: number;
  latency_us: LatencyFigures;
  bandwidth_MBps: number | null;
  message_rate: number | null;
  memory: string;
  progress: string;
};

/** The JSON line of `net-baseline --json` (bench/net-baseline.ts), the fields read here. */
type NetBaselineLine = {
  tool: 'net-baseline';
  transport: string;
  size: number;
  iterations: number;
  latency_us: LatencyFigures;
  bandwidth_MBps: number | null;
  message_rate: number | null;
};

async function runUcxx(point: Point, config: { progress: string; memory: string }, override?: TestSpec): Promise<Measurement> {
  const spec = override ?? specOf(point.test);
  const test = spec.base ?? point.test;
  const progress = spec.progress ?? config.progress;
  const timeoutS = timeoutFor(point.size, point.iterations + point.warmup);
  // One host: --local (the CLI starts its own server). Two hosts: a server in host B, the client in A.
  let server: Started | null = null;
  let where = ['--local'];
  if (hosts !== null) {
    const port = await freePort();
    server = startIn('B', process.execPath, [CLI, '-p', String(port), '-P', progress], timeoutS + 10);
    const deadline = Date.now() + 10_000;
    while (!listening(port) && Date.now() < deadline) await sleep(20);
    where = [hosts.b.address, '-p', String(port)];
  }
  const args = [CLI, ...where, '-t', test, '-s', String(point.size), '-n', String(point.iterations),
    '-w', String(point.warmup), '-m', config.memory, '-P', progress, ...(spec.ucxxExtra ?? []),
    '--json'];
  if (spec.kind !== 'latency') args.splice(args.length - 1, 0, '-O', String(point.outstanding));
  const run = startIn('A', process.execPath, args, timeoutS);
  const r = await run.done;
  if (server !== null) {
    killGroup(server.child);
    await server.done;
  }
  const command = run.command.replace(process.execPath, 'node').replace(ROOT + '/', '');
  let found: UcxxPerfLine | null = null;
  for (const line of r.stdout.split('\n')) {
    if (!line.trim().startsWith('{')) continue;
    try {
      const obj: unknown = JSON.parse(line);
      // Identified by tool, test and size; the other fields are taken as the CLI writes them.
      if (isObject(obj) && obj.tool === 'ucxx-perf' && obj.test === test && obj.size === point.size) found = obj as UcxxPerfLine;
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

/**
 * True once something listens on TCP `port` (read from /proc: a test connection would be taken as the
 * client), in the server's host.
 */
function listening(port: number): boolean {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = hosts === null ? readFileSync(file, 'utf8')
        : execFileSync('ip', ['netns', 'exec', hosts.b.netns, 'cat', file], { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'ignore'] });
    } catch { continue; }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[1]?.endsWith(`:${hex}`) && cols[3] === '0A') return true;
    }
  }
  return false;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * ucx_perftest at one point. Its `Final:` line has one percentile (`-R`, default the median) besides the
 * mean; at the 8 B latency points a second run with `-R 99` gives the 99th percentile. (ucx_perftest takes
 * its percentile over a window of the latest 2,048 samples, not the whole run.)
 */
async function runPerftest(point: Point): Promise<Measurement> {
  const result = await runPerftestRetried(point, []);
  if (result.status !== 'ok' || specOf(point.test).kind !== 'latency' || point.size !== 8) return result;
  const p99 = await runPerftestRetried(point, ['-R', '99']);
  if (p99.status !== 'ok' || result.latency_us === undefined) return { ...p99, error: `the -R 99 run: ${p99.error ?? p99.status}` };
  return {
    ...result,
    latency_us: { ...result.latency_us, p99: p99.latency_us?.p50 ?? null },
    detail: { ...result.detail, p99Command: p99.command },
  };
}

async function runPerftestRetried(point: Point, extra: string[]): Promise<Measurement> {
  // A port can still be lost to a race (another process binding it first): then the client is refused or
  // the server cannot bind. Try again on another port, twice at most; anything else is a real failure.
  let result = await runPerftestOnce(point, extra);
  for (let attempt = 0; attempt < 2 && result.status === 'failed' && /Connection refused|bind\(\) failed|did not listen/.test(result.error ?? ''); attempt++) {
    result = await runPerftestOnce(point, extra);
  }
  return result;
}

async function runPerftestOnce(point: Point, extra: string[]): Promise<Measurement> {
  const spec = specOf(point.test);
  // Not null: the caller runs ucx_perftest only for tests with a counterpart.
  const c = spec.c as PerftestEquivalent;
  const outstanding = c.outstanding === 'same' ? point.outstanding : c.outstanding;
  const timeoutS = timeoutFor(point.size, point.iterations + point.warmup);
  const port = await freePort();
  const server = startIn('B', 'ucx_perftest', ['-p', String(port)], timeoutS + 10);
  const args = [hosts === null ? '127.0.0.1' : hosts.b.address, '-p', String(port), '-t', c.test, '-s', String(point.size), '-n', String(point.iterations),
    '-w', String(point.warmup), '-O', String(outstanding), ...(c.extra ?? []), ...extra];
  const command = hosts === null ? `ucx_perftest -p ${port} & ucx_perftest ${args.join(' ')}`
    : `[host B] ucx_perftest -p ${port} & [host A] ucx_perftest ${args.join(' ')}`;
  try {
    const deadline = Date.now() + 10_000;
    // Set by the callback below: the cast keeps TypeScript from narrowing it to null for good.
    let serverExit = null as ChildResult | null;
    server.done.then((r) => { serverExit = r; });
    while (!listening(port)) {
      if (serverExit !== null) return { status: 'failed', command, error: `the server exited before listening: ${describeFailure(serverExit, timeoutS)}` };
      if (Date.now() > deadline) return { status: 'failed', command, error: 'the server did not listen within 10 s' };
      await sleep(20);
    }
    const client = startIn('A', 'ucx_perftest', args, timeoutS);
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
    // At least 8 finite numbers (checked above).
    const [iters, p50, avg, overall, bwAvgMiBps, bwOverall, mrAvg, mrOverall] = cols as [number, number, number, number, number, number, number, number];
    return {
      status: 'ok', command, wall_s: round(r.wallS), iterations: iters,
      // "overall" is the whole run's average; "average" is the last report interval's (the same in Final
      // unless the run was long enough for intermediate reports).
      latency_us: { p50, avg: overall, p99: null },
      // ucx_perftest's "MB/s" are MiB/s (bytes / 2^20); ucxx-perf and net-baseline report 10^6 bytes/s.
      bandwidth_MBps: round(bwOverall * 1.048576), message_rate: mrOverall,
      detail: { test: c.test, outstanding, final: { iterations: iters, p50, avg, overall, bwAvgMiBps, bwOverallMiBps: bwOverall, mrAvg, mrOverall } },
    };
  } finally {
    killGroup(server.child);
    await server.done;
  }
}

/** Both net transports in one run (one server process, TCP then Unix). */
async function runNet(point: Omit<Point, 'outstanding'>, mode: NetMode): Promise<Record<'net-tcp' | 'net-unix', Measurement>> {
  const timeoutS = timeoutFor(point.size, point.iterations + point.warmup, 2);
  const args = [NET, '--mode', mode, '--transport', 'tcp,unix', '-s', String(point.size), '-n', String(point.iterations),
    '-w', String(point.warmup), '--timeout', String(timeoutS), '--json'];
  const run = start(process.execPath, args, timeoutS + 5);
  const r = await run.done;
  const command = run.command.replace(process.execPath, 'node').replace(ROOT + '/', '');
  const byTransport: Record<string, NetBaselineLine> = {};
  for (const line of r.stdout.split('\n')) {
    if (!line.trim().startsWith('{')) continue;
    try {
      const obj: unknown = JSON.parse(line);
      // Identified by tool and size; the other fields are taken as net-baseline writes them.
      if (isObject(obj) && obj.tool === 'net-baseline' && obj.size === point.size) byTransport[String(obj.transport)] = obj as NetBaselineLine;
    } catch { /* not JSON */ }
  }
  // Both keys are set by the loop below.
  const out = {} as Record<'net-tcp' | 'net-unix', Measurement>;
  for (const t of ['tcp', 'unix'] as const) {
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
function figure(m: Measurement, kind: Kind): number | null {
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
 */
function pairedRatios(rounds: Record<string, Measurement>[], other: string, kind: Kind): number[] {
  const out: number[] = [];
  for (const r of rounds) {
    const ours = r['ucxx-ts'];
    const theirs = r[other];
    const a = ours === undefined ? null : figure(ours, kind);
    const b = theirs === undefined ? null : figure(theirs, kind);
    if (a !== null && b !== null && b !== 0) out.push(a / b);
  }
  return out.sort((x, y) => x - y);
}

/** 8 B latency (every progress mode), 1 MiB bandwidth and the rate tests: what the targets name. */
function isTargetPoint(point: { test: string; size: number }): boolean {
  const kind = specOf(point.test).kind;
  return kind === 'rate' || (kind === 'latency' && point.size === 8) || (kind === 'bandwidth' && point.size === MiB);
}

/**
 * The round whose figure is the median (lower middle for an even count of successful rounds); the
 * figures of all rounds are kept in `rounds`. A failed round counts only when none succeeded.
 * `measurements` is not empty: the first round of a point measures every implementation.
 */
function medianRound(measurements: Measurement[], kind: Kind): Measurement {
  if (measurements.length === 1) return measurements[0] as Measurement;
  const ok = measurements.filter((m) => figure(m, kind) !== null);
  if (ok.length === 0) return measurements[0] as Measurement;
  // Every one of `ok` has a figure.
  ok.sort((a, b) => (figure(a, kind) as number) - (figure(b, kind) as number));
  const chosen = ok[Math.floor((ok.length - 1) / 2)] as Measurement;
  return { ...chosen, rounds: measurements.map((m) => figure(m, kind)) };
}

/** Each latency statistic's median over the rounds that measured it. */
function medianTails(measurements: Measurement[]): LatencyFigures {
  const median = (key: keyof LatencyFigures): number | null => {
    const xs = measurements.flatMap((m) => {
      const v = m.status === 'ok' ? m.latency_us?.[key] : undefined;
      return typeof v === 'number' && Number.isFinite(v) ? [v] : [];
    }).sort((a, b) => a - b);
    return xs.length === 0 ? null : xs[Math.floor((xs.length - 1) / 2)] as number;
  };
  return { p50: median('p50'), p90: median('p90'), avg: median('avg'), p99: median('p99'), p999: median('p999') };
}

const METRIC: Record<Kind, { metric: string; unit: string; better: 'lower' | 'higher' }> = {
  latency: { metric: 'latency_us.p50', unit: 'us', better: 'lower' },
  bandwidth: { metric: 'bandwidth_MBps', unit: 'MB/s', better: 'higher' },
  rate: { metric: 'message_rate', unit: 'msg/s', better: 'higher' },
};

function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

// ---- ucxx C++ and ucxx Python ------------------------------------------------------------------------

const UCXX_CPP_SOURCE = path.join(ROOT, 'bench', 'ucxx-cpp', 'ucxx_bench.cpp');
const UCXX_SIZES = [8, 4 * KiB, MiB];
/** ucx_perftest's default window, as the bandwidth points of the main table. */
const UCXX_WINDOW = OUTSTANDING;

/**
 * Builds bench/ucxx-cpp/ucxx_bench.cpp against the wheels the way test/helpers/ucxx-wheel.ts builds the
 * C++ test peers (their include paths, an RPATH to the wheel's libucxx and libucx), at -O2: a benchmark.
 */
function buildUcxxCpp(wheel: UcxxWheel): { binary: string } | { error: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ucxx-bench-cpp-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const binary = path.join(dir, 'ucxx_bench');
  try {
    execFileSync('g++', [
      '-std=c++17', '-O2', '-Wall', '-Wextra', '-fdiagnostics-color=never', UCXX_CPP_SOURCE, '-o', binary, ...ucxxLinkArgs(wheel),
    ], { stdio: 'pipe', timeout: 180_000 });
  } catch (err) {
    const e = err as { code?: string; stderr?: Buffer; message?: string };
    return { error: e.code === 'ENOENT' ? 'g++ was not found on PATH' : `g++ could not build ${UCXX_CPP_SOURCE}:\n${e.stderr?.toString() || String(e.message)}` };
  }
  return { binary };
}

/** The ucxx C++ program at one point: its JSON line. */
async function runUcxxCpp(binary: string, test: 'tag_lat' | 'tag_bw' | 'stream_bw', size: number, n: number, w: number, errors: 'peer' | 'none'): Promise<Measurement> {
  const timeoutS = timeoutFor(size, n + w);
  const run = start(binary, [test, String(size), String(n), String(w), String(UCXX_WINDOW), errors], timeoutS);
  const r = await run.done;
  const command = `ucxx_bench ${test} ${size} ${n} ${w} ${UCXX_WINDOW} ${errors}`;
  let found: Record<string, unknown> | null = null;
  for (const line of r.stdout.split('\n')) {
    if (!line.trim().startsWith('{')) continue;
    try {
      const obj: unknown = JSON.parse(line);
      if (isObject(obj) && obj.tool === 'ucxx-cpp' && obj.test === test && obj.size === size) found = obj;
    } catch { /* not JSON */ }
  }
  if (r.code !== 0 || found === null) {
    return { status: 'failed', command, wall_s: round(r.wallS), error: r.code === 0 ? 'exit status 0 but no JSON line' : describeFailure(r, timeoutS) };
  }
  // Written by ucxx_bench.cpp: its fields as it prints them.
  const f = found as { iterations: number; latency_us: LatencyFigures; bandwidth_MBps: number; message_rate: number | null; ucx: string };
  return {
    status: 'ok', command, wall_s: round(r.wallS), iterations: f.iterations, latency_us: f.latency_us,
    bandwidth_MBps: f.bandwidth_MBps, message_rate: f.message_rate, detail: { ucx: f.ucx, errorHandling: errors },
  };
}

/** ucxx Python's send_recv modes: its async API with thread progress (its default) and with polling, and its core API. */
const PY_MODES = {
  'py-thread': { args: [], label: 'ucxx Py async thread', mode: 'python -m ucxx.benchmarks.send_recv (async API, --progress-mode thread: its default)' },
  'py-polling': { args: ['--progress-mode', 'polling'], label: 'ucxx Py async polling', mode: 'python -m ucxx.benchmarks.send_recv --progress-mode polling (async API)' },
  'py-core': { args: ['-l', 'ucxx-core', '--progress-mode', 'polling'], label: 'ucxx Py core polling', mode: 'python -m ucxx.benchmarks.send_recv -l ucxx-core --progress-mode polling' },
} as const;
type PyMode = keyof typeof PY_MODES;

/**
 * ucxx Python's send_recv at one point. Its "Latency" lines are already half its round trip (its
 * source divides each iteration's time by 2), so they are the bench's one-way figure as printed; its
 * bandwidth (binary units) is not used: MB/s is the size over that one-way time. Two retries on a
 * failure (it sometimes resets the connection at 1 MiB with thread progress), none on a timeout.
 */
async function runUcxxPython(python: string, mode: PyMode, size: number, n: number, w: number, am: boolean, short: boolean): Promise<Measurement> {
  const args = ['-m', 'ucxx.benchmarks.send_recv', '-s', '127.0.0.1', '-n', String(size), '--n-iter', String(n),
    '--n-warmup-iter', String(w), '-o', 'numpy', '--reuse-alloc', '--no-detailed-report', '--error-handling',
    ...PY_MODES[mode].args, ...(am ? ['--enable-am'] : [])];
  const timeoutS = short ? 60 : 120;
  const command = `.venv/bin/python ${args.join(' ')}`;
  let tries = 0;
  for (;;) {
    tries++;
    const r = await start(python, args, timeoutS).done;
    const avg = /Latency \(average\)\s*\|\s*(\d+) ns/.exec(r.stdout)?.[1];
    const p50 = /Latency \(median\)\s*\|\s*(\d+) ns/.exec(r.stdout)?.[1];
    if (r.code === 0 && avg !== undefined && p50 !== undefined) {
      const meanUs = Number(avg) / 1000;
      return {
        status: 'ok', command, wall_s: round(r.wallS), iterations: n,
        latency_us: { p50: Number(p50) / 1000, avg: meanUs, p99: null },
        bandwidth_MBps: round(size / meanUs, 3), message_rate: null,
        detail: { tries, oneWay: 'its "Latency" lines, already half the round trip' },
      };
    }
    if (r.timedOut || tries >= 3) {
      const error = r.code === 0 ? `no "Latency" lines; stdout:\n${r.stdout.trim().slice(-600)}` : describeFailure(r, timeoutS);
      return { status: 'failed', command, wall_s: round(r.wallS), error: `${error}${tries > 1 ? ` (try ${tries})` : ''}` };
    }
  }
}

/**
 * Iterations and warm-up of a ucxx row, the same for every column (ucxx Python is slow at them all).
 * Small messages get 10,000 round trips of warm-up: with 1,000, ucxx-ts's 8 B mean over the next 5,000
 * was 12.6-13.4 us against 1.8-2.6 after 10,000 (V8 still compiling: iterationsFor).
 */
function ucxxIterations(test: string, size: number, short: boolean): { iterations: number; warmup: number } {
  if (specOf(test).kind !== 'latency') return iterationsFor(test, size, short);
  if (short) return size >= MiB ? { iterations: 50, warmup: 10 } : { iterations: 500, warmup: 50 };
  return size >= MiB ? { iterations: 500, warmup: 100 } : { iterations: 5000, warmup: 10_000 };
}

/**
 * ucxx-ts beside ucxx C++ and ucxx Python: tag_lat (and am_lat where ucxx Python's send_recv has it)
 * at 8 B, 4 KiB and 1 MiB, and tag_bw at the same sizes, in both error-handling modes where the peer
 * allows it, all polling. ucx_perftest and net over TCP come from the main table's rows where this
 * run has the point. One measurement at a time.
 */
async function runUcxxComparison(options: Options, results: ResultRecord[], ucxxTsUcx: string | null): Promise<UcxxComparison> {
  const wheel = findUcxxWheel();
  const cpp = typeof wheel === 'string' ? { error: wheel } : buildUcxxCpp(wheel);
  let pyUcx: string | null = null;
  let pyError: string | null = null;
  if (typeof wheel === 'string') pyError = wheel;
  else {
    pyUcx = tryRun(wheel.python, ['-c', "import ucxx; print('.'.join(map(str, ucxx.get_ucx_version())))"]);
    if (pyUcx === null) pyError = `${wheel.python} cannot import ucxx`;
  }
  const python = typeof wheel === 'string' ? '' : wheel.python;
  let cppUcx: string | null = null;
  // Its send_recv may not have AM (ucxx 0.52 raises "AM not implemented yet" for --enable-am): ask it once.
  let amMissing: string | null = pyError ?? null;
  if (pyError === null) {
    const probe = await start(python, ['-m', 'ucxx.benchmarks.send_recv', '-s', '127.0.0.1', '-n', '8', '--n-iter', '2', '--n-warmup-iter', '1',
      '-o', 'numpy', '--no-detailed-report', '--progress-mode', 'polling', '--enable-am'], 60).done;
    if (/AM not implemented/.test(probe.stderr + probe.stdout)) amMissing = 'ucxx Python\'s send_recv raises "AM not implemented yet" for --enable-am (ucxx 0.52)';
  }
  const columns: UcxxColumn[] = [
    { key: 'ucxx-ts:spin', label: 'ucxx-ts spin', mode: 'ucxx-perf --local -P spin (the tuned loop: a manual worker busy-polled by progressUntil, as ucxx C++ calls worker->progress() in a loop; awaits nothing); PEER rows add -e', ucx: ucxxTsUcx },
    { key: 'ucxx-ts', label: 'ucxx-ts', mode: 'ucxx-perf --local -P polling (Promises, tuned: awaits only what is pending); PEER rows add -e', ucx: ucxxTsUcx },
    { key: 'ucxx-ts:await', label: 'ucxx-ts await', mode: 'the same with -A (every request awaited, the README\'s idiom); latency rows only', ucx: ucxxTsUcx },
    { key: 'ucxx-cpp', label: 'ucxx C++', mode: `bench/ucxx-cpp/ucxx_bench.cpp on libucxx 0.52 (worker->progress() polling; tag_lat ping-pong, half the round trip; tag_bw and stream_bw a window of ${UCXX_WINDOW} sends); endpointErrorHandling true in PEER rows, false in NONE rows`, ucx: null },
    ...(Object.keys(PY_MODES) as PyMode[]).map((k) => ({
      key: k, label: PY_MODES[k].label, mode: `${PY_MODES[k].mode}, --reuse-alloc, numpy buffers; one-way = its "Latency" (its round trip / 2); ping-pong only, PEER only`, ucx: pyUcx,
    })),
    { key: 'ucx_perftest', label: 'ucx_perftest', mode: 'the main table\'s figure (its mean), where this run has the point; -e in PEER rows', ucx: null },
    { key: 'net-tcp', label: 'net TCP', mode: 'the main table\'s figure (its mean), NONE rows only: net has no error-handling mode', ucx: null },
  ];
  const rows: UcxxRow[] = [];
  const lat: { test: string; errors: 'none' | 'peer' }[] = [
    { test: 'tag_lat', errors: 'none' }, { test: 'tag_lat', errors: 'peer' },
    ...(amMissing === null ? [{ test: 'am_lat', errors: 'none' as const }, { test: 'am_lat', errors: 'peer' as const }] : []),
    { test: 'tag_bw', errors: 'none' }, { test: 'tag_bw', errors: 'peer' },
    { test: 'stream_bw', errors: 'none' }, { test: 'stream_bw', errors: 'peer' },
  ];
  for (const { test, errors } of lat) {
    const kind = specOf(test).kind === 'latency' ? 'latency' as const : 'bandwidth' as const;
    for (const size of UCXX_SIZES) {
      const { iterations, warmup } = ucxxIterations(test, size, options.short);
      const point: Point = { test, size, iterations, warmup, outstanding: UCXX_WINDOW };
      const raw: Record<string, Measurement> = {};
      const ts = (awaited: boolean, progress = 'polling'): TestSpec => ({
        kind, c: null, net: null, base: test, progress,
        ucxxExtra: [...(errors === 'peer' ? ['-e'] : []), ...(awaited ? ['-A'] : [])],
      });
      raw['ucxx-ts:spin'] = await runUcxx(point, { progress: 'spin', memory: options.memory }, ts(false, 'spin'));
      raw['ucxx-ts'] = await runUcxx(point, { progress: 'polling', memory: options.memory }, ts(false));
      raw['ucxx-ts:await'] = kind === 'latency' ? await runUcxx(point, { progress: 'polling', memory: options.memory }, ts(true))
        : { status: 'n/a', error: 'the awaited style is measured for latency only' };
      if (test === 'am_lat') raw['ucxx-cpp'] = { status: 'n/a', error: 'bench/ucxx-cpp/ucxx_bench.cpp has tag and stream tests only (ucxx\'s perftest: tag only)' };
      else if ('error' in cpp) raw['ucxx-cpp'] = { status: 'failed', error: cpp.error };
      else {
        raw['ucxx-cpp'] = await runUcxxCpp(cpp.binary, test as 'tag_lat' | 'tag_bw' | 'stream_bw', size, iterations, warmup, errors);
        cppUcx ??= (raw['ucxx-cpp'].detail?.['ucx'] as string | undefined) ?? null;
      }
      for (const k of Object.keys(PY_MODES) as PyMode[]) {
        raw[k] = kind === 'bandwidth' ? { status: 'n/a', error: 'send_recv is a ping-pong: no windowed stream' }
          : errors === 'none' ? { status: 'n/a', error: 'send_recv runs PEER only: its server accepts PEER endpoints, and a --no-error-handling client hangs' }
          : pyError !== null ? { status: 'failed', error: pyError }
          : await runUcxxPython(python, k, size, iterations, warmup, test === 'am_lat', options.short);
      }
      // The main table's rows: tag_lat / tag_bw / stream_bw are NONE, their :peer rows PEER.
      const main = results.find((r) => r.test === (errors === 'peer' ? `${test}:peer` : test) && r.size === size);
      for (const impl of ['ucx_perftest', 'net-tcp']) {
        const m = main?.raw[impl];
        raw[impl] = impl === 'net-tcp' && errors === 'peer' ? { status: 'n/a', error: 'net has no error-handling mode' }
          : m === undefined ? { status: 'n/a', error: 'the main table has no such point in this run' } : m;
      }
      const figures: Record<string, number | null> = {};
      for (const c of columns) {
        const m = raw[c.key];
        const v = m?.status !== 'ok' ? null : kind === 'latency' ? m.latency_us?.avg : m.bandwidth_MBps;
        figures[c.key] = typeof v === 'number' && Number.isFinite(v) ? v : null;
      }
      const ratios: Record<string, number | null> = {};
      for (const [ours, other] of [['ucxx-ts:spin', 'ucxx-cpp'], ['ucxx-ts', 'ucxx-cpp'], ['ucxx-ts:await', 'ucxx-cpp'], ['ucxx-ts', 'py-polling'], ['ucxx-ts', 'py-thread'], ['ucxx-ts', 'py-core']] as const) {
        const a = figures[ours];
        const b = figures[other];
        ratios[`${ours}/${other}`] = a == null || b == null || b === 0 ? null : round(a / b, 4);
      }
      // The tails: ucxx-ts's p99 (spin, polling, awaited) over ucxx C++'s, latency rows only.
      for (const ours of ['ucxx-ts:spin', 'ucxx-ts', 'ucxx-ts:await'] as const) {
        const a = kind === 'latency' && raw[ours]?.status === 'ok' ? raw[ours].latency_us?.p99 : null;
        const b = kind === 'latency' && raw['ucxx-cpp']?.status === 'ok' ? raw['ucxx-cpp'].latency_us?.p99 : null;
        ratios[`${ours}/ucxx-cpp:p99`] = typeof a === 'number' && typeof b === 'number' && b > 0 ? round(a / b, 4) : null;
      }
      rows.push({ test, size, kind, unit: kind === 'latency' ? 'us' : 'MB/s', errorHandling: errors, iterations, warmup, figures, raw, ratios });
      const show = columns.map((c) => `${c.label} ${figures[c.key] != null ? formatFigure(figures[c.key]) : raw[c.key]?.status === 'n/a' ? '-' : String(raw[c.key]?.status).toUpperCase()}`).join(' | ');
      console.error(`[ucxx] ${test} ${formatSize(size)} ${errors.toUpperCase()} (${kind === 'latency' ? 'mean us' : 'MB/s'}): ${show}`);
    }
  }
  const cppColumn = columns.find((c) => c.key === 'ucxx-cpp');
  if (cppColumn !== undefined) cppColumn.ucx = cppUcx;
  // ucx_info -v: "# Library version: 1.20.1" (1.20) or "# UCT version=1.13.1 ... Version 1.13.1" (1.13).
  const perftestUcx = /(?:Library version:|Version)\s+(\d[\d.]*)/.exec(tryRun('ucx_info', ['-v']) ?? '')?.[1] ?? null;
  for (const c of columns) if (c.key === 'ucx_perftest' || c.key === 'net-tcp') c.ucx = c.key === 'net-tcp' ? 'none' : perftestUcx;
  const find = (test: string, size: number, errors: string) => rows.find((r) => r.test === test && r.size === size && r.errorHandling === errors);
  const targets: UcxxTarget[] = [];
  const target = (test: string, size: number, errors: 'peer' | 'none', ratio: string, bound: number, side: 'max' | 'min', what: string) => {
    const r = find(test, size, errors);
    if (r !== undefined) targets.push({ what: `${test} ${formatSize(size)} ${errors.toUpperCase()}: ${what}`, ratio, value: r.ratios[ratio] ?? null, bound, side });
  };
  target('tag_lat', 8, 'peer', 'ucxx-ts/py-polling', 1 / 3, 'max', 'ucxx-ts at least 3x faster than ucxx Python\'s async API, both polling');
  target('tag_lat', MiB, 'peer', 'ucxx-ts/py-polling', 1, 'max', 'ucxx-ts not slower than ucxx Python\'s async API, both polling');
  for (const errors of ['none', 'peer'] as const) {
    target('tag_lat', 8, errors, 'ucxx-ts:spin/ucxx-cpp', 1, 'max', 'ucxx-ts tuned (spin) mean at or below ucxx C++\'s');
    target('tag_lat', 8, errors, 'ucxx-ts:await/ucxx-cpp', 1.5, 'max', 'ucxx-ts awaited mean within 1.5x of ucxx C++\'s');
    target('tag_lat', 8, errors, 'ucxx-ts:spin/ucxx-cpp:p99', 2, 'max', 'ucxx-ts tuned (spin) p99 within 2x of ucxx C++\'s');
    target('tag_lat', 8, errors, 'ucxx-ts:await/ucxx-cpp:p99', 2, 'max', 'ucxx-ts awaited p99 within 2x of ucxx C++\'s');
    target('tag_bw', MiB, errors, 'ucxx-ts:spin/ucxx-cpp', 0.95, 'min', 'ucxx-ts tuned (spin) bandwidth at least 0.95x ucxx C++\'s');
    target('tag_bw', MiB, errors, 'ucxx-ts/ucxx-cpp', 0.95, 'min', 'ucxx-ts polling bandwidth at least 0.95x ucxx C++\'s');
    target('stream_bw', MiB, errors, 'ucxx-ts:spin/ucxx-cpp', 0.95, 'min', 'ucxx-ts tuned (spin) bandwidth at least 0.95x ucxx C++\'s');
  }
  const notes = [
    'Every figure is a mean: latency is the one-way time (half the round trip of a ping-pong), bandwidth the message size over that time for the ping-pong columns, over the stream for tag_bw and stream_bw. Each point runs once. The p99 columns compare 99th percentiles of the same runs (ucxx-perf\'s and bench/ucxx-cpp\'s, both over every iteration), latency rows only.',
    `ucxx C++ and ucxx Python run on the libucx wheel's UCX (${pyUcx ?? cppUcx ?? '?'}) whatever UCX ucxx-ts runs on (here ${ucxxTsUcx ?? '?'}): ucxx 0.52 needs UCX 1.18 or later.`,
    ...(amMissing !== null ? [`No am_lat rows: ${amMissing}.`] : []),
  ];
  return { columns, rows, targets, notes };
}

// ---- machine ----------------------------------------------------------------------------------------

function tryRun(file: string, args: string[]): string | null {
  try {
    return execFileSync(file, args, { cwd: ROOT, encoding: 'utf8', timeout: 20_000, stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  let distro: string | null = null;
  try {
    distro = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] ?? null;
  } catch { /* not Linux */ }
  const ucxInfo = tryRun('ucx_info', ['-v']);
  const ucxLoaded = tryRun(process.execPath, ['--input-type=module', '-e',
    `import(${JSON.stringify(path.join(ROOT, 'dist', 'index.js'))}).then((m) => console.log(m.getUcxVersion().join('.')))`]);
  // Our own package.json: it has a version.
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
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
      // UCX 1.13's ucx_info -v prints 'Version 1.13.1', 1.20's '# Library version: 1.20.1'.
      ucxPerftest: ucxInfo === null ? null : (/(?:Library version:|Version)\s+(\d[\d.]*)/.exec(ucxInfo)?.[1] ?? null),
      package: process.env['UCXX_TS_UCX_LIBDIR'] ? null : tryRun('dpkg-query', ['-W', '-f', '${Version}', 'ucx-utils']),
    },
    ucxxTsVersion: pkg.version,
    git: { commit: tryRun('git', ['rev-parse', 'HEAD']), dirty: status === null ? null : status.length > 0 },
  };
}

// ---- main -------------------------------------------------------------------------------------------

interface Options {
  short: boolean;
  tests: string[];
  sizes: number[] | null;
  progress: string;
  memory: string;
  out: string | null;
  net: boolean;
  c: boolean;
  from: string | null;
  twoHosts: boolean;
  ucxx: boolean;
}

const SIZE_UNITS: Record<string, number> = { '': 1, k: KiB, m: MiB };

function parseCommandLine(): Options {
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
      'two-hosts': { type: 'boolean' },
      'no-ucxx': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    console.log(readFileSync(SOURCE, 'utf8').split('*/')[0]?.replace(/^[\s\S]*?\/\*\*/, '').replace(/^ \* ?/gm, ''));
    process.exit(0);
  }
  const twoHosts = values['two-hosts'] === true;
  const tests = values.tests !== undefined ? values.tests.split(',') : twoHosts ? TWO_HOST_TESTS : Object.keys(TESTS);
  for (const t of tests) if (!(t in TESTS)) throw new Error(`unknown test ${t}; one of ${Object.keys(TESTS).join(' ')}`);
  const progress = values.progress ?? 'spin';
  if (!['polling', 'event', 'spin'].includes(progress)) throw new Error('--progress: polling, event or spin');
  const memory = values.memory ?? 'allocated';
  if (!['allocated', 'registered'].includes(memory)) throw new Error('--memory: allocated or registered');
  let sizes: number[] | null = null;
  if (values.sizes !== undefined) {
    sizes = values.sizes.split(',').map((s) => {
      const m = /^(\d+)([kKmM]?)$/.exec(s.trim());
      if (m === null) throw new Error(`bad size ${s}`);
      return Number(m[1]) * (SIZE_UNITS[(m[2] ?? '').toLowerCase()] ?? 1);
    });
  }
  return {
    short: values.short === true, tests, sizes, progress, memory, out: values.out ?? null,
    net: values['no-net'] !== true && !twoHosts, c: values['no-c'] !== true, from: values.from ?? null, twoHosts,
    ucxx: values['no-ucxx'] !== true && !twoHosts,
  };
}

async function main(): Promise<void> {
  let options: Options;
  try {
    options = parseCommandLine();
  } catch (err) {
    console.error(`bench: ${(err as Error).message}`);
    process.exit(2);
  }
  if (options.from !== null) {
    const parsed: unknown = JSON.parse(readFileSync(options.from, 'utf8'));
    const schema = isObject(parsed) ? parsed.schema : undefined;
    if (schema !== SCHEMA) throw new Error(`${options.from}: schema ${String(schema)}, expected ${SCHEMA}`);
    // A report this script wrote (its schema says so): read as one, not checked field by field.
    const stored = parsed as BenchReport;
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
  const ucxBin = useUcxLibDir();
  if (ucxBin !== null) console.error(`bench: UCX from UCXX_TS_UCX_LIBDIR, C baseline from ${ucxBin}`);
  const machine = machineInfo();
  const problems: string[] = [];
  if (!existsSync(CLI)) problems.push(`${path.relative(ROOT, CLI)} is missing: build it with npm run build`);
  if (options.c && tryRun('sh', ['-c', 'command -v ucx_perftest']) === null) problems.push('ucx_perftest is not on PATH (apt-get install ucx-utils)');
  console.error(`bench (${mode}): ${machine.cpuModel} x${machine.cpuCount}, ${(machine.totalMemoryBytes / 2 ** 30).toFixed(1)} GiB, ` +
    `node ${machine.node}, UCX ${machine.ucx.ucxxTs ?? machine.ucx.ucxPerftest ?? '?'}, load ${loadStart.map((x) => x.toFixed(2)).join(' ')}`);
  if (loadStart[0] !== undefined && loadStart[0] > 1.5 * machine.cpuCount / 2) {
    console.error(`bench: warning: the load average is ${loadStart[0].toFixed(2)} on ${machine.cpuCount} CPUs: figures will be noisy`);
  }
  for (const p of problems) console.error(`bench: ${p}`);
  if (options.twoHosts) {
    const why = twoHostsUnavailable();
    if (why !== null) {
      console.error(`bench: --two-hosts: ${why}`);
      process.exit(2);
    }
    hosts = await TwoHosts.create();
    console.error(`bench: two hosts: ${hosts.a.hostname} (${hosts.a.address}, clients) and ${hosts.b.hostname} (${hosts.b.address}, servers), TCP over a veth pair`);
  }

  const results: ResultRecord[] = [];
  const points: Point[] = [];
  for (const test of options.tests) {
    const spec = specOf(test);
    const sizes = spec.sizes ?? options.sizes
      ?? (options.twoHosts ? TWO_HOST_SIZES[spec.kind === 'latency' ? 'latency' : 'bandwidth'] : options.short ? SHORT_SIZES : FULL_SIZES);
    for (const size of sizes) points.push({ test, size, ...iterationsFor(test, size, options.short), outstanding: OUTSTANDING });
  }
  /** Per implementation and test: the size at which it timed out (larger sizes are then skipped). */
  const timedOutAt = new Map<string, number>();
  const benchStart = Date.now();
  for (const [index, point] of points.entries()) {
    const spec = specOf(point.test);
    const skip = (impl: string): Measurement | null => {
      const at = timedOutAt.get(`${impl}/${point.test}`);
      return at === undefined ? null : { status: 'skipped', error: `skipped: it timed out at ${formatSize(at)}` };
    };
    const noteTimeout = (impl: string, m: Measurement): Measurement => {
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
    const measureOnce = async (roundIndex: number, withNet: boolean): Promise<Record<string, Measurement>> => {
      const got: Record<string, Measurement> = {};
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
          const why = options.twoHosts ? 'not run between hosts' : !options.net ? 'disabled (--no-net)' : spec.noNet ?? 'no net equivalent';
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
        const unix = both['net-unix'];
        got['net-unix'] = unix;
        delete unix.timedOut;
      };
      const order = withNet ? [runUcxxTs, runC, runNetBoth] : [runUcxxTs, runC];
      // The index is in range: modulo the length.
      for (let i = 0; i < order.length; i++) await (order[(i + roundIndex) % order.length] as () => Promise<void>)();
      return got;
    };
    // The points the issue's targets are read from run REPEATS rounds; the 1 MiB bandwidth targets also
    // get EXTRA_PAIRS rounds of ucxx-ts and ucx_perftest alone. Each implementation's figure is its
    // median round; the other points run once.
    const target = isTargetPoint(point) && !options.short;
    const rounds: Record<string, Measurement>[] = [];
    for (let r = 0; r < (target ? REPEATS : 1); r++) rounds.push(await measureOnce(r, true));
    if (target && spec.kind === 'bandwidth') for (let r = 0; r < EXTRA_PAIRS; r++) rounds.push(await measureOnce(r, false));
    const raw: Record<string, Measurement> = {};
    for (const impl of IMPLEMENTATIONS) {
      raw[impl] = medianRound(rounds.flatMap((r) => { const m = r[impl]; return m === undefined ? [] : [m]; }), spec.kind);
    }
    // raw has every implementation (just above): here and below, raw[impl] is set.
    const figures: Record<string, number | null> = {};
    for (const impl of IMPLEMENTATIONS) figures[impl] = figure(raw[impl] as Measurement, spec.kind);
    const ratios: Record<string, number | null> = {};
    const ratioRounds: Record<string, number[]> = {};
    for (const other of IMPLEMENTATIONS.slice(1)) {
      const paired = pairedRatios(rounds, other, spec.kind);
      ratioRounds[`ucxx-ts/${other}`] = paired.map((x) => round(x, 4));
      ratios[`ucxx-ts/${other}`] = paired.length === 0 ? null : round(paired[Math.floor((paired.length - 1) / 2)] as number, 4);
    }
    const record: ResultRecord = {
      test: point.test, size: point.size, kind: spec.kind, ...METRIC[spec.kind],
      iterations: point.iterations, warmup: point.warmup, outstanding: spec.kind === 'latency' ? 1 : point.outstanding,
      equivalents: { ucx_perftest: spec.c?.test ?? null, net: spec.net === null ? null : `${spec.net} (tcp, unix)` },
      note: spec.note ?? null,
      figures, ratios, ratioRounds, raw,
    };
    if (spec.kind === 'latency' && point.size === 8) {
      record.tails = {};
      for (const impl of IMPLEMENTATIONS) {
        record.tails[impl] = medianTails(rounds.flatMap((r) => { const m = r[impl]; return m === undefined ? [] : [m]; }));
      }
    }
    results.push(record);
    const show = IMPLEMENTATIONS.map((impl) => {
      const m = raw[impl] as Measurement;
      const f = figures[impl] as number | null;
      return `${impl} ${f !== null ? `${formatFigure(f)}` : m.status === 'n/a' ? '-' : m.status.toUpperCase()}`;
    }).join(' | ');
    const elapsed = Math.round((Date.now() - benchStart) / 1000);
    console.error(`[${index + 1}/${points.length} ${elapsed}s] ${point.test} ${formatSize(point.size)} (${METRIC[spec.kind].unit}): ${show}`);
  }

  // ucxx C++ and ucxx Python beside ucxx-ts (one host only).
  const ucxx = options.ucxx ? await runUcxxComparison(options, results, machine.ucx.ucxxTs) : undefined;

  // The FFI floor, in a process of its own (one host: the crossings do not depend on the peer).
  let ffiFloor: BenchReport['ffiFloor'];
  let floorError: string | null = null;
  {
    const run = start(process.execPath, [FLOOR, '--json'], 120);
    const r = await run.done;
    for (const line of r.stdout.split('\n')) {
      try {
        const obj: unknown = JSON.parse(line);
        // Written by bench/ffi-floor.ts: its figures as they are.
        if (isObject(obj) && obj.tool === 'ffi-floor') ffiFloor = obj.figures as BenchReport['ffiFloor'];
      } catch { /* not JSON */ }
    }
    if (ffiFloor === undefined) floorError = describeFailure(r, 120);
  }

  const failures: Failure[] = [];
  for (const r of results) {
    for (const impl of IMPLEMENTATIONS) {
      const m = r.raw[impl] as Measurement;
      if (m.status === 'failed' || m.status === 'skipped') failures.push({ test: r.test, size: r.size, implementation: impl, status: m.status, command: m.command ?? null, error: m.error ?? null });
    }
  }
  for (const r of ucxx?.rows ?? []) {
    for (const c of ucxx?.columns ?? []) {
      // ucx_perftest and net are the main table's figures: their failures are listed there.
      const m = r.raw[c.key];
      if (c.key === 'ucx_perftest' || c.key === 'net-tcp' || m === undefined) continue;
      if (m.status === 'failed' || m.status === 'skipped') {
        failures.push({ test: `${r.test} ${r.errorHandling.toUpperCase()}`, size: r.size, implementation: c.label, status: m.status, command: m.command ?? null, error: m.error ?? null });
      }
    }
  }
  if (floorError !== null) {
    failures.push({ test: 'ffi-floor', size: 0, implementation: 'ucxx-ts', status: 'failed', command: 'node build/bench/ffi-floor.js --json', error: floorError });
  }

  const report: BenchReport = {
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
      ucxPerftest: hosts === null ? 'server and client on 127.0.0.1, default transports, UCX-allocated buffers (its only host mode)'
        : `server in host B, client in host A (${hosts.b.address}), default transports (TCP between the hosts), UCX-allocated buffers`,
      net: 'bench/net-baseline.ts: TCP 127.0.0.1 (TCP_NODELAY) and a Unix socket, server in a child process',
      latencyMetric: 'latency_us.p50 (per-operation median; half a round trip for ping-pong tests)',
      ratio: 'ucxx-ts figure / other figure, the median over the rounds where both ran (ratioRounds): latency < 1 = ucxx-ts faster; bandwidth and rate > 1 = ucxx-ts faster',
      ...(hosts === null ? {} : {
        hosts: `Two hosts on this machine: network namespaces ${hosts.a.netns} (${hosts.a.address}, the clients) and ${hosts.b.netns} (${hosts.b.address}, the servers) joined by a veth pair, each in its own UTS and IPC namespace, so UCX sees two machines and uses TCP only; ucxx-perf and ucx_perftest each run a server in B and a client in A, with UCX's defaults`,
      }),
    },
    implementations: IMPLEMENTATIONS,
    results,
    failures,
    ...(ffiFloor === undefined ? {} : { ffiFloor }),
    ...(ucxx === undefined ? {} : { ucxx }),
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
  const written: string[] = [];
  // Two hosts: files of their own (two sizes, no plot), beside the one-host ones.
  const prefix = options.twoHosts ? 'two-hosts-' : '';
  for (const file of [path.join(resultsDir, `${prefix}${stamp}.json`), path.join(resultsDir, `${prefix}latest.json`)]) {
    writeFileSync(file, json);
    written.push(file);
  }
  const markdown = path.join(docsDir, options.twoHosts ? 'benchmarks-two-hosts.md' : 'benchmarks.md');
  writeFileSync(markdown, markdownReport(report));
  written.push(markdown);
  if (!options.twoHosts) {
    writeFileSync(path.join(docsDir, 'benchmarks.svg'), svgPlot(report));
    written.push(path.join(docsDir, 'benchmarks.svg'));
  }
  hosts?.close();

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
