/**
 * A C test peer (a plain-UCP program from test/c): compiled once per run with gcc, started with an
 * explicit clean environment (PATH only, so it runs with UCX's defaults and none of this process's UCX_*
 * settings), its output collected. Every wait is bounded: `guard` fails when the peer exits first or the
 * time passes, after sending SIGALRM so that the peer prints the phase it is stuck in, and the error
 * carries the peer's stdout and stderr. The programs print "PORT <n>" as servers, "OK ..." on success,
 * "FAIL ..." and exit 1 on failure (test/c/interop_peer.c, test/c/rma_peer.c).
 */
import { strict as assert } from 'node:assert';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ucxCompileFlags } from './env.js';

export const C_SOURCES = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'test', 'c');
const INSTALL_HINT =
  'The interop tests compile C UCP peers (test/c) and need gcc and the UCX development files ' +
  '(<ucp/api/ucp.h>, libucp.so): install `gcc libucx-dev` (scripts/ensure-deps.sh does).';

/** The environment of a C peer: PATH and nothing else (UCX's defaults). */
export function cleanEnvironment(): NodeJS.ProcessEnv {
  return { PATH: process.env['PATH'] ?? '/usr/bin:/bin' };
}

const binaries = new Map<string, string>();

/** Long output (a program that prints what it received) cut in the middle. */
function clip(text: string, max = 4000): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max / 2)}\n[... ${text.length - max} characters ...]\n${text.slice(-max / 2)}`;
}

/** Compiles test/c/<name>.c once per run; fails (with what to install) when it cannot. */
export function compileC(name: string): string {
  const cached = binaries.get(name);
  if (cached !== undefined) return cached;
  const source = join(C_SOURCES, `${name}.c`);
  const dir = mkdtempSync(join(tmpdir(), `ucxx-ts-${name}-`));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, basename(name));
  try {
    execFileSync('gcc', ['-O2', '-Wall', '-Wextra', '-fdiagnostics-color=never', source, '-o', out, ...ucxCompileFlags()],
      { stdio: 'pipe', timeout: 60_000 });
  } catch (err) {
    const e = err as { code?: string; stderr?: Buffer; message?: string };
    const why = e.code === 'ENOENT' ? 'gcc was not found on PATH'
      : `gcc could not build ${source}:\n${e.stderr?.toString() || String(e.message)}`;
    assert.fail(`${INSTALL_HINT}\n${why}`);
  }
  binaries.set(name, out);
  return out;
}

export class CPeer {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly #label: string;
  readonly #stepMs: number;
  stdout = '';
  stderr = '';
  /** stdout and stderr, interleaved as they arrived. */
  output = '';
  #waiters: (() => void)[] = [];

  /**
   * Starts `binary args` with the clean environment (plus `env`, for a setting a test names); `wrapper` (e.g. a network namespace's
   * `ip netns exec ... --`) runs it elsewhere. The peer must print its lines unbuffered (the C peers
   * here set line buffering themselves).
   */
  constructor(binary: string, args: readonly string[], options: { wrapper?: readonly string[]; stepMs?: number; env?: NodeJS.ProcessEnv } = {}) {
    const argv = [...(options.wrapper ?? []), binary, ...args];
    this.#label = `${basename(binary)} ${args.join(' ')}`;
    this.#stepMs = options.stepMs ?? 15_000;
    this.child = spawn(argv[0] as string, argv.slice(1), { env: { ...cleanEnvironment(), ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const wake = (): void => {
      for (const w of this.#waiters.splice(0)) w();
    };
    this.child.stdout?.on('data', (chunk: Buffer) => {
      this.stdout += chunk.toString('latin1');
      this.output += chunk.toString('latin1');
      wake();
    });
    this.child.stderr?.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString('latin1');
      this.output += chunk.toString('latin1');
      wake();
    });
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        wake();
        resolve({ code, signal });
      });
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  describe(): string {
    return `C peer ${this.#label}\n  stdout: ${clip(this.stdout.trim()) || '(none)'}\n  stderr: ${clip(this.stderr.trim()) || '(none)'}`;
  }

  /**
   * `promise`, unless it fails, the C peer exits first (unless `exitIsFailure` is false: for what may
   * end after the peer, such as closing our endpoint), or `ms` pass (then SIGALRM makes the peer print
   * the phase it is stuck in). The error carries what the peer printed.
   */
  async guard<T>(promise: PromiseLike<T>, what: string, ms = this.#stepMs, options: { exitIsFailure?: boolean } = {}): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const outcome = new Promise<T>((resolve, reject) => {
      Promise.resolve(promise).then(resolve, reject);
      if (options.exitIsFailure ?? true) {
        void this.exited.then(({ code, signal }) => {
          reject(new Error(`${what}: the C peer exited (code ${code}, signal ${signal}) first`));
        });
      }
      timer = setTimeout(() => {
        if (this.running) this.child.kill('SIGALRM');
        reject(new Error(`${what}: nothing after ${ms} ms`));
      }, ms);
    });
    try {
      return await outcome;
    } catch (err) {
      // A failing peer exits right after its FAIL line (or the SIGALRM): let it finish printing.
      await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, 1000))]);
      const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      throw new Error(`${message}\n${this.describe()}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }

  /** The first match of `pattern` in the output (stdout and stderr), waiting (guarded) for it. */
  async line(pattern: RegExp, what: string): Promise<RegExpExecArray> {
    const wait = (async () => {
      for (;;) {
        const m = pattern.exec(this.output);
        if (m !== null) return m;
        await new Promise<void>((resolve) => this.#waiters.push(resolve));
      }
    })();
    return this.guard(wait, what);
  }

  /** The port a server peer printed ("PORT <n>"). */
  async port(): Promise<number> {
    return Number((await this.line(/^PORT (\d+)$/m, 'waiting for the C server to print its port'))[1]);
  }

  /** Waits for the peer to exit; asserts that it exited 0, printed a final OK and no FAIL; returns stdout. */
  async success(): Promise<string> {
    const { code, signal } = await this.guard(this.exited, 'waiting for the C peer to finish');
    assert.equal(signal, null, `the C peer was killed by ${signal}\n${this.describe()}`);
    assert.equal(code, 0, `the C peer exited with ${code}\n${this.describe()}`);
    assert.match(this.stdout, /^OK$/m, `the C peer did not print OK\n${this.describe()}`);
    assert.doesNotMatch(this.stdout, /^FAIL/m, this.describe());
    return this.stdout;
  }

  kill(): void {
    if (this.running) this.child.kill('SIGKILL');
  }
}
