/**
 * Lifetimes: close() everywhere, idempotent, parents close children, use after close is ClosedError,
 * cancellation, forgotten objects, views after close, idle CPU, loading errors, configuration.
 */
import { describe, test } from 'node:test';
import { strict as assert } from 'node:assert';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import {
  type Worker, CanceledError, ClosedError, ConfigError, Context, MessageTruncatedError, getUcxVersion,
} from 'ucxx-ts';

import { peerEnvironment } from './helpers/env.js';
import { profileFor, requireLoadedProfile } from '#ucxx-ts/ffi/ucx-versions.js';
import { failsAtOnce } from './helpers/fails-at-once.js';

const PEERS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'peers');

describe('close', () => {
  test('closing the context closes everything it owns, and every close is idempotent', async () => {
    const context = new Context();
    const worker = context.createWorker();
    const listener = worker.listen({ host: '127.0.0.1', port: 0 });
    const endpoint = await worker.connect('127.0.0.1', listener.port);
    const region = context.createMemoryHandle(4096);
    await context.close();
    assert.equal(context.closed, true);
    assert.equal(worker.closed, true);
    assert.equal(listener.closed, true);
    assert.equal(endpoint.closed, true);
    assert.equal(region.closed, true);
    await context.close();
    await worker.close();
    await endpoint.close();
    listener.close();
    region.close();
  });

  test('using a closed object is a ClosedError', async () => {
    const context = new Context();
    const worker = context.createWorker();
    const listener = worker.listen({ host: '127.0.0.1', port: 0 });
    const endpoint = await worker.connect('127.0.0.1', listener.port);
    const region = context.createMemoryHandle(4096);
    const key = region.createRemoteKey();
    await endpoint.close();
    failsAtOnce(() => endpoint.tagSend(new Uint8Array(1), 1n), ClosedError);
    failsAtOnce(() => endpoint.memGet(new Uint8Array(1), 1n, 1n), ClosedError);
    failsAtOnce(() => endpoint.flush(), ClosedError);
    listener.close();
    assert.throws(() => listener.getHandle(), ClosedError);
    region.close();
    assert.throws(() => region.view(), ClosedError);
    assert.throws(() => region.createRemoteKey(), ClosedError);
    assert.throws(() => region.getHandle(), ClosedError);
    key.close();
    assert.throws(() => key.serialize(), ClosedError);
    await worker.close();
    assert.throws(() => worker.getAddress(), ClosedError);
    failsAtOnce(() => worker.tagRecv(new Uint8Array(1), 1n), ClosedError);
    assert.throws(() => worker.listen(), ClosedError);
    assert.throws(() => worker.connectToAddress(new Uint8Array(10)), ClosedError);
    await assert.rejects(worker.connect('127.0.0.1', 1), ClosedError);
    await context.close();
    assert.throws(() => context.createWorker(), ClosedError);
    assert.throws(() => context.createMemoryHandle(10), ClosedError);
    assert.throws(() => context.getConfig(), ClosedError);
  });

  test('Symbol.dispose and Symbol.asyncDispose close', async () => {
    let region;
    let worker;
    {
      await using context = new Context();
      worker = context.createWorker();
      using r = context.createMemoryHandle(4096);
      region = r;
    }
    assert.equal(region.closed, true);
    assert.equal(worker.closed, true);
  });
});

describe('cancellation', () => {
  test('request.cancel() rejects a pending receive with CanceledError', async () => {
    await using context = new Context();
    const worker = context.createWorker();
    const request = worker.tagRecv(new Uint8Array(16), 77n);
    assert.equal(request.completed, false);
    request.cancel();
    await assert.rejects(Promise.resolve(request), CanceledError);
    assert.equal(request.status, -16);
  });

  test('closing the worker rejects what is in flight with CanceledError', async () => {
    const context = new Context();
    const worker = context.createWorker();
    const pending = worker.tagRecv(new Uint8Array(16), 78n);
    await context.close();
    await assert.rejects(Promise.resolve(pending), CanceledError);
  });

  test('a receive buffer that is too small rejects with MessageTruncatedError', async () => {
    await using context = new Context();
    const worker = context.createWorker();
    const endpoint = worker.connectToAddress(worker.getAddress());
    const receive = worker.tagRecv(new Uint8Array(4), 5n);
    await endpoint.tagSend(new Uint8Array(64).fill(1), 5n);
    await assert.rejects(Promise.resolve(receive), MessageTruncatedError);
  });
});

