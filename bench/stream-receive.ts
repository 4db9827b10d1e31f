#!/usr/bin/env node
/**
 * stream-receive: where 1 MiB stream_bw stands against C, with the receive posted the way ucxx-ts
 * posts it. Four programs, one-way 1 MiB streams with 32 sends in flight between two processes of this
 * host, in alternating rounds:
 * - ucx_perftest `-t stream_bw -O 32`: its server receives each message with receives without
 *   UCP_STREAM_RECV_FLAG_WAITALL, for what is still missing, until it is whole;
 * - C, partial: bench/c/stream_receive.c receiving the same way (a check that the program is
 *   ucx_perftest's equal);
 * - C, WAITALL: the same program with one WAITALL receive per message, what ucxx's and ucxx-ts's
 *   `streamRecv(buffer, { waitAll: true })` post;
 * - mixed pairs, sender > receiver: bench/stream-receive-peer.ts, the C program's WAITALL server and its
 *   client written with ucxx-ts (a manual worker, progressUntil), against the C program and itself, to
 *   tell what each ucxx-ts side costs;
 * - ucxx-ts: `ucxx-perf -t stream_bw -P spin` (streamRecv with waitAll, progressUntil).
 * Each round's ratios are taken within the round (the VM's slow and fast phases last seconds to
 * minutes); the medians of those are printed. Every program is timed on its client, from the first
 * measured send until everything arrived.
 *
 *   node build/bench/stream-receive.js [--rounds N] [--iterations N] [--warmup N] [--size BYTES] [--short] [--json]
 *
 * With UCXX_TS_UCX_LIBDIR (the wheel's lib/), the C program is built against that UCX (headers from
 * the include/ beside lib/) and ucx_perftest is the one in the bin/ beside it (bench/ucx-perftest.ts).
 * A failed run makes the exit status 1.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort, useUcxLibDir } from './ucx-perftest.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SOURCE = path.join(ROOT, 'bench', 'c', 'stream_receive.c');
const CLI = path.join(ROOT, 'dist', 'cli', 'ucxx-perf.js');
const PEER = path.join(ROOT, 'build', 'bench', 'stream-receive-peer.js');
const WINDOW = 32;
const TIMEOUT_MS = 180_000;

const { values } = parseArgs({
  options: {
    rounds: { type: 'string' },
    iterations: { type: 'string' },
    warmup: { type: 'string' },
    size: { type: 'string' },
    short: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
});

function count(text: string | undefined, fallback: number, name: string, min: number): number {
  const n = text === undefined ? fallback : Number(text);
  if (!Number.isSafeInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, not ${text}`);
  return n;
}
const rounds = count(values.rounds, values.short ? 1 : 6, 'rounds', 1);
const iterations = count(values.iterations, values.short ? 500 : 20_000, 'iterations', 1);
const warmup = count(values.warmup, values.short ? 100 : 4_096, 'warmup', 0);
const size = count(values.size, 1 << 20, 'size', 1);

const libDir = process.env['UCXX_TS_UCX_LIBDIR'] || null;

/** Builds bench/c/stream_receive.c against the UCX ucxx-ts loads (the system's or UCXX_TS_UCX_LIBDIR's). */
function build(dir: string): string {
  const binary = path.join(dir, 'stream_receive');
  const ucx = libDir === null ? [] : [`-I${path.join(path.dirname(libDir), 'include')}`, `-L${libDir}`, `-Wl,-rpath,${libDir}`];
  execFileSync('gcc', ['-O2', '-Wall', '-Wextra', '-fdiagnostics-color=never', SOURCE, '-o', binary, ...ucx, '-lucp', '-lucs'],
    { stdio: 'pipe', timeout: 120_000 });
  return binary;
}

interface Run { code: number | null; stdout: string; stderr: string }

function run(command: string, args: string[]): { done: Promise<Run>; kill: () => void } {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => { stdout += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS);
  const done = new Promise<Run>((resolve) => {
    child.on('error', (err) => { stderr += String(err); });
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
  return { done, kill: () => child.kill('SIGKILL') };
}

function fail(what: string, r: Run): never {
  throw new Error(`${what} failed (exit ${r.code}): ${(r.stderr || r.stdout).trim().slice(-600)}`);
}

async function runPerftest(): Promise<number> {
  const p = String(await freePort());
  const server = run('ucx_perftest', ['-p', p]);
  await new Promise((r) => setTimeout(r, 500));
  const client = await run('ucx_perftest', ['127.0.0.1', '-p', p, '-t', 'stream_bw', '-s', String(size), '-n', String(iterations),
    '-w', String(warmup), '-O', String(WINDOW)]).done;
  const timer = setTimeout(server.kill, 5_000);
  await server.done;
  clearTimeout(timer);
  const final = /^Final:\s+(.*)$/m.exec(client.stdout);
  const cols = final?.[1]?.trim().split(/\s+/).map(Number) ?? [];
  const overallMiBps = cols[5];
  if (client.code !== 0 || overallMiBps === undefined || !Number.isFinite(overallMiBps)) fail('ucx_perftest', client);
  return overallMiBps * 1.048576; // its "MB/s" are MiB/s
}

/** The client's bandwidth and the server's counts (progress calls and receives per message). */
async function runC(binary: string, mode: 'waitall' | 'partial', sides: { client: Side; server: Side } = { client: 'C', server: 'C' },
): Promise<{ MBps: number; detail: Record<string, number> }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'stream-receive-'));
  const command = (side: Side): [string, string[]] => side === 'C' ? [binary, []] : [process.execPath, [PEER]];
  try {
    const shape = [String(iterations), String(warmup), String(size)];
    const [serverCommand, serverArgs] = command(sides.server);
    const [clientCommand, clientArgs] = command(sides.client);
    const server = run(serverCommand, [...serverArgs, 'server', dir, ...shape, mode]);
    const client = await run(clientCommand, [...clientArgs, 'client', dir, ...shape]).done;
    if (client.code !== 0) server.kill();
    const s = await server.done;
    if (client.code !== 0) fail(`${sides.client} ${mode} client`, client);
    if (s.code !== 0) fail(`${sides.server} ${mode} server`, s);
    const MBps = (JSON.parse(client.stdout) as { bandwidth_MBps: number }).bandwidth_MBps;
    return { MBps, detail: JSON.parse(s.stdout) as Record<string, number> };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function runUcxxTs(): Promise<number> {
  const r = await run(process.execPath, [CLI, '--local', '-p', '0', '-t', 'stream_bw', '-s', String(size), '-n', String(iterations),
    '-w', String(warmup), '-O', String(WINDOW), '-P', 'spin', '--json']).done;
  const line = r.stdout.trim().split('\n').at(-1) ?? '';
  let MBps: unknown;
  try { MBps = (JSON.parse(line) as { bandwidth_MBps?: unknown }).bandwidth_MBps; } catch { /* reported below */ }
  if (r.code !== 0 || typeof MBps !== 'number') fail('ucxx-perf', r);
  return MBps;
}

type Side = 'C' | 'ucxx-ts';
const TOOLS = ['ucx_perftest', 'C partial', 'C WAITALL', 'ucxx-ts > C', 'C > ucxx-ts', 'ucxx-ts > ucxx-ts', 'ucxx-ts'] as const;
type Tool = typeof TOOLS[number];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] as number;
}

