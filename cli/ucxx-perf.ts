#!/usr/bin/env node
/**
 * ucxx-perf: ucx_perftest for ucxx-ts.
 *
 *   ucxx-perf [options]              server: waits for one client at a time
 *   ucxx-perf HOST [options]         client: runs the test against HOST's server
 *   ucxx-perf --local [options]      starts a server process and runs the client against it
 *
 * Every byte goes through ucxx-ts (and so libucp); the server and the client agree on the test with a
 * tag message. The tests are defined in perf/tests.ts; docs/performance.md says what each measures.
 */
import { fork } from 'node:child_process';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import type { Mode, Plan } from './perf/plan.js';
import { runClient, serve } from './perf/session.js';
import { PERF_TESTS } from './perf/tests.js';

const TEST_NAMES = [...PERF_TESTS.keys()];
const TEST_LIST = [...PERF_TESTS.values()].map((t) => `                            ${t.name.padEnd(12)} ${t.summary}`).join('\n');

const USAGE = `usage: ucxx-perf [HOST] [options]   (no HOST: server; --local: both)
  -t, --test NAME         the test (default put_lat), one of:
${TEST_LIST}
  -s, --size SIZES        a list (8,4K,1M) or a range of powers of two (8:64M); default 8
  -n, --iterations N      measured iterations per size (default: by test and size)
  -w, --warmup N          warm-up iterations (default: n/10, at least 10)
  -m, --memory KIND       allocated (UCX allocates the target region) | registered (default allocated)
  -P, --progress MODE     spin (synchronous busy-poll) | polling | event (default spin); the client's
                          choice applies to both sides: the server runs each test in its client's mode
  -O, --outstanding N     operations in flight before waiting (bandwidth tests, default 16)
  -F, --flush-every N     put_bw, atomic_rate: flush after every N operations (default 0: once, at the end)
  -B, --busy-poll US      'event'/'polling': microseconds of polling after the last activity before
                          the worker sleeps (default 50 for event, 1000 for polling; 0: sleep at once)
  -A, --await             every request awaited as the README writes it (\`await request\`), instead of
                          waiting only for what is pending; with --progress polling or event
  -e, --error-handling    measured endpoints use peer error handling ('peer', ucxx-ts's 'auto' choice
                          between hosts); off here ('none'), as in ucx_perftest, whose -e it mirrors
  -L, --fast-lane         the measured endpoint is a PEER-mode connect() to a listener of the server,
                          with the fast lane: what two ucxx-ts processes on one host get by default
                          on UCX 1.19+ (shared memory; PEER over TCP with -e instead)
  -p, --port N            server port (default 13337; 0 with --local picks one)
      --local             run a server in a child process and the client here
      --json              one JSON object per size instead of the table
  -h, --help              this text`;

class UsageError extends Error {}

function parseSize(text: string): number {
  const match = /^(\d+)([kKmMgG]?)[bB]?$/.exec(text.trim());
  if (match === null) throw new UsageError(`bad size: ${JSON.stringify(text)}`);
  const unit = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[(match[2] ?? '').toLowerCase()] ?? 1;
  const size = Number(match[1]) * unit;
  if (!Number.isSafeInteger(size) || size > 1024 ** 3) throw new UsageError(`size out of range: ${text}`);
  if (size < 1) throw new UsageError(`size must be at least 1 byte, got ${text}`);
  return size;
}

function parseSizes(text: string): number[] {
  if (text.includes(':')) {
    const [lo, hi] = text.split(':').map(parseSize) as [number, number];
    if (lo < 1 || hi < lo) throw new UsageError(`bad size range: ${text}`);
    const sizes: number[] = [];
    for (let s = lo; s <= hi; s *= 2) sizes.push(s);
    return sizes;
  }
  return text.split(',').map(parseSize);
}

function positive(text: string | undefined, what: string, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (text.trim() === '' || !Number.isSafeInteger(n) || n < 0) throw new UsageError(`${what} must be a non-negative integer, got ${text}`);
  return n;
}

/** A count that must be at least 1 when given (0 would measure nothing, or divide by zero). */
function atLeastOne(text: string | undefined, what: string, fallback: number): number {
  const n = positive(text, what, fallback);
  if (text !== undefined && n < 1) throw new UsageError(`${what} must be at least 1, got ${text}`);
  return n;
}

