/**
 * ucxx's own protocols, live: ucxx-ts's tagMulti and ucxx-form active messages against a C program
 * (test/c/ucxx_peer.c) that implements both from ucxx's C++ sources with plain libucp, in both roles
 * (C server / ucxx-ts client and the reverse). Real ucxx needs a newer UCX than Debian 12's 1.13, so the
 * C program stands in for it. Every byte is checked in both directions; the scenarios and seeds are
 * described at the top of ucxx_peer.c. The C peer runs with UCX's defaults (a clean environment), and
 * every wait has a deadline after which the failure shows what the peer printed.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  AlreadyExistsError, CanceledError, Context, UcxxCudaFrameError, UcxxHeaderFormatError, UnsupportedError,
  encodeTagMultiHeaders, encodeUcxxAmHeader, type Endpoint, type UcxxAmMessage, type Worker,
} from 'ucxx-ts';
import { assertCPattern, cPattern } from './helpers/pattern.js';
import { failsAtOnce } from './helpers/fails-at-once.js';
import { within } from './helpers/deadline.js';
import { ucxCompileFlags } from './helpers/env.js';

const SOURCE = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'test', 'c', 'ucxx_peer.c');
const MiB = 1 << 20;
const TAG_TS_TO_C = 0x7563787800000001n;
const TAG_C_TO_TS = 0x7563787800000142n;
const TAG_BAD = 0x75637878000bad00n;
const TAG_ACK = 0xacacacacacacacacn;
const DONE = new TextEncoder().encode('DONE');
const OWNER = 'ucxx-ts-test';
const CALLBACK_ID_BASE = 0x1000n;
const EXTRA_SIZE = MiB;
/** How long one step may take; a whole exchange takes well under a second when it works. */
const STEP_MS = 15_000;

type Role = 'C server, ucxx-ts client' | 'ucxx-ts server, C client';
const ROLES: Role[] = ['C server, ucxx-ts client', 'ucxx-ts server, C client'];


/** Frame specs as ucxx_peer.c reads them: a size, or COUNTxSIZE. */
function expand(spec: readonly string[]): number[] {
  return spec.flatMap((s) => {
    const m = /^(\d+)x(\d+)$/.exec(s);
    return m === null ? [Number(s)] : new Array<number>(Number(m[1])).fill(Number(m[2]));
  });
}

/** Rejects after `ms` unless `promise` settles first. */
function deadline<T>(promise: PromiseLike<T>, what: string, ms = STEP_MS): Promise<T> {
  return within(promise, ms, what);
}

// ---- the C peer --------------------------------------------------------------------------------

let binary: string | undefined;

