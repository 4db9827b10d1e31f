/**
 * The README's quick example, run as written: its two programs are taken from README.md, compiled as a
 * user's project would compile them (ES modules, ES2022, strict, `await using`), and run as two
 * processes against the package; between them, clients connect and leave at once, which a server
 * that throws from its connection callback does not survive.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { within } from './helpers/deadline.js';
import { peerEnvironment } from './helpers/env.js';
import { assertNoUcxNoise } from './helpers/ucx-noise.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const PEERS = path.join(ROOT, 'build', 'test', 'peers');
const PORT = 13337; // the README's

/** The `ts` code blocks of the README section that starts with `heading`. */
function codeBlocks(heading: string): string[] {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf(`\n${heading}`);
  assert.ok(start >= 0, `README.md has a section '${heading}'`);
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] as string);
}

/** Compiles the programs with a newcomer's tsconfig, inside the package so that 'ucxx-ts' resolves to it. */
function compile(programs: Record<string, string>): string {
  const dir = path.join(ROOT, 'build', 'readme-examples');
  mkdirSync(dir, { recursive: true });
  for (const [name, source] of Object.entries(programs)) writeFileSync(path.join(dir, `${name}.ts`), source);
  writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      target: 'es2022', lib: ['es2022', 'esnext.disposable'], module: 'nodenext', moduleResolution: 'nodenext',
      strict: true, types: ['node'], outDir: '.', rootDir: '.', skipLibCheck: true,
    },
    files: Object.keys(programs).map((name) => `${name}.ts`),
  }));
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { stdio: 'pipe' });
  return dir;
}

interface Run {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function run(script: string, args: string[] = []): Run {
  const child = spawn(process.execPath, [script, ...args], { env: peerEnvironment(), stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout?.on('data', (chunk: Buffer) => (text += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (text += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  return { child, output: () => text, exited };
}

async function outputContains(r: Run, text: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!r.output().includes(text)) {
    if (Date.now() > deadline || r.child.exitCode !== null) {
      assert.fail(`expected '${text}' in the output (exit ${String(r.child.exitCode)}):\n${r.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('the quick example runs as written: the owner survives clients that leave at once, the peer puts and gets', async () => {
  const blocks = codeBlocks('## Quick example');
  assert.equal(blocks.length, 2, 'the quick example has two programs: the owner and the peer');
  const dir = compile({ owner: blocks[0] as string, peer: blocks[1] as string });
  const owner = run(path.join(dir, 'owner.js'));
  try {
    await outputContains(owner, `listening on port ${PORT}`, 20_000);
    for (let i = 0; i < 10; i++) {
      const leaver = run(path.join(PEERS, 'leave-at-once.js'), [JSON.stringify({ port: PORT, how: i % 2 === 0 ? 'exit' : 'close' })]);
      const { code } = await within(leaver.exited, 20_000, 'a client that leaves at once');
      assert.equal(code, 0, leaver.output());
      assert.equal(owner.child.exitCode, null, `the owner is still running after client ${i + 1}:\n${owner.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200)); // the last leaver's disconnect reaches the owner
    assert.equal(owner.child.exitCode, null, `the owner is still running:\n${owner.output()}`);
    // UCX 1.13 may log the failed wireup flush of a client that left before its connection was set up:
    // those clients are not a clean run, the README's peer is.
    const cleanFrom = owner.output().length;
    const peer = run(path.join(dir, 'peer.js'));
    const { code } = await within(peer.exited, 30_000, 'the README peer');
    assert.equal(code, 0, peer.output());
    assert.match(peer.output(), /^hello, remote memory$/m, 'the peer read back what it wrote');
    await outputContains(owner, '\nhello, remote memory', 10_000); // the owner saw it in its region
    owner.child.kill('SIGINT');
    const end = await within(owner.exited, 15_000, 'the owner after SIGINT');
    assert.equal(end.code, 0, owner.output());
    assertNoUcxNoise(peer.output(), "the README's peer");
    assertNoUcxNoise(owner.output().slice(cleanFrom), "the README's owner while it served the README's peer");
  } finally {
    if (owner.child.exitCode === null) owner.child.kill('SIGKILL');
  }
});
