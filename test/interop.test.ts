/**
 * Interoperability with plain UCP: ucxx-ts exchanges tag, stream and active messages with a C program
 * that uses nothing but libucp (test/c/interop_peer.c), in both roles: the C program as the server
 * (ucxx-ts connects with `worker.connect`) and as the client (of a ucxx-ts `worker.listen`).
 *
 * Each exchange: ucxx-ts sends messages of sizes around UCX's eager/rendezvous switches, the C program
 * checks every byte (and the tag, the length, the AM header), sends its own messages back, ucxx-ts checks
 * those byte for byte, acknowledges, and the C program prints OK. The protocol, the tags and the AM
 * header layout are described at the top of interop_peer.c; the byte pattern is defined identically
 * there and in `patternByte` below. Needs gcc and libucx-dev: without them these tests fail (never skip).
 * The C program runs with an environment of PATH only (UCX's defaults).
 *
 * As the server, ucxx-ts flushes the accepted endpoint before its first send: see the note in exchange()
 * (UCX 1.13.1 fails or crashes on larger sends posted before an accepted endpoint's wireup).
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ConnectionRefusedError, ConnectionResetError, Context, EndpointTimeoutError, getUcxVersion, type AmMessage, type Endpoint, type Worker,
} from 'ucxx-ts';
import { within } from './helpers/deadline.js';
import { cleanEnvironment } from './helpers/c-peer.js';
import { ucxCompileFlags, ucxProfileOfRun } from './helpers/env.js';

const SOURCE = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'test', 'c', 'interop_peer.c');
const INSTALL_HINT =
  'The interop tests compile a C UCP peer (test/c/interop_peer.c) and need gcc and the UCX development ' +
  'files (<ucp/api/ucp.h>, libucp.so): install `gcc libucx-dev` (scripts/ensure-deps.sh does).';

const KiB = 1024;
const MiB = 1024 * KiB;
/** Around UCX's eager / rendezvous switches: empty, tiny, bcopy, zcopy/rndv on shm, large rndv. */
const SIZES = [0, 1, 8 * KiB, 64 * KiB, 16 * MiB];
/** UCP sends nothing for a 0-byte stream send (it completes at once), so stream skips size 0. */
const STREAM_SIZES = SIZES.filter((n) => n > 0);

const TAG_TS_TO_C = 0xfedcba9876543210n;
const TAG_C_TO_TS_BIT = 0x8000000000000000n;
const TAG_ACK = 0xacacacacacacacacn;
const AM_TS_TO_C = 17;
const AM_C_TO_TS = 18;
const AM_ACK = 19;
const HEADER_LEN = 16;
const SLACK = 64;
const SLACK_BYTE = 0xee;
const DONE = new TextEncoder().encode('DONE');

/** How long one step may take; a whole exchange takes well under a second when it works. */
const STEP_MS = 15_000;

type Api = 'tag' | 'stream' | 'am';
type Role = 'C server, ucxx-ts client' | 'ucxx-ts server, C client';

/**
 * Byte i of a pattern message with seed s, as in interop_peer.c:
 * (uint8_t)((i * 131 + s * 7 + (i >> 8)) ^ (i >> 16)). Only the low 8 bits matter, so the int32
 * wrap-around of JavaScript's `^` changes nothing.
 */
function patternByte(i: number, seed: number): number {
  return ((i * 131 + seed * 7 + (i >>> 8)) ^ (i >>> 16)) & 0xff;
}

function pattern(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = patternByte(i, seed);
  return out;
}

/** Throws with the first differing byte unless `actual` is exactly the pattern. */
function verifyPattern(actual: Uint8Array, length: number, seed: number, what: string): void {
  assert.equal(actual.byteLength, length, `${what}: ${actual.byteLength} bytes, expected ${length}`);
  for (let i = 0; i < length; i++) {
    if (actual[i] !== patternByte(i, seed)) {
      assert.fail(`${what} (${length} bytes): byte ${i} is 0x${(actual[i] ?? 0).toString(16)}, ` +
        `expected 0x${patternByte(i, seed).toString(16)}`);
    }
  }
}