function peerBinary(): string {
  if (binary !== undefined) return binary;
  const dir = mkdtempSync(join(tmpdir(), 'ucxx-ts-ucxx-peer-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, 'ucxx_peer');
  try {
    execFileSync('gcc', ['-O2', '-Wall', '-Wextra', '-Werror', '-fdiagnostics-color=never', SOURCE, '-o', out, ...ucxCompileFlags()],
      { stdio: 'pipe', timeout: 60_000 });
  } catch (err) {
    const e = err as { stderr?: Buffer; message?: string };
    assert.fail(`could not build ${SOURCE} (needs gcc and libucx-dev):\n${e.stderr?.toString() || String(e.message)}`);
  }
  binary = out;
  return out;
}

/** The C peer's environment: PATH only, so that it runs with UCX's defaults. */
const CLEAN_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

class CPeer {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout = '';
  stderr = '';
  #wake: (() => void)[] = [];

  constructor(args: string[]) {
    this.child = spawn(peerBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'], env: CLEAN_ENV });
    this.child.stdout?.on('data', (chunk: Buffer) => {
      this.stdout += chunk.toString();
      for (const wake of this.#wake.splice(0)) wake();
    });
    this.child.stderr?.on('data', (chunk: Buffer) => { this.stderr += chunk.toString(); });
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  describe(): string {
    return `C peer ${this.child.spawnargs.slice(1).join(' ').slice(0, 300)}\n  stdout: ${this.stdout.trim() || '(none)'}\n` +
      `  stderr: ${this.stderr.trim() || '(none)'}`;
  }

  /** `promise`, unless the peer exits first or `ms` pass; a failure carries the peer's output. */
  async guard<T>(promise: PromiseLike<T>, what: string, ms = STEP_MS): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    let ours = false;
    const outcome = new Promise<T>((resolve, reject) => {
      Promise.resolve(promise).then(resolve, (err: unknown) => { ours = true; reject(err); });
      void this.exited.then(({ code, signal }) => reject(new Error(`${what}: the C peer exited (code ${code}, signal ${signal}) first`)));
      timer = setTimeout(() => {
        if (this.running) this.child.kill('SIGALRM'); // makes it print its phase
        reject(new Error(`${what}: nothing after ${ms} ms`));
      }, ms);
    });
    try {
      return await outcome;
    } catch (err) {
      // A peer that is going away (a transport error, its exit, the SIGALRM) gets a second to finish
      // printing; a check of ours that refused its bytes (a format error) leaves it running.
      const transport = typeof (err as { status?: unknown }).status === 'number';
      if (!ours || transport) await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, 1000))]);
      const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      throw new Error(`${message}\n${this.describe()}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }

  async port(): Promise<number> {
    const wait = (async () => {
      for (;;) {
        const m = /^PORT (\d+)$/m.exec(this.stdout);
        if (m !== null) return Number(m[1]);
        await new Promise<void>((resolve) => this.#wake.push(resolve));
      }
    })();
    return this.guard(wait, 'waiting for the C server to print its port');
  }

  async success(): Promise<string> {
    const { code, signal } = await this.guard(this.exited, 'waiting for the C peer to finish');
    assert.equal(signal, null, `the C peer was killed by ${signal}\n${this.describe()}`);
    assert.equal(code, 0, `the C peer exited with ${code}\n${this.describe()}`);
    const ok = /^OK.*$/m.exec(this.stdout);
    assert.ok(ok !== null, `the C peer did not print OK\n${this.describe()}`);
    return ok[0];
  }

  kill(): void {
    if (this.running) this.child.kill('SIGKILL');
  }
}

/** Runs the C peer's dump mode and returns its output lines of kind `label`, as bytes. */
function dump(args: string[], label: string): Uint8Array[] {
  const out = execFileSync(peerBinary(), args, { env: CLEAN_ENV, encoding: 'utf8', timeout: 30_000 });
  return out.split('\n').filter((l) => l.startsWith(`${label} `)).map((l) => new Uint8Array(Buffer.from(l.slice(label.length + 1), 'hex')));
}

interface Session {
  worker: Worker;
  endpoint: Endpoint;
  peer: CPeer;
}

/** Connects ucxx-ts and a C peer running `scenario` in `role`, runs `body`, acknowledges, and checks OK. */
async function session(role: Role, scenario: string[], body: (s: Session) => Promise<void>, prepare?: (worker: Worker) => void): Promise<void> {
  await using context = new Context();
  const worker = context.createWorker();
  prepare?.(worker);
  let peer: CPeer | undefined;
  try {
    let endpoint: Endpoint;
    if (role === 'C server, ucxx-ts client') {
      peer = new CPeer(['server', ...scenario]);
      const port = await peer.port();
      // The C peer, like ucxx, asks for peer error handling on the endpoints it accepts.
      endpoint = await peer.guard(worker.connect('127.0.0.1', port, { errorHandling: 'peer' }), 'connecting to the C server');
    } else {
      const listener = worker.listen({ host: '127.0.0.1', port: 0 });
      const accepted = listener[Symbol.asyncIterator]().next();
      peer = new CPeer(['client', '127.0.0.1', String(listener.port), ...scenario]);
      const next = await peer.guard(accepted, 'accepting the C client');
      assert.ok(next.done !== true);
      endpoint = next.value;
      listener.close();
      // As in interop.test.ts: let the accepted endpoint's wireup finish before sending on it.
      await peer.guard(endpoint.flush(), 'flushing the accepted endpoint');
    }
    try {
      await body({ worker, endpoint, peer });
    } catch (err) {
      // A check failed on this side: show what the peer was doing (SIGALRM makes it print its phase).
      const running = peer;
      if (running.running) running.child.kill('SIGALRM');
      await Promise.race([running.exited, new Promise((resolve) => setTimeout(resolve, 1000))]);
      if (err instanceof Error && !err.message.includes('C peer')) err.message += `\n${running.describe()}`;
      throw err;
    }
    await peer.guard(endpoint.tagSend(DONE, TAG_ACK), 'acknowledgement');
    assert.match(await peer.success(), /^OK/);
  } finally {
    peer?.kill();
  }
}

// ---- encoders against the C implementation -------------------------------------------------------

test('tagMulti and AM headers: ucxx-ts encodes byte for byte what the C implementation of ucxx does', () => {
  for (const spec of [['0'], ['1', '0', '65536'], ['100x3'], ['101x2'], ['50x1', '1x0', '149x300', '16777216']]) {
    const ours = encodeTagMultiHeaders(expand(spec));
    const theirs = dump(['dump-tag-multi', ...spec], 'HEADER');
    assert.deepEqual(ours.map((h) => Buffer.from(h).toString('hex')), theirs.map((h) => Buffer.from(h).toString('hex')), spec.join(' '));
  }
  const cases: [number, 0 | 1, string | null, bigint, Uint8Array | null][] = [
    [0, 0, null, 0n, null],
    [1, 1, OWNER, 0x1004n, cPattern(9, 3)],
    [0, 0, 'x'.repeat(63), (1n << 64n) - 1n, null],
    [3, 1, null, 0n, cPattern(300, 4)],
  ];
  for (const [memoryType, policy, owner, id, userHeader] of cases) {
    const ours = encodeUcxxAmHeader({
      memoryType, memoryTypePolicy: policy === 1 ? 'errorOnUnsupported' : 'fallbackToHost',
      receiverCallbackInfo: owner === null ? null : { owner, id }, userHeader,
    });
    const [theirs] = dump(['dump-am', String(memoryType), String(policy), owner ?? '-', `0x${id.toString(16)}`,
      userHeader === null ? '-' : Buffer.from(userHeader).toString('hex')], 'AM');
    assert.equal(Buffer.from(ours).toString('hex'), Buffer.from(theirs as Uint8Array).toString('hex'));
  }
});

// ---- tagMulti ----------------------------------------------------------------------------------

const FRAME_CASES: { name: string; spec: string[] }[] = [
  { name: '1 frame of 0 B', spec: ['0'] },
  { name: '3 frames (1 B, 0 B, 64 KiB)', spec: ['1', '0', '65536'] },
  { name: '102 frames in two chained headers (0 B to 8 MiB)', spec: ['50x1', '1x0', '50x300', '8388608'] },
  { name: '250 frames in three headers', spec: ['250x17'] },
  { name: 'multi-MiB frames (4 MiB, 16 MiB, 1 B)', spec: ['4194304', '16777216', '1'] },
];

for (const role of ROLES) {
  test(`tagMulti with a C ucxx peer (${role}): 0 to 250 frames, 0 B to 16 MiB, both directions`, { timeout: 120_000 }, async () => {
    for (const { name, spec } of FRAME_CASES) {
      const sizes = expand(spec);
      await session(role, ['tagmulti', ...spec], async ({ worker, endpoint, peer }) => {
        const frames = sizes.map((size, i) => cPattern(size, 1000 + i));
        await peer.guard(endpoint.tagMultiSend(frames, TAG_TS_TO_C), `${name}: tagMultiSend`);
        // Received with a mask (the C side sends 0x...42 under 0x...00/~0xff), through the endpoint in one
        // role and the worker in the other.
        const receive = role === 'C server, ucxx-ts client'
          ? endpoint.tagMultiRecv(TAG_C_TO_TS & ~0xffn, ~0xffn & ((1n << 64n) - 1n))
          : worker.tagMultiRecv(TAG_C_TO_TS & ~0xffn, ~0xffn & ((1n << 64n) - 1n));
        const received = await peer.guard(receive, `${name}: tagMultiRecv`);
        assert.equal(received.length, sizes.length, `${name}: frame count`);
        received.forEach((frame, i) => assertCPattern(frame, sizes[i] as number, 2000 + i, `${name}: frame ${i} from C`));
      });
    }
  });
}

// ---- active messages ---------------------------------------------------------------------------

const AM_SIZES = [0, 1, 100, 8192, 65536, 4 * MiB];

for (const role of ROLES) {
  test(`ucxx active messages with a C ucxx peer (${role}): user headers, receiver callbacks, memory-type policy, both directions`,
    { timeout: 60_000 }, async () => {
      const n = AM_SIZES.length;
      const total = n + 2;
      const hasCallback = (k: number): boolean => k < n && k % 3 === 1;
      const userHeaderLength = (k: number): number => (k < n && k % 2 === 1 ? 8 + k : 0);
      const size = (k: number): number => (k < n ? AM_SIZES[k] as number : EXTRA_SIZE);
      const byCallback = new Map<bigint, UcxxAmMessage>();
      let callbacksDone!: () => void;
      const allCallbacks = new Promise<void>((resolve) => { callbacksDone = resolve; });
      const expectedCallbacks = Array.from({ length: total }, (_, k) => k).filter(hasCallback).length;

      const check = (k: number, message: UcxxAmMessage, endpoint: Endpoint): void => {
        const what = `AM ${k} from C`;
        assert.equal(message.error, null, `${what}: ${String(message.error)}`);
        assert.equal(message.endpoint, endpoint, `${what}: attributed to the connection's endpoint`);
        assert.equal(message.memoryType, k >= n ? 1 : 0, `${what}: memory type`);
        assert.equal(message.memoryTypePolicy, k === n ? 'errorOnUnsupported' : 'fallbackToHost');
        assert.deepEqual(message.receiverCallbackInfo, hasCallback(k) ? { owner: OWNER, id: CALLBACK_ID_BASE + BigInt(k) } : null);
        assertCPattern(message.userHeader, userHeaderLength(k), 4500 + k, `${what}: user header`);
        assertCPattern(message.data, size(k), 4000 + k, `${what}: data`);
        if (k >= n) assert.equal(message.rendezvous, true, `${what}: rendezvous`);
      };

      await session(role, ['am', ...AM_SIZES.map(String)], async ({ endpoint, peer }) => {
        // Sends: message n (CUDA memory type, errorOnUnsupported, rendezvous) is refused by the peer.
        const sends = Array.from({ length: total }, (_, k) => endpoint.amSend(cPattern(size(k), 3000 + k), {
          userHeader: userHeaderLength(k) > 0 ? cPattern(userHeaderLength(k), 3500 + k) : null,
          receiverCallbackInfo: hasCallback(k) ? { owner: OWNER, id: CALLBACK_ID_BASE + BigInt(k) } : null,
          memoryType: k >= n ? 1 : 0,
          memoryTypePolicy: k === n ? 'errorOnUnsupported' : 'fallbackToHost',
          protocol: k >= n ? 'rendezvous' : 'auto',
        }).promise);
        const outcomes = await peer.guard(Promise.allSettled(sends), 'AM sends');
        outcomes.forEach((outcome, k) => {
          if (k === n) {
            assert.equal(outcome.status, 'rejected', 'the refused AM');
            assert.ok((outcome as PromiseRejectedResult).reason instanceof UnsupportedError, String((outcome as PromiseRejectedResult).reason));
          } else {
            assert.equal(outcome.status, 'fulfilled', `AM ${k}: ${String((outcome as PromiseRejectedResult).reason)}`);
          }
        });
        // Receives: the endpoint's queue holds the others in the order C sent them.
        for (let k = 0; k < total; k++) {
          if (hasCallback(k)) continue;
          if (k === n) {
            await assert.rejects(peer.guard(endpoint.amRecv(), `amRecv ${k}`), (err: unknown) => {
              assert.ok(err instanceof Error && err.cause instanceof UnsupportedError, String(err));
              return true;
            });
            continue;
          }
          check(k, await peer.guard(endpoint.amRecv(), `amRecv ${k}`), endpoint);
        }
        await peer.guard(allCallbacks, 'receiver callbacks');
        for (const [id, message] of byCallback) check(Number(id - CALLBACK_ID_BASE), message, endpoint);
      }, (worker) => {
        for (let k = 0; k < total; k++) {
          if (!hasCallback(k)) continue;
          worker.registerAmReceiverCallback({ owner: OWNER, id: CALLBACK_ID_BASE + BigInt(k) }, (message) => {
            byCallback.set(message.receiverCallbackInfo?.id ?? -1n, message);
            if (byCallback.size === expectedCallbacks) callbacksDone();
          });
        }
      });
    });
}