describe('progress from inside a callback', () => {
  test('progressUntil inside an active-message handler throws instead of spinning forever', async () => {
    await using context = new Context();
    const a = context.createWorker({ progressMode: 'manual' });
    const b = context.createWorker({ progressMode: 'manual' });
    const ab = a.connectToAddress(b.getAddress());
    const pending = b.tagRecv(new Uint8Array(8), 99n); // nothing will ever match it
    let thrown: unknown = null;
    let handled = false;
    b.setAmHandler(7, () => {
      handled = true;
      try {
        b.progressUntil(pending, 1000);
      } catch (err) {
        thrown = err;
      }
    });
    const sent = ab.amSend(7, null, Buffer.from('ping'));
    const deadline = Date.now() + 5000;
    while (!handled && Date.now() < deadline) {
      a.progress();
      b.progress();
    }
    assert.ok(handled, 'the AM handler ran');
    assert.ok(thrown instanceof Error);
    assert.match((thrown as Error).message, /inside a UCX callback/);
    while (!sent.completed && Date.now() < deadline) a.progress();
    pending.cancel();
    await pending.catch(() => undefined);
  });
});

describe('process lifetime', () => {
  test("forgotten objects: an idle process (its endpoint unref'd) exits by itself, cleanly", () => {
    const result = spawnSync(process.execPath, [path.join(PEERS, 'forgotten.js'), '{"mode":"natural"}'], {
      encoding: 'utf8', timeout: 30_000,
    });
    assert.equal(result.signal, null, `killed by ${result.signal}: ${result.stderr}`);
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /forgotten: done/);
  });

  test("forgotten objects: an idle 'polling' process exits by itself after its grace period", () => {
    const started = Date.now();
    const result = spawnSync(process.execPath, [path.join(PEERS, 'forgotten.js'), '{"mode":"natural","progressMode":"polling"}'], {
      encoding: 'utf8', timeout: 30_000,
    });
    assert.equal(result.signal, null, `killed by ${result.signal}: ${result.stderr}`);
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /forgotten: done/);
    assert.ok(Date.now() - started < 20_000, 'the process lingered');
  });

  test('forgotten objects: process.exit() with a listener and a receive in flight is clean', () => {
    const result = spawnSync(process.execPath, [path.join(PEERS, 'forgotten.js'), '{"mode":"exit"}'], {
      encoding: 'utf8', timeout: 30_000,
    });
    assert.equal(result.signal, null, `killed by ${result.signal}: ${result.stderr}`);
    assert.equal(result.status, 0, result.stderr);
  });

  test('exiting while a connection is being set up does not crash (UCX async thread at exit)', () => {
    for (let i = 0; i < 3; i++) {
      const result = spawnSync(process.execPath, [path.join(PEERS, 'forgotten.js'), '{"mode":"connecting"}'], {
        encoding: 'utf8', timeout: 30_000,
      });
      assert.equal(result.signal, null, `killed by ${result.signal}: ${result.stderr}`);
      // 13: it exited while connecting (an unsettled top-level await); 0: the connection won the race.
      assert.ok(result.status === 13 || result.status === 0, `exit status ${result.status}; stderr: ${result.stderr}`);
      assert.doesNotMatch(result.stderr, /Caught signal|Bug:/);
    }
  });

  test('a view of UCX-allocated memory is safe to touch after close; its mapping goes once the view is collected', () => {
    const result = spawnSync(process.execPath, ['--expose-gc', path.join(PEERS, 'view-after-close.js')], {
      encoding: 'utf8', timeout: 30_000,
    });
    assert.equal(result.signal, null, `killed by ${result.signal}: ${result.stderr}`);
    assert.equal(result.status, 0, result.stderr);
    // 2048 pages read after close: 7s, one 9 (offset 123 is not read) -> 14336; then /proc/self/maps.
    assert.match(result.stdout, /view-after-close: ok 14336 mapped: before close 1, after close 1, after gc 0\n/, result.stdout);
  });

  test("an idle 'event' worker does not progress; a 'polling' one with work in flight progresses back to back", async () => {
    // Progress passes, not CPU time: a loaded machine slows both, but cannot make an idle worker poll
    // or a polling one stop.
    const passesOver = async (worker: Worker, ms: number): Promise<number> => {
      const start = worker.progressCount;
      await new Promise((resolve) => setTimeout(resolve, ms));
      return worker.progressCount - start;
    };
    {
      await using context = new Context();
      const worker = context.createWorker({ progressMode: 'event' });
      using listener = worker.listen({ host: '127.0.0.1', port: 0 });
      const endpoint = await worker.connect('127.0.0.1', listener.port);
      const pending = worker.tagRecv(new Uint8Array(8), 5n); // in flight, nothing arrives
      await new Promise((resolve) => setTimeout(resolve, 100)); // past the busy-poll window
      // UCX's own timers for a connected endpoint wake it ~20 times a second; polling runs ~10^6.
      const idle = await passesOver(worker, 1000);
      assert.ok(idle < 100, `an idle 'event' worker ran ${idle} progress passes in 1 s`);
      pending.cancel();
      await pending.catch(() => undefined);
      await endpoint.close();
    }
    {
      await using context = new Context();
      const worker = context.createWorker({ progressMode: 'polling' });
      const pending = worker.tagRecv(new Uint8Array(8), 5n);
      const busy = await passesOver(worker, 500);
      assert.ok(busy > 10_000, `a 'polling' worker with a receive in flight ran only ${busy} progress passes in 0.5 s`);
      pending.cancel();
      await pending.catch(() => undefined);
      // Nothing in flight: it polls for its grace period (1 ms by default), then sleeps.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const after = await passesOver(worker, 1000);
      assert.ok(after < 100, `a 'polling' worker with nothing in flight ran ${after} progress passes in 1 s`);
    }
  });
});