/** The AM header: u32 k, u32 size (little endian), then 8 bytes of pattern seed `seedBase + k`. */
function amHeader(k: number, size: number, seedBase: number): Uint8Array {
  const header = new Uint8Array(HEADER_LEN);
  const view = new DataView(header.buffer);
  view.setUint32(0, k, true);
  view.setUint32(4, size, true);
  header.set(pattern(HEADER_LEN - 8, seedBase + k), 8);
  return header;
}

const seedTsToC = (k: number): number => 1 + 2 * k;
const seedCToTs = (k: number): number => 2 + 2 * k;
const tagCToTs = (k: number, size: number): bigint => TAG_C_TO_TS_BIT | (BigInt(size) << 16n) | BigInt(k);

// ---- the C peer --------------------------------------------------------------------------------

let binary: string | undefined;

/** Compiles interop_peer.c once per run; fails (with what to install) when it cannot. */
function peerBinary(): string {
  if (binary !== undefined) return binary;
  const dir = mkdtempSync(join(tmpdir(), 'ucxx-ts-interop-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, 'interop_peer');
  try {
    execFileSync('gcc', ['-O2', '-Wall', '-Wextra', '-fdiagnostics-color=never', SOURCE, '-o', out, ...ucxCompileFlags()],
      { stdio: 'pipe', timeout: 60_000 });
  } catch (err) {
    const e = err as { code?: string; stderr?: Buffer; message?: string };
    const why = e.code === 'ENOENT' ? 'gcc was not found on PATH'
      : `gcc could not build ${SOURCE}:\n${e.stderr?.toString() || String(e.message)}`;
    assert.fail(`${INSTALL_HINT}\n${why}`);
  }
  binary = out;
  return out;
}

class CPeer {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout = '';
  stderr = '';
  #lineWaiters: (() => void)[] = [];

  constructor(args: string[]) {
    // UCX's defaults: PATH and nothing else, so no UCX_* variable of this process (ucxx-ts sets some
    // for itself, see UCX_ENVIRONMENT_DEFAULTS) or of the shell reaches the C program.
    this.child = spawn(peerBinary(), args, { env: cleanEnvironment(), stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout?.on('data', (chunk: Buffer) => {
      this.stdout += chunk.toString();
      for (const wake of this.#lineWaiters.splice(0)) wake();
    });
    this.child.stderr?.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString();
    });
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => resolve({ code, signal }));
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  describe(): string {
    return `C peer ${this.child.spawnargs.slice(1).join(' ')}\n  stdout: ${this.stdout.trim() || '(none)'}\n` +
      `  stderr: ${this.stderr.trim() || '(none)'}`;
  }

  /**
   * `promise`, unless it fails, the C peer exits first (an early exit is its failure: it prints FAIL and
   * exits 1) or `ms` pass (then SIGALRM makes the peer print the phase it is stuck in). Whichever comes
   * first decides; the error carries what the peer printed.
   */
  async guard<T>(promise: PromiseLike<T>, what: string, ms = STEP_MS): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const outcome = new Promise<T>((resolve, reject) => {
      Promise.resolve(promise).then(resolve, reject);
      void this.exited.then(({ code, signal }) => {
        reject(new Error(`${what}: the C peer exited (code ${code}, signal ${signal}) first`));
      });
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

  /** The port a server peer printed ("PORT <n>"). */
  async port(): Promise<number> {
    const found = (): number | undefined => {
      const m = /^PORT (\d+)$/m.exec(this.stdout);
      return m === null ? undefined : Number(m[1]);
    };
    const wait = (async () => {
      for (;;) {
        const port = found();
        if (port !== undefined) return port;
        await new Promise<void>((resolve) => this.#lineWaiters.push(resolve));
      }
    })();
    return this.guard(wait, 'waiting for the C server to print its port');
  }

  /** Waits for the peer to exit and asserts that it printed OK and exited 0; returns the OK line. */
  async success(): Promise<string> {
    const { code, signal } = await this.guard(this.exited, 'waiting for the C peer to finish');
    assert.equal(signal, null, `the C peer was killed by ${signal}\n${this.describe()}`);
    assert.equal(code, 0, `the C peer exited with ${code}\n${this.describe()}`);
    const ok = /^OK.*$/m.exec(this.stdout);
    assert.ok(ok !== null, `the C peer did not print OK\n${this.describe()}`);
    assert.doesNotMatch(this.stdout, /^FAIL/m, this.describe());
    return ok[0];
  }

  kill(): void {
    if (this.running) this.child.kill('SIGKILL');
  }
}

// ---- the ucxx-ts side of each protocol ---------------------------------------------------------

interface Exchange {
  worker: Worker;
  endpoint: Endpoint;
  peer: CPeer;
  sizes: readonly number[];
}

/** Runs before the connection exists (what must be ready when the first message arrives). */
interface Side {
  prepare?(worker: Worker, sizes: readonly number[]): void;
  run(x: Exchange): Promise<string[]>;
}

/** Tag: odd messages with tagSendSync, even ones with tagSend; C's tags have bit 63 set. */
const tagSide: Side = {
  async run({ endpoint, peer, sizes }) {
    const seen: string[] = [];
    const sends = sizes.map((size, k) => {
      const data = pattern(size, seedTsToC(k));
      const tag = TAG_TS_TO_C + BigInt(k);
      return k % 2 === 1 ? endpoint.tagSendSync(data, tag) : endpoint.tagSend(data, tag);
    });
    const receives = sizes.map(async (size, k) => {
      const buffer = new Uint8Array(size + SLACK).fill(SLACK_BYTE);
      const info = await endpoint.tagRecv(buffer, tagCToTs(k, size));
      assert.equal(info.senderTag, tagCToTs(k, size), `tag message ${k}: sender tag`);
      assert.equal(info.length, size, `tag message ${k}: length`);
      verifyPattern(buffer.subarray(0, size), size, seedCToTs(k), `tag message ${k} from C`);
      assert.ok(buffer.subarray(size).every((b) => b === SLACK_BYTE), `tag message ${k}: bytes past the end written`);
      seen.push(`${size}`);
    });
    const received = Promise.all(receives);
    received.catch(() => undefined); // observed below; no unhandled rejection while the sends are awaited
    await peer.guard(Promise.all(sends), 'tag sends to C');
    await peer.guard(received, 'tag messages from C');
    await peer.guard(endpoint.tagSend(DONE, TAG_ACK), 'tag acknowledgement');
    return seen;
  },
};

/** Stream: one WAITALL receive of exactly each message's size, in order. */
const streamSide: Side = {
  async run({ endpoint, peer, sizes }) {
    const seen: string[] = [];
    const sends = sizes.map((size, k) => endpoint.streamSend(pattern(size, seedTsToC(k))));
    for (const [k, size] of sizes.entries()) {
      const buffer = new Uint8Array(size).fill(SLACK_BYTE);
      const received = await peer.guard(endpoint.streamRecv(buffer, { waitAll: true }), `stream message ${k} from C`);
      assert.equal(received, size, `stream message ${k}: a WAITALL receive completed with ${received} bytes`);
      verifyPattern(buffer, size, seedCToTs(k), `stream message ${k} from C`);
      seen.push(`${size}`);
    }
    await peer.guard(Promise.all(sends), 'stream sends to C');
    await peer.guard(endpoint.streamSend(DONE), 'stream acknowledgement');
    return seen;
  },
};

/**
 * AM: C's messages (id 18) are taken by `worker.setAmHandler` (handler) or `worker.amMessages`
 * (iterator); rendezvous ones are fetched with `msg.receive()`.
 */
function amSide(consumer: 'handler' | 'iterator'): Side {
  let received: Promise<string[]> | undefined;
  return {
    prepare(worker, sizes) {
      const results: Promise<string>[] = [];
      let resolveAll!: () => void;
      const all = new Promise<void>((resolve) => { resolveAll = resolve; });
      const check = async (msg: AmMessage): Promise<string> => {
        assert.equal(msg.id, AM_C_TO_TS);
        assert.equal(msg.header.byteLength, HEADER_LEN, 'AM header length');
        const view = new DataView(msg.header.buffer, msg.header.byteOffset, msg.header.byteLength);
        const k = view.getUint32(0, true);
        const size = sizes[k];
        assert.ok(size !== undefined, `AM header names message ${k} of ${sizes.length}`);
        assert.equal(view.getUint32(4, true), size, `AM ${k}: the size in the header`);
        verifyPattern(msg.header.subarray(8), HEADER_LEN - 8, 200 + k, `AM ${k} header`);
        assert.equal(msg.length, size, `AM ${k}: length`);
        const rendezvous = msg.rendezvous;
        const data = await msg.receive();
        verifyPattern(data, size, seedCToTs(k), `AM ${k} from C (${rendezvous ? 'rendezvous' : 'eager'})`);
        return `${k}:${rendezvous ? 'rndv' : 'eager'}`;
      };
      const take = (msg: AmMessage): void => {
        // receive() is called synchronously, inside the handler, for a handler; later for the iterator.
        const result = check(msg);
        result.catch(() => undefined);
        results.push(result);
        if (results.length === sizes.length) resolveAll();
      };
      if (consumer === 'handler') {
        worker.setAmHandler(AM_C_TO_TS, async (msg) => { take(msg); });
      } else {
        const iterator = worker.amMessages(AM_C_TO_TS);
        void (async () => {
          for (let i = 0; i < sizes.length; i++) {
            const next = await iterator.next();
            if (next.done === true) return;
            take(next.value);
          }
          await iterator.return?.();
        })();
      }
      received = all.then(() => Promise.all(results));
      received.catch(() => undefined); // observed in run()
    },
    async run({ endpoint, peer, sizes }) {
      const sends = sizes.map((size, k) =>
        endpoint.amSend(AM_TS_TO_C, amHeader(k, size, 100), pattern(size, seedTsToC(k))));
      await peer.guard(Promise.all(sends), 'AM sends to C');
      const seen = await peer.guard(received as Promise<string[]>, 'AM messages from C');
      await peer.guard(endpoint.amSend(AM_ACK, DONE, null), 'AM acknowledgement');
      return seen.sort();
    },
  };
}

// ---- the tests ----------------------------------------------------------------------------------

async function exchange(api: Api, role: Role, side: Side, sizes: readonly number[]): Promise<{ ok: string; seen: string[] }> {
  const sizeArgs = sizes.map(String);
  await using context = new Context();
  const worker = context.createWorker();
  side.prepare?.(worker, sizes);
  let peer: CPeer | undefined;
  try {
    let endpoint: Endpoint;
    if (role === 'C server, ucxx-ts client') {
      peer = new CPeer(['server', api, ...sizeArgs]);
      const port = await peer.port();
      endpoint = await peer.guard(worker.connect('127.0.0.1', port, { errorHandling: 'peer' }), `connecting to the C server on port ${port}`);
    } else {
      const listener = worker.listen({ host: '127.0.0.1', port: 0 });
      const accepted = listener[Symbol.asyncIterator]().next();
      peer = new CPeer(['client', '127.0.0.1', String(listener.port), api, ...sizeArgs]);
      const next = await peer.guard(accepted, 'accepting the C client');
      assert.ok(next.done !== true, 'the listener ended without a connection');
      endpoint = next.value;
      listener.close();
      // Wait for the endpoint's wireup before the first send. UCX 1.13.1 with UCX_MM_ERROR_HANDLING=y
      // (a ucxx-ts default) fails a send of more than ~100 bytes posted on an accepted endpoint before
      // wireup completes (UCS_ERR_INVALID_PARAM, "Invalid am_short length"), or crashes the process
      // (SIGSEGV, at 8 KiB); a plain C program shows the same. ucxx-ts hands out accepted endpoints at once.
      await peer.guard(endpoint.flush(), 'flushing the accepted endpoint');
    }
    const seen = await side.run({ worker, endpoint, peer, sizes });
    const ok = await peer.success();
    return { ok, seen };
  } finally {
    peer?.kill();
  }
}

const ROLES: Role[] = ['C server, ucxx-ts client', 'ucxx-ts server, C client'];

for (const role of ROLES) {
  test(`tag messages with a C UCP peer (${role}): 0 B to 16 MiB, 64-bit tags, both directions`, { timeout: 30_000 }, async () => {
    const { ok, seen } = await exchange('tag', role, tagSide, SIZES);
    assert.equal(ok, 'OK');
    assert.deepEqual(seen.map(Number).sort((a, b) => a - b), SIZES);
  });
}

for (const role of ROLES) {
  test(`stream with a C UCP peer (${role}): 1 B to 16 MiB, both directions`, { timeout: 30_000 }, async () => {
    const { ok, seen } = await exchange('stream', role, streamSide, STREAM_SIZES);
    assert.equal(ok, 'OK');
    assert.deepEqual(seen.map(Number), STREAM_SIZES);
  });
}

for (const role of ROLES) {
  const consumer = role === 'C server, ucxx-ts client' ? 'handler' : 'iterator';
  test(`active messages with a C UCP peer (${role}, ${consumer}): 0 B to 16 MiB, eager and rendezvous, both directions`,
    { timeout: 30_000 }, async () => {
      const { ok, seen } = await exchange('am', role, amSide(consumer), SIZES);
      // The C side saw both protocols from ucxx-ts...
      const m = /^OK eager=(\d+) rndv=(\d+)$/.exec(ok);
      assert.ok(m !== null, `unexpected OK line: ${ok}`);
      const [eager, rndv] = [Number(m[1]), Number(m[2])];
      assert.equal(eager + rndv, SIZES.length);
      assert.ok(eager >= 1 && rndv >= 1, `C received ${eager} eager and ${rndv} rendezvous AMs: expected both kinds`);
      // ...and ucxx-ts saw both from C: every message checked, the largest by rendezvous, the smallest eager.
      const kinds = new Map(seen.map((s) => s.split(':') as [string, string]));
      assert.equal(kinds.size, SIZES.length, `every message once: ${seen.join(' ')}`);
      assert.equal(kinds.get(String(SIZES.indexOf(16 * MiB))), 'rndv', `kinds seen: ${seen.join(' ')}`);
      assert.equal(kinds.get(String(SIZES.indexOf(0))), 'eager', `kinds seen: ${seen.join(' ')}`);
    });
}

test("a C server that asks for PEER error handling, and ucxx-ts's default connect: reached where the default is PEER (1.19 on); refused with an error naming { errorHandling: 'peer' } where it is NONE on this host (1.13)", async () => {
  const defaultIsPeer = ucxProfileOfRun(getUcxVersion()).defaultErrorMode === 'peer';
  await using context = new Context();
  const worker = context.createWorker();
  const peer = new CPeer(['server', 'tag', '8']);
  try {
    const port = await peer.port();
    const outcome = await within(worker.connect('127.0.0.1', port).then(
      async (endpoint) => {
        // UCX may report a refusal at the first operation that needs the connection.
        await within(endpoint.flush(), 5000, 'flush on the default endpoint');
        return endpoint;
      },
    ).catch((err: unknown) => err as Error), 10_000, 'the default connect to a PEER server');
    if (defaultIsPeer) {
      assert.ok(!(outcome instanceof Error), `the default connect failed: ${String(outcome)}\n${peer.describe()}`);
      await within(outcome.close(), 5000, 'close');
    } else {
      // Refused; or, when the C program exits on its failed accept before UCX answered, reset or timed out.
      assert.ok(outcome instanceof ConnectionRefusedError || outcome instanceof ConnectionResetError || outcome instanceof EndpointTimeoutError,
        `expected ConnectionRefusedError, ConnectionResetError or EndpointTimeoutError, got ${String(outcome)}\n${peer.describe()}`);
      assert.match(outcome.message, /used errorHandling 'none'.*connect with \{ errorHandling: 'peer' \}/s);
    }
  } finally {
    peer.kill();
  }
});