// ---- malformed input from a peer ---------------------------------------------------------------

test('malformed tagMulti and AM headers from a C peer are typed errors, and later messages still arrive', { timeout: 60_000 }, async () => {
  await session('C server, ucxx-ts client', ['malformed'], async ({ endpoint, peer }) => {
    const receive = (options?: { cudaFrames?: 'error' | 'host' }): Promise<Uint8Array[]> =>
      peer.guard(endpoint.tagMultiRecv(TAG_BAD, undefined, options), 'tagMultiRecv');
    const formatError = (what: string) => (err: unknown): boolean => {
      assert.ok(err instanceof Error && err.cause instanceof UcxxHeaderFormatError, `${what}: ${String(err)}`);
      assert.equal(err.cause.code, 'UCXX_ERR_HEADER_FORMAT');
      return true;
    };
    await assert.rejects(receive(), formatError('nframes 101'));
    await assert.rejects(receive(), formatError('a 100-byte header'));
    await assert.rejects(receive(), formatError('a frame longer than announced'));
    await assert.rejects(receive(), formatError('a frame shorter than announced'));
    await assert.rejects(receive(), (err: unknown) => {
      assert.ok(err instanceof Error && err.cause instanceof UcxxCudaFrameError, String(err));
      assert.deepEqual(err.cause.frames, [0]);
      return true;
    });
    const [host] = await receive({ cudaFrames: 'host' });
    assertCPattern(host as Uint8Array, 8, 7, 'the CUDA-marked frame, into host memory');
    const valid = await receive();
    assert.equal(valid.length, 2);
    assertCPattern(valid[0] as Uint8Array, 5, 1, 'frame 0 after the malformed ones');
    assertCPattern(valid[1] as Uint8Array, 3, 2, 'frame 1 after the malformed ones');

    await assert.rejects(peer.guard(endpoint.amRecv(), 'amRecv'), formatError('AM flag 2'));
    await assert.rejects(peer.guard(endpoint.amRecv(), 'amRecv'), formatError('AM user-header size'));
    const ok = await peer.guard(endpoint.amRecv(), 'amRecv');
    assert.equal(Buffer.from(ok.userHeader).toString(), 'ok');
    assert.equal(Buffer.from(ok.data).toString(), 'data');
  });
});