function parseCommandLine(argv: string[]): {
  host?: string; local: boolean; json: boolean; port: number; plan: Plan; iterationsGiven: boolean; progressGiven: boolean;
} {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      test: { type: 'string', short: 't' },
      size: { type: 'string', short: 's' },
      iterations: { type: 'string', short: 'n' },
      warmup: { type: 'string', short: 'w' },
      memory: { type: 'string', short: 'm' },
      progress: { type: 'string', short: 'P' },
      outstanding: { type: 'string', short: 'O' },
      'flush-every': { type: 'string', short: 'F' },
      'error-handling': { type: 'boolean', short: 'e' },
      'fast-lane': { type: 'boolean', short: 'L' },
      await: { type: 'boolean', short: 'A' },
      'busy-poll': { type: 'string', short: 'B' },
      port: { type: 'string', short: 'p' },
      local: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    console.log(USAGE);
    process.exit(0);
  }
  if (positionals.length > 1) throw new UsageError(`one HOST at most, got ${positionals.join(' ')}`);
  const test = values.test ?? 'put_lat';
  if (!PERF_TESTS.has(test)) throw new UsageError(`unknown test ${test}; one of ${TEST_NAMES.join(' ')}`);
  const memory = values.memory ?? 'allocated';
  if (memory !== 'allocated' && memory !== 'registered') throw new UsageError(`memory must be allocated or registered`);
  const progress = (values.progress ?? 'spin') as Mode;
  if (!['spin', 'polling', 'event'].includes(progress)) throw new UsageError('progress must be spin, polling or event');
  const sizes = parseSizes(values.size ?? '8');
  const iterations = atLeastOne(values.iterations, 'iterations', 0);
  const outstanding = atLeastOne(values.outstanding, 'outstanding', 16);
  const port = positive(values.port, 'port', values.local === true ? 0 : 13337);
  if (port > 65535) throw new UsageError('port must be <= 65535');
  const warmup = positive(values.warmup, 'warmup', -1);
  const busyPoll = values['busy-poll'] === undefined ? undefined : positive(values['busy-poll'], 'busy-poll', 0);
  if (busyPoll !== undefined && progress === 'spin') throw new UsageError('--busy-poll applies to --progress event or polling');
  if (values.await === true && progress === 'spin') throw new UsageError('--await applies to --progress event or polling');
  const host = positionals[0];
  if (host !== undefined && values.local === true) throw new UsageError('--local runs its own server: no HOST');
  return {
    ...(host === undefined ? {} : { host }),
    local: values.local === true,
    json: values.json === true,
    port,
    iterationsGiven: iterations > 0,
    progressGiven: values.progress !== undefined || values['busy-poll'] !== undefined,
    plan: {
      test, sizes, iterations, warmup, outstanding, memory, progress,
      errorHandling: values['error-handling'] === true || values['fast-lane'] === true, fastLane: values['fast-lane'] === true,
      flushEvery: positive(values['flush-every'], 'flush-every', 0),
      style: values.await === true ? 'await' : 'tuned',
      ...(busyPoll === undefined ? {} : { busyPollUs: busyPoll }),
    },
  };
}

// ---- main -------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  if (process.argv[2] === '--serve-child') {
    await serve(Number(process.argv[3]), (bound) => process.send?.({ port: bound }));
    process.exit(process.exitCode ?? 0);
  }
  let options;
  try {
    options = parseCommandLine(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true) {
      console.error(`ucxx-perf: ${(err as Error).message}\n${USAGE}`);
      process.exit(2);
    }
    throw err;
  }
  if (options.local) {
    const child = fork(fileURLToPath(import.meta.url), ['--serve-child', String(options.port)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const killer = setTimeout(() => child.kill('SIGKILL'), 10 * 60 * 1000);
    killer.unref();
    try {
      const port = await new Promise<number>((resolve, reject) => {
        child.once('message', (m: { port: number }) => resolve(m.port));
        child.once('exit', (code) => reject(new Error(`the server exited early (status ${code})`)));
      });
      await runClient('127.0.0.1', port, options.plan, options.json);
      await new Promise<void>((resolve) => {
        if (child.exitCode !== null) resolve();
        else child.once('exit', () => resolve());
        setTimeout(() => {
          child.kill('SIGKILL');
          resolve();
        }, 10_000).unref();
      });
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    return;
  }
  if (options.host === undefined) {
    if (options.progressGiven) {
      console.error('ucxx-perf: note: the server runs each test in the progress mode the client asks for (-P, -B)');
    }
    await serve(options.port);
    return;
  }
  await runClient(options.host, options.port, options.plan, options.json);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`ucxx-perf: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    process.exit(1);
  },
);
