/**
 * UCX's own client-server example, `ucp_client_server.c` (Debian ships it with libucx-dev): compiled as it
 * is, against this run's UCX, and run with PATH only in its environment so that no UCX_* setting of the
 * test process reaches it.
 */
import { strict as assert } from 'node:assert';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ucxCompileFlags } from './env.js';

const EXAMPLES = '/usr/share/doc/libucx-dev/examples';
const SOURCE = join(EXAMPLES, 'ucp_client_server.c');
/** How long one step of a stock program may take. */
export const STOCK_STEP_MS = 15_000;

let binary: string | undefined;

/** The stock example compiled once per process against this run's UCX. */
export function stockBinary(): string {
  if (binary !== undefined) return binary;
  assert.ok(existsSync(SOURCE), `${SOURCE} is missing: it comes with libucx-dev (scripts/ensure-deps.sh installs it)`);
  const dir = mkdtempSync(join(tmpdir(), 'ucxx-ts-stock-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, 'ucp_client_server');
  execFileSync('gcc', ['-O2', '-w', `-I${EXAMPLES}`, SOURCE, '-o', out, ...ucxCompileFlags()], { stdio: 'pipe', timeout: 60_000 });
  binary = out;
  return out;
}

/** The stock program, line-buffered (stdbuf) so that its progress can be read while it runs. */
export class StockProgram {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output = '';

  constructor(args: string[]) {
    this.child = spawn('stdbuf', ['-oL', '-eL', stockBinary(), ...args], {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout?.on('data', (chunk: Buffer) => { this.output += chunk.toString('latin1'); });
    this.child.stderr?.on('data', (chunk: Buffer) => { this.output += chunk.toString('latin1'); });
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves once `pattern` appears in the output; fails with the output after `ms`, or if it exits. */
  async waitFor(pattern: RegExp | string, what: string, ms = STOCK_STEP_MS): Promise<RegExpExecArray | null> {
    const deadline = Date.now() + ms;
    for (;;) {
      if (typeof pattern === 'string') {
        if (this.output.includes(pattern)) return null;
      } else {
        const match = pattern.exec(this.output);
        if (match !== null) return match;
      }
      if (!this.running) assert.fail(`the stock program exited (${this.child.exitCode ?? this.child.signalCode}) before ${what}:\n${this.output}`);
      if (Date.now() > deadline) assert.fail(`timed out after ${ms} ms waiting for ${what}; stock program output:\n${this.output}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  kill(): void {
    if (this.running) this.child.kill('SIGKILL');
  }
}

/** Runs the stock program with `args` to its end (killed after `ms`): its exit and its output. */
export async function runStockClient(
  args: string[], ms = STOCK_STEP_MS,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }> {
  const program = new StockProgram(args);
  const timer = setTimeout(() => program.kill(), ms);
  try {
    const { code, signal } = await program.exited;
    return { code, signal, output: program.output };
  } finally {
    clearTimeout(timer);
    program.kill();
  }
}