// ---- ucxx-ts with itself -----------------------------------------------------------------------

test('ucxx-ts to ucxx-ts: tagMulti of 250 frames, amRecv cancellation, receiver-callback registration rules', { timeout: 60_000 }, async () => {
  await using context = new Context();
  const a = context.createWorker();
  const b = context.createWorker();
  const accepted: Endpoint[] = [];
  const listener = b.listen({ host: '127.0.0.1', port: 0 }, (ep) => accepted.push(ep));
  const ab = await deadline(a.connect('127.0.0.1', listener.port), 'connect');
  await deadline(ab.flush(), 'flush');
  const sizes = Array.from({ length: 250 }, (_, i) => (i * 997) % 5000);
  const frames = sizes.map((size, i) => cPattern(size, i));
  const [received] = await deadline(Promise.all([b.tagMultiRecv(9n), ab.tagMultiSend(frames, 9n).promise]), 'tagMulti');
  assert.equal(received.length, 250);
  received.forEach((frame, i) => assertCPattern(frame, sizes[i] as number, i, `frame ${i}`));

  // Several receives started ahead, one tag: each gets its own message.
  const ahead = [b.tagMultiRecv(10n), b.tagMultiRecv(10n), b.tagMultiRecv(10n)];
  for (let m = 0; m < 3; m++) void ab.tagMultiSend([cPattern(m + 1, m), cPattern(300, m)], 10n);
  const results = await deadline(Promise.all(ahead), 'receives started ahead');
  results.forEach((r, m) => { assertCPattern(r[0] as Uint8Array, m + 1, m, `message ${m}`); assertCPattern(r[1] as Uint8Array, 300, m, `message ${m}`); });

  failsAtOnce(() => ab.tagMultiSend([], 1n), RangeError);
  assert.throws(() => b.registerAmReceiverCallback({ owner: 'ucxx', id: 1 }, () => undefined), RangeError);
  b.registerAmReceiverCallback({ owner: 'app', id: 1 }, () => undefined);
  assert.throws(() => b.registerAmReceiverCallback({ owner: 'app', id: 1n }, () => undefined), AlreadyExistsError);

  // ucxx AM both ways, then an aborted and a closed-endpoint amRecv.
  const ba = accepted[0] as Endpoint;
  await deadline(ab.amSend(cPattern(10, 1), { userHeader: new Uint8Array([1, 2]) }), 'amSend');
  const got = await deadline(ba.amRecv(), 'amRecv');
  assertCPattern(got.data, 10, 1, 'AM data');
  assert.deepEqual([...got.userHeader], [1, 2]);
  // The largest header UCX takes (worker attribute max_am_header) goes through, eager and rendezvous; one
  // byte more is a RangeError before UCX sees it (UCX 1.13 aborts the process on it: "RTS is too big").
  let limit = 0;
  failsAtOnce(() => ab.amSend(null, { userHeader: new Uint8Array(1 << 20) }), (err: unknown) => {
    assert.ok(err instanceof RangeError, String(err));
    limit = Number(/at most (\d+)/.exec(err.message)?.[1]);
    return true;
  });
  assert.ok(limit > 14, `max_am_header ${limit}`);
  const fits = limit - 14; // the header without receiver-callback info takes 14 bytes besides the user header
  failsAtOnce(() => ab.amSend(null, { userHeader: new Uint8Array(fits + 1) }), RangeError);
  for (const protocol of ['eager', 'rendezvous'] as const) {
    await deadline(ab.amSend(cPattern(64, 5), { userHeader: cPattern(fits, 6), protocol }), `amSend with a ${fits}-byte user header`);
    const big = await deadline(ba.amRecv(), 'amRecv with the largest header');
    assertCPattern(big.userHeader, fits, 6, `${protocol}: the largest user header`);
    assertCPattern(big.data, 64, 5, `${protocol}: data`);
  }
  const controller = new AbortController();
  const aborted = ab.amRecv({ signal: controller.signal });
  controller.abort();
  await assert.rejects(aborted.promise, CanceledError);
  // amRecv is a Request: cancel() takes it out of the queue, and the next message goes to the next one.
  const cancelled = ab.amRecv();
  assert.equal(cancelled.completed, false);
  cancelled.cancel();
  assert.equal(cancelled.completed, true);
  await assert.rejects(cancelled.promise, CanceledError);
  await ba.amSend(new Uint8Array([7, 7]));
  const next = await deadline(ab.amRecv(), 'amRecv after a cancelled one');
  assert.deepEqual([...next.data], [7, 7]);
  const pending = ab.amRecv();
  const closing = ab.close();
  await assert.rejects(deadline(pending, 'amRecv on a closing endpoint'), CanceledError);
  await deadline(closing, 'close');
  listener.close();
});