async function main(): Promise<void> {
  // ucx_perftest of the UCX measured: the wheel's, beside its lib/, when UCXX_TS_UCX_LIBDIR names one.
  if (libDir !== null && useUcxLibDir() === null) throw new Error(`no ucx_perftest in the bin/ beside ${libDir}`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'stream-receive-build-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const binary = build(dir);
  const table: Record<Tool, number>[] = [];
  const details: Record<'partial' | 'waitall', Record<string, number>[]> = { partial: [], waitall: [] };
  for (let round = 1; round <= rounds; round++) {
    const row = {} as Record<Tool, number>;
    row['ucx_perftest'] = await runPerftest();
    const partial = await runC(binary, 'partial');
    row['C partial'] = partial.MBps;
    details.partial.push(partial.detail);
    const waitall = await runC(binary, 'waitall');
    row['C WAITALL'] = waitall.MBps;
    details.waitall.push(waitall.detail);
    row['ucxx-ts > C'] = (await runC(binary, 'waitall', { client: 'ucxx-ts', server: 'C' })).MBps;
    row['C > ucxx-ts'] = (await runC(binary, 'waitall', { client: 'C', server: 'ucxx-ts' })).MBps;
    row['ucxx-ts > ucxx-ts'] = (await runC(binary, 'waitall', { client: 'ucxx-ts', server: 'ucxx-ts' })).MBps;
    row['ucxx-ts'] = await runUcxxTs();
    table.push(row);
    if (!values.json) console.log(`round ${round}: ${TOOLS.map((t) => `${t} ${Math.round(row[t]).toLocaleString('en-US')}`).join(' | ')} MB/s`);
  }
  const ratio = (a: Tool, b: Tool): number => median(table.map((r) => r[a] / r[b]));
  const ratios = {
    'C WAITALL / ucx_perftest': ratio('C WAITALL', 'ucx_perftest'),
    'C partial / ucx_perftest': ratio('C partial', 'ucx_perftest'),
    'ucxx-ts sender > C receiver / C WAITALL': ratio('ucxx-ts > C', 'C WAITALL'),
    'C sender > ucxx-ts receiver / C WAITALL': ratio('C > ucxx-ts', 'C WAITALL'),
    'ucxx-ts > ucxx-ts / C WAITALL': ratio('ucxx-ts > ucxx-ts', 'C WAITALL'),
    'ucxx-ts (ucxx-perf) / C WAITALL': ratio('ucxx-ts', 'C WAITALL'),
    'ucxx-ts / ucx_perftest': ratio('ucxx-ts', 'ucx_perftest'),
  };
  const perMessage = (mode: 'partial' | 'waitall', key: string): number => median(details[mode].map((d) => d[key] ?? NaN));
  const receiver = {
    partial: { progressCalls: perMessage('partial', 'progress_calls_per_message'), receivesAtOnce: perMessage('partial', 'receives_at_once_per_message'),
      receivesWaited: perMessage('partial', 'receives_waited_per_message') },
    waitall: { progressCalls: perMessage('waitall', 'progress_calls_per_message') },
  };
  if (values.json) {
    console.log(JSON.stringify({ tool: 'stream-receive', size, iterations, warmup, window: WINDOW, ucxLibDir: libDir, rounds: table, ratios, receiver }));
    return;
  }
  console.log(`median of the rounds' ratios (${rounds} round${rounds === 1 ? '' : 's'}, ${size} B, ${iterations} + ${warmup} messages, ${WINDOW} in flight):`);
  for (const [name, r] of Object.entries(ratios)) console.log(`  ${name}: ${r.toFixed(2)}x`);
  console.log(`C's receiver per message (medians): partial ${receiver.partial.receivesAtOnce.toFixed(1)} receives returned at once and ` +
    `${receiver.partial.receivesWaited.toFixed(1)} waited, ${receiver.partial.progressCalls.toFixed(0)} progress calls; ` +
    `WAITALL ${receiver.waitall.progressCalls.toFixed(0)} progress calls`);
}

main().catch((err: unknown) => {
  console.error(`stream-receive: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