describe('loading and configuration', () => {
  test('a missing libucp is UcxLibraryNotFoundError saying what to install', () => {
    const script = "import('ucxx-ts').then((m) => { try { new m.Context(); } catch (e) { " +
      'console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); } })';
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8', timeout: 30_000, env: { ...process.env, UCXX_TS_UCX_LIBDIR: '/nonexistent-ucx' }, cwd: path.join(PEERS, '..'),
    });
    const error = JSON.parse(out) as { name: string; code: string; message: string };
    assert.equal(error.name, 'UcxLibraryNotFoundError');
    assert.equal(error.code, 'UCXX_ERR_LIBRARY_NOT_FOUND');
    assert.match(error.message, /apt-get install libucx0/);
  });

  test('a libucp of another version is refused at load with UnsupportedUcxVersionError, before any struct is used', () => {
    // Stand-in libraries: a libucp.so.0 that has nothing but ucp_get_version, reporting the version asked.
    const dir = mkdtempSync(path.join(tmpdir(), 'ucxx-ts-fake-ucx-'));
    try {
      const source = path.join(dir, 'fake.c');
      const run = (major: number, minor: number, env: NodeJS.ProcessEnv = {}): { name: string; code?: string; message: string } => {
        writeFileSync(source, '#include <stdint.h>\nvoid ucp_get_version(unsigned *a, unsigned *b, unsigned *c) ' +
          `{ *a = ${major}; *b = ${minor}; *c = 7; }\n`);
        execFileSync('gcc', ['-shared', '-fPIC', source, '-o', path.join(dir, 'libucp.so.0')], { timeout: 60_000 });
        execFileSync('gcc', ['-shared', '-fPIC', source, '-o', path.join(dir, 'libucs.so.0')], { timeout: 60_000 });
        const script = "import('ucxx-ts').then((m) => { try { new m.Context(); console.log('{}'); } catch (e) { " +
          'console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); } })';
        const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
          encoding: 'utf8', timeout: 30_000, env: { ...process.env, ...env, UCXX_TS_UCX_LIBDIR: dir }, cwd: path.join(PEERS, '..'),
        });
        return JSON.parse(out) as { name: string; code?: string; message: string };
      };
      for (const [major, minor] of [[1, 12], [1, 16], [2, 0]] as const) {
        const error = run(major, minor);
        assert.equal(error.name, 'UnsupportedUcxVersionError', `UCX ${major}.${minor}: ${error.message}`);
        assert.equal(error.code, 'UCXX_ERR_UCX_VERSION');
        assert.match(error.message, new RegExp(`supports UCX 1\\.13\\.x and 1\\.19\\.x-1\\.20\\.x, but .*libucp\\.so\\.0 is UCX ${major}\\.${minor}\\.7`));
      }
      // The tested ranges pass the check (and fail at the stand-in's missing functions).
      for (const minor of [13, 19, 20]) assert.notEqual(run(1, minor).name, 'UnsupportedUcxVersionError', `UCX 1.${minor}`);
      // Turning the check off lets a newer one through to the next step (here: the stand-in's missing
      // functions), never to a crash; an older one stays refused.
      assert.notEqual(run(1, 16, { UCXX_TS_UCX_VERSION_CHECK: 'off' }).name, 'UnsupportedUcxVersionError');
      assert.equal(run(1, 12, { UCXX_TS_UCX_VERSION_CHECK: 'off' }).name, 'UnsupportedUcxVersionError');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an unknown UCX option is a ConfigError; known ones are applied and reported', async () => {
    assert.throws(() => new Context({ config: { NO_SUCH_OPTION: 'x' } }), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.equal(err.option, 'NO_SUCH_OPTION');
      assert.equal(err.code, 'UCS_ERR_NO_ELEM');
      return true;
    });
    assert.throws(() => new Context({ config: { TLS: 42, RNDV_THRESH: 'not-a-size' } }), ConfigError);
    await using context = new Context({ config: { UCX_TLS: 'tcp,self', TCP_KEEPINTVL: '2s' } });
    const config = context.getConfig();
    assert.equal(config['TLS'], 'tcp,self');
    assert.equal(config['TCP_KEEPINTVL'], '2s');
    assert.ok(Object.keys(config).length > 30);
  });

  test('UCX_* variables of the user win over ucxx-ts defaults; new Context({ config }) wins over the environment', () => {
    const run = (env: NodeJS.ProcessEnv): Record<string, string | undefined> => {
      const result = spawnSync(process.execPath, [path.join(PEERS, 'config-report.js')], {
        encoding: 'utf8', timeout: 20_000, env: peerEnvironment(env),
      });
      assert.equal(result.status, 0, `status ${String(result.status)}, signal ${String(result.signal)}: ${result.stderr}`);
      const report = JSON.parse(result.stdout) as Record<string, string | undefined>;
      // UCX 1.20 prints RNDV_THRESH per locality ('intra:X,inter:X', as it also accepts it); 1.13 as X.
      for (const key of ['rndvPlain', 'rndvConfigured']) {
        report[key] = report[key]?.replace(/^intra:([^,]+),inter:\1$/, '$1');
      }
      return report;
    };
    // Nothing set: ucxx-ts turns UCX's memory hooks off; RNDV_THRESH is UCX's default.
    const defaults = run({});
    assert.deepEqual(defaults, {
      MEM_EVENTS: 'n', MEM_MALLOC_HOOKS: 'n', MEM_MMAP_HOOK_MODE: 'none', rndvPlain: 'auto', rndvConfigured: '54321',
    });
    // Set by the user: their values stay, and UCX reads them; config still overrides the environment.
    // (UCX_MEM_MMAP_HOOK_MODE=reloc is not tried: with it on, Node aborts in munmap, the README's reason.)
    const mine = run({ UCX_MEM_EVENTS: 'y', UCX_RNDV_THRESH: '12345' });
    assert.deepEqual(mine, {
      MEM_EVENTS: 'y', MEM_MALLOC_HOOKS: 'n', MEM_MMAP_HOOK_MODE: 'none', rndvPlain: '12345', rndvConfigured: '54321',
    });
  });

  test('bad options are TypeErrors/RangeErrors', () => {
    assert.throws(() => new Context({ features: [] }), TypeError);
    assert.throws(() => new Context({ features: ['teleport' as never] }), TypeError);
    const context = new Context();
    assert.throws(() => context.createWorker({ progressMode: 'sometimes' as never }), TypeError);
    assert.throws(() => context.createWorker({ busyPollUs: -1 }), RangeError);
    assert.throws(() => context.createWorker({ busyPollUs: Number.NaN }), RangeError);
    assert.throws(() => context.createMemoryHandle(0), RangeError);
    assert.throws(() => context.createMemoryHandle(100, new Uint8Array(10)), RangeError);
    assert.throws(() => context.createMemoryHandle(10, 'abc' as never), TypeError);
    assert.throws(() => context.createMemoryHandle(10, undefined, { access: 'all' as never }), TypeError);
    assert.throws(() => context.createWorker().listen({ port: 70000 }), RangeError);
    void context.close();
  });

  test('the loaded UCX is in a tested range (1.13.x, or 1.19.x-1.20.x), and its profile is that range\'s', () => {
    const version = getUcxVersion();
    const [major, minor] = version;
    assert.ok(major === 1 && (minor === 13 || minor === 19 || minor === 20), `UCX ${version.join('.')}`);
    // (The library's copy of the profile table is not this file's: compare what identifies it.)
    assert.deepEqual(requireLoadedProfile().minors, profileFor(version).minors);
    assert.equal(requireLoadedProfile().range, minor === 13 ? '1.13.x' : '1.19.x-1.20.x');
  });

  test("'event' needs the wakeup feature; 'manual' works without it", async () => {
    await using context = new Context({ features: ['tag', 'rma'] });
    assert.throws(() => context.createWorker(), TypeError);
    const worker = context.createWorker({ progressMode: 'manual' });
    assert.ok(worker.getAddress().length > 0);
  });
});