test('tagMultiRecv is a Request: completed and value for a manual-progress loop, cancel() and a signal reject it with CanceledError and leave no receive posted', async () => {
  await using context = new Context();
  const worker = context.createWorker({ progressMode: 'manual' });
  const ep = worker.connectToAddress(worker.getAddress());
  const pending = ep.tagMultiRecv(31n);
  assert.equal(pending.completed, false);
  const sent = ep.tagMultiSend([new Uint8Array([1, 2, 3]), new Uint8Array(0), new Uint8Array(70_000).fill(9)], 31n);
  for (let i = 0; i < 100_000 && !(pending.completed && sent.completed); i++) {
    worker.progress();
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(pending.completed, true, 'the tagMulti receive did not complete under manual progress');
  const frames = pending.value as Uint8Array[];
  assert.deepEqual(frames.map((f) => f.byteLength), [3, 0, 70_000]);
  assert.deepEqual([...(frames[0] as Uint8Array)], [1, 2, 3]);
  assert.ok((frames[2] as Uint8Array).every((b) => b === 9));
  const cancelled = ep.tagMultiRecv(32n);
  cancelled.cancel();
  for (let i = 0; i < 1000 && !cancelled.completed; i++) {
    worker.progress();
    await new Promise((resolve) => setImmediate(resolve));
  }
  await assert.rejects(cancelled.promise, (err: unknown) => err instanceof CanceledError);
  const aborted = ep.tagMultiRecv(33n, undefined, { signal: AbortSignal.abort('stop') });
  for (let i = 0; i < 1000 && !aborted.completed; i++) {
    worker.progress();
    await new Promise((resolve) => setImmediate(resolve));
  }
  await assert.rejects(aborted.promise, (err: unknown) => err instanceof CanceledError);
  // Nothing of the cancelled ones is left posted: a later message on those tags is still in the worker.
  await ep.tagSend(new Uint8Array([7]), 32n);
  worker.progress();
  assert.ok(worker.tagProbe(32n) !== null, 'a cancelled tagMultiRecv took a later message');
  await ep.close();
});
