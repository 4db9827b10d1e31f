/**
 * Process lifetime as Node's conventions have it, tested with programs as a user writes them (a
 * separate client process without an IPC channel, test/peers/lifetime-client.ts, against a server
 * peer): what keeps a process alive (an open endpoint or listener, like a socket or a server), how to
 * opt out (`unref()`), and that a loop of awaited operations that UCX completes at once still lets
 * the event loop turn (timers run, a killed peer is noticed).
 */
import { describe, test } from 'node:test';
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';

import { Peer } from './helpers/peer.js';
import { peerEnvironment } from './helpers/env.js';

const CLIENT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'peers', 'lifetime-client.js');

interface Run {
  /** Resolves with each line the client prints, in order, as it prints it. */
  line(match: RegExp, timeoutMs?: number): Promise<string>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly running: () => boolean;
  kill(): void;
  output(): string;
}

/** Starts the client program with `config` (no IPC channel: nothing but its own objects keeps it alive). */
function client(config: object): Run {
  const child = spawn(process.execPath, [CLIENT, JSON.stringify(config)], {
    env: peerEnvironment(), stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let alive = true;
  const waiters: (() => void)[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    for (const w of waiters.splice(0)) w();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      alive = false;
      for (const w of waiters.splice(0)) w();
      resolve({ code, signal });
    });
  });
  const guard = setTimeout(() => child.kill('SIGKILL'), 60_000);
  guard.unref();
  return {
    exited,
    running: () => alive,
    kill: () => child.kill('SIGKILL'),
    output: () => `stdout:\n${stdout}\nstderr:\n${stderr}`,
    line: (match, timeoutMs = 30_000) => new Promise((resolve, reject) => {
      const deadline = setTimeout(() => reject(new Error(`no line ${match} within ${timeoutMs} ms; ${`stdout:\n${stdout}\nstderr:\n${stderr}`}`)), timeoutMs);
      const look = (): void => {
        const found = stdout.split('\n').find((l) => match.test(l));
        if (found !== undefined) {
          clearTimeout(deadline);
          resolve(found);
        } else if (!alive) {
          clearTimeout(deadline);
          reject(new Error(`the client exited without printing ${match}; stdout:\n${stdout}\nstderr:\n${stderr}`));
        } else waiters.push(look);
      };
      look();
    }),
  };
}

async function server(config: object = {}): Promise<{ peer: Peer; port: number }> {
  const peer = Peer.start('lifetime-server', config);
  const ready = await peer.next('ready');
  return { peer, port: ready['port'] as number };
}

/** The client is still running `ms` after it printed 'opened' (then it is killed). */
async function staysAlive(run: Run, ms = 1500): Promise<void> {
  await run.line(/^opened$/);
  await new Promise((resolve) => setTimeout(resolve, ms));
  assert.ok(run.running(), `the process exited although an object of it was open; ${run.output()}`);
  run.kill();
  await run.exited;
}

/** The client exits by itself, with status 0. */
async function exitsByItself(run: Run): Promise<void> {
  const timer = setTimeout(() => run.kill(), 20_000);
  const { code, signal } = await run.exited;
  clearTimeout(timer);
  assert.equal(signal, null, `killed (it did not exit by itself); ${run.output()}`);
  assert.equal(code, 0, run.output());
}

describe('what keeps a process alive', () => {
  test('a reply awaited through setAmHandler keeps the client alive until it comes (and it then exits)', async () => {
    const { peer, port } = await server({ replyDelayMs: 300 });
    try {
      const run = client({ mode: 'am-reply', port, rounds: 3 });
      await exitsByItself(run);
      assert.match(run.output(), /am-reply: ok 3/);
    } finally {
      await peer.stop();
    }
  });

  test('an open endpoint keeps the process alive, as an open socket does; unref() lets it go', async () => {
    const { peer, port } = await server();
    try {
      await staysAlive(client({ mode: 'open-endpoint', port }));
      await exitsByItself(client({ mode: 'unref-endpoint', port }));
    } finally {
      await peer.stop();
    }
  });

  test("an open listener keeps the process alive, as a server does; unref() lets it go, and so does the worker's", async () => {
    const { peer, port } = await server();
    try {
      await staysAlive(client({ mode: 'open-listener' }));
      await exitsByItself(client({ mode: 'unref-listener' }));
      await exitsByItself(client({ mode: 'unref-worker', port }));
    } finally {
      await peer.stop();
    }
  });

  test('an endpoint the peer closed stops keeping the process alive', async () => {
    const { peer, port } = await server();
    const run = client({ mode: 'until-peer-closes', port });
    try {
      await run.line(/^opened$/);
    } finally {
      await peer.stop();
    }
    await exitsByItself(run);
    assert.match(run.output(), /closed by peer/);
  });
});

describe('a loop of awaits that UCX completes at once', () => {
  test('lets timers run: a 100 ms interval ticks during a second of awaited same-host memGet', async () => {
    const { peer, port } = await server();
    try {
      const run = client({ mode: 'rma-loop', port, durationMs: 1000 });
      const line = await run.line(/^\{/);
      await exitsByItself(run);
      const { ticks, ops, value } = JSON.parse(line) as { ticks: number; ops: number; value: number };
      assert.equal(value, 7, 'memGet read the region');
      assert.ok(ops > 1000, `only ${ops} memGet in 1 s`);
      // 10 at most; a loaded machine may delay some, but none at all is the starved loop.
      assert.ok(ticks >= 3, `the interval ticked ${ticks} times in 1 s of awaited memGet (${ops} of them)`);
    } finally {
      await peer.stop();
    }
  });

  test('lets failure detection run: a SIGKILLed owner is noticed by a loop of awaited memGet', async () => {
    const { peer, port } = await server();
    const run = client({ mode: 'rma-until-failure', port });
    await run.line(/^looping$/);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const killed = performance.now();
    peer.child.kill('SIGKILL');
    const noticed = await run.line(/^(noticed|never)/, 30_000);
    const after = performance.now() - killed;
    assert.match(noticed, /^noticed /, run.output());
    assert.ok(after < 10_000, `noticed only after ${Math.round(after)} ms`);
    await exitsByItself(run);
  });
});
