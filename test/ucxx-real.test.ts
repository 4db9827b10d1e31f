/**
 * ucxx-ts against real ucxx: a C++ peer (test/cpp/ucxx_real_peer.cpp) written with libucxx's public
 * API and built against the libucxx-cu12 0.52 wheel, on the libucx-cu12 wheel's UCX (this run must load
 * that UCX: scripts/test.sh --ucx=wheel). Both roles: a libucxx server with a ucxx-ts client, and a
 * ucxx-ts listener with a libucxx client. Every byte is checked on both sides: the RemoteKey API (each
 * side's serialized key rebuilt by the other, memPut/memGet into the other's region), tagMulti, ucxx
 * active messages with user headers and receiver callbacks, and a ucxx peer killed mid-transfer. ucxx
 * accepts and connects with error handling on, ucxx-ts's default from UCX 1.19 on: every test connects
 * with no options but one, which names { errorHandling: 'peer' }.
 */
import { test, type TestContext } from 'node:test';
import { strict as assert } from 'node:assert';
import {
  ConnectionResetError, Context, UcxError, createRemoteKeyFromMemoryHandle, createRemoteKeyFromSerialized, getUcxVersion,
  type Endpoint, type EndpointOptions, type UcxxAmMessage, type Worker,
} from 'ucxx-ts';
import { CPeer } from './helpers/c-peer.js';
import { assertCPattern, cPattern } from './helpers/pattern.js';
import { compileUcxxPeer, ucxxGate, type UcxxWheel } from './helpers/ucxx-wheel.js';

const TAG_TS_TO_C = 0x7563787800000001n;
const TAG_C_TO_TS = 0x7563787800000142n;
const TAG_KEY_TS = 0x7563787800000201n;
const TAG_KEY_C = 0x7563787800000202n;
const TAG_ACK = 0xacacacacacacacacn;
const DONE = new TextEncoder().encode('DONE');
const OWNER = 'ucxx-ts-test';
const CALLBACK_ID_BASE = 0x1000n;
const MiB = 1 << 20;
// As in ucxx_real_peer.cpp.
const RMA_LEN = 65536 + 3;
const PUT_OFF = 4096;
const GET_OFF = 300000;
const TS_PUT_OFF = 8192 + 1;
// ucxx-ts's defaults: PEER error handling from UCX 1.19 on (these files run on 1.19+), as ucxx's.
const DEFAULTS: EndpointOptions = {};

type Role = 'libucxx server, ucxx-ts client' | 'ucxx-ts listener, libucxx client';
const ROLES: Role[] = ['libucxx server, ucxx-ts client', 'ucxx-ts listener, libucxx client'];

/** The wheels and the compiled peer, or undefined after the test skipped (ucxxGate says why). */
function setUp(t: TestContext): { wheel: UcxxWheel; binary: string } | undefined {
  const wheel = ucxxGate(t, getUcxVersion());
  if (wheel === undefined) return undefined;
  return { wheel, binary: compileUcxxPeer(wheel, 'ucxx_real_peer') };
}

interface Session {
  worker: Worker;
  endpoint: Endpoint;
  peer: CPeer;
}

/**
 * Connects `worker` and a ucxx peer running `scenario` in `role`; `options` are the ucxx-ts side's
 * endpoint options (undefined: none at all, the default connect).
 */
async function open(binary: string, worker: Worker, role: Role, scenario: string[], options: EndpointOptions | undefined): Promise<Session> {
  if (role === 'libucxx server, ucxx-ts client') {
    const peer = new CPeer(binary, ['server', ...scenario]);
    try {
      const port = await peer.port();
      const connecting = options === undefined ? worker.connect('127.0.0.1', port) : worker.connect('127.0.0.1', port, options);
      const endpoint = await peer.guard(connecting, 'connecting to the libucxx server');
      return { worker, endpoint, peer };
    } catch (err) {
      peer.kill();
      throw err;
    }
  }
  const listener = worker.listen({ host: '127.0.0.1', port: 0, ...(options === undefined ? {} : { endpoint: options }) });
  const accepted = listener[Symbol.asyncIterator]().next();
  const peer = new CPeer(binary, ['client', '127.0.0.1', String(listener.port), ...scenario]);
  try {
    const next = await peer.guard(accepted, 'accepting the libucxx client');
    assert.ok(next.done !== true);
    const endpoint = next.value;
    // Let the accepted endpoint's wireup finish before sending on it (as in ucxx-interop.test.ts).
    await peer.guard(endpoint.flush(), 'flushing the accepted endpoint');
    return { worker, endpoint, peer };
  } catch (err) {
    peer.kill();
    throw err;
  } finally {
    listener.close();
  }
}

/** Runs `body` on a session, then sends DONE and checks that the peer printed OK and exited 0. */
async function session(
  binary: string, role: Role, scenario: string[], body: (s: Session) => Promise<void>,
  options: { endpoint?: EndpointOptions | undefined; prepare?: (worker: Worker) => void } = { endpoint: DEFAULTS },
): Promise<string> {
  await using context = new Context();
  const worker = context.createWorker();
  options.prepare?.(worker);
  const s = await open(binary, worker, role, scenario, 'endpoint' in options ? options.endpoint : DEFAULTS);
  try {
    try {
      await body(s);
    } catch (err) {
      // Show what the peer was doing (SIGALRM makes it print its phase).
      if (s.peer.running) s.peer.child.kill('SIGALRM');
      await Promise.race([s.peer.exited, new Promise((resolve) => setTimeout(resolve, 1000))]);
      if (err instanceof Error && !err.message.includes('C peer')) err.message += `\n${s.peer.describe()}`;
      throw err;
    }
    await s.peer.guard(s.endpoint.tagSend(DONE, TAG_ACK), 'sending DONE');
    const out = await s.peer.success();
    await s.endpoint.close();
    return out;
  } finally {
    s.peer.kill();
  }
}

/** An 8-byte length, then the bytes (how ucxx_real_peer passes a serialized key). */
async function sendSized(endpoint: Endpoint, bytes: Uint8Array, tag: bigint): Promise<void> {
  const length = new Uint8Array(8);
  new DataView(length.buffer).setBigUint64(0, BigInt(bytes.byteLength), true);
  await Promise.all([endpoint.tagSend(length, tag), endpoint.tagSend(bytes, tag)]);
}

async function recvSized(endpoint: Endpoint, tag: bigint): Promise<Uint8Array> {
  const length = new Uint8Array(8);
  assert.equal((await endpoint.tagRecv(length, tag)).length, 8);
  const n = Number(new DataView(length.buffer).getBigUint64(0, true));
  assert.ok(n > 0 && n <= MiB, `key length ${n}`);
  const bytes = new Uint8Array(n);
  assert.equal((await endpoint.tagRecv(bytes, tag)).length, n);
  return bytes;
}

/** Sends 8 bytes of seed 1 and checks that the peer (scenario ping) sends them back. */
async function ping({ endpoint, peer }: Session): Promise<void> {
  const back = new Uint8Array(8);
  const receiving = endpoint.tagRecv(back, TAG_C_TO_TS);
  await peer.guard(endpoint.tagSend(cPattern(8, 1), TAG_TS_TO_C), 'ping: send');
  assert.equal((await peer.guard(receiving, 'ping: receive')).length, 8);
  assertCPattern(back, 8, 1, 'ping: the bytes sent back');
}

/** After a killed peer: a fresh libucxx peer in `role` on the same worker pings, gets DONE and exits 0. */
async function servesNextPeer(binary: string, worker: Worker, role: Role): Promise<void> {
  const next = await open(binary, worker, role, ['ping'], DEFAULTS);
  try {
    await ping(next);
    await next.peer.guard(next.endpoint.tagSend(DONE, TAG_ACK), 'sending DONE');
    await next.peer.success();
  } finally {
    next.peer.kill();
  }
}

// ---- connecting ---------------------------------------------------------------------------------

// libucxx accepts with error handling on, which is the default from UCX 1.19 on (this file runs on 1.19+).
test('the default connect (no options) reaches a libucxx server on this host', async (t) => {
  const setup = setUp(t);
  if (setup === undefined) return;
  await session(setup.binary, 'libucxx server, ucxx-ts client', ['ping'], ping, { endpoint: undefined });
});

for (const role of ROLES) {
  test(`connect with { errorHandling: 'peer' } (${role}): a tag message both ways`, async (t) => {
    const setup = setUp(t);
    if (setup === undefined) return;
    await session(setup.binary, role, ['ping'], ping, { endpoint: { errorHandling: 'peer' } });
  });
}

// ---- RemoteKey ----------------------------------------------------------------------------------

const REGION = MiB;

for (const role of ROLES) {
  test(`RemoteKey (${role}): each side rebuilds the other's serialized key and puts and gets into its region`, { timeout: 60_000 }, async (t) => {
    const setup = setUp(t);
    if (setup === undefined) return;
    const out = await session(setup.binary, role, ['rkey', String(REGION)], async ({ worker, endpoint, peer }) => {
      // This side's region: seed 31 everywhere but RMA_LEN bytes of seed 30 at GET_OFF (the peer gets those).
      const region = worker.context.createMemoryHandle(REGION);
      const memory = region.view();
      const initial = cPattern(REGION, 31);
      initial.set(cPattern(RMA_LEN, 30), GET_OFF);
      memory.set(initial);
      await peer.guard(sendSized(endpoint, createRemoteKeyFromMemoryHandle(region).serialize(), TAG_KEY_TS), 'sending this key');
      const theirs = createRemoteKeyFromSerialized(endpoint, await peer.guard(recvSized(endpoint, TAG_KEY_C), 'receiving the libucxx key'));
      assert.equal(theirs.getSize(), REGION);

      // The peer's region is seed 10 throughout (absolute offsets).
      const back = new Uint8Array(RMA_LEN);
      await peer.guard(endpoint.memGet(back, theirs, 500_000), 'memGet from the libucxx region');
      assert.deepEqual(Buffer.from(back), Buffer.from(cPattern(REGION, 10).subarray(500_000, 500_000 + RMA_LEN)), 'memGet bytes');
      await peer.guard(endpoint.memPut(cPattern(RMA_LEN, 40), theirs, TS_PUT_OFF), 'memPut into the libucxx region');
      await peer.guard(endpoint.flush(), 'flush');

      // The peer's put and get into this region.
      const cput = new Uint8Array(4);
      await peer.guard(endpoint.tagRecv(cput, TAG_C_TO_TS), 'waiting for the peer to finish its put and get');
      assert.equal(Buffer.from(cput).toString(), 'CPUT');
      assertCPattern(memory.subarray(PUT_OFF, PUT_OFF + RMA_LEN), RMA_LEN, 20, 'what libucxx put into this region');
      const expected = new Uint8Array(initial);
      expected.set(cPattern(RMA_LEN, 20), PUT_OFF);
      assert.ok(Buffer.from(memory).equals(Buffer.from(expected)), 'this region outside the put is unchanged');
      theirs.close();
    });
    assert.match(out, new RegExp(`^TS KEY size ${REGION} `, 'm'));
    assert.match(out, /^RKEY OK$/m);
  });
}

// ---- tagMulti -----------------------------------------------------------------------------------

/** Frame specs as ucxx_real_peer reads them: a size, or COUNTxSIZE. */
function expand(spec: readonly string[]): number[] {
  return spec.flatMap((s) => {
    const m = /^(\d+)x(\d+)$/.exec(s);
    return m === null ? [Number(s)] : new Array<number>(Number(m[1])).fill(Number(m[2]));
  });
}

const FRAME_CASES: { name: string; spec: string[] }[] = [
  { name: '3 frames (1 B, 0 B, 64 KiB)', spec: ['1', '0', '65536'] },
  { name: '150 frames in two chained headers (0 B to 4 MiB)', spec: ['50x1', '1x0', '98x300', '4194304'] },
];

for (const role of ROLES) {
  for (const { name, spec } of FRAME_CASES) {
    test(`tagMulti (${role}): ${name}, both directions`, { timeout: 60_000 }, async (t) => {
      const setup = setUp(t);
      if (setup === undefined) return;
      const sizes = expand(spec);
      const out = await session(setup.binary, role, ['tagmulti', ...spec], async ({ endpoint, peer }) => {
        const frames = sizes.map((size, i) => cPattern(size, 1000 + i));
        await peer.guard(endpoint.tagMultiSend(frames, TAG_TS_TO_C), 'tagMultiSend');
        const received = await peer.guard(endpoint.tagMultiRecv(TAG_C_TO_TS), 'tagMultiRecv');
        assert.equal(received.length, sizes.length, 'frame count');
        received.forEach((frame, i) => assertCPattern(frame, sizes[i] as number, 2000 + i, `frame ${i} from libucxx`));
      });
      assert.match(out, new RegExp(`^TAGMULTI RECEIVED ${sizes.length}$`, 'm'));
    });
  }
}

// ---- active messages ----------------------------------------------------------------------------

const AM_SIZES = [0, 1, 100, 8192, 65536, 4 * MiB];
const hasCallback = (k: number): boolean => k % 3 === 1;
const userHeaderLength = (k: number): number => (k % 2 === 1 ? 8 + k : 0);

for (const role of ROLES) {
  test(`ucxx active messages (${role}): user headers, amRecv and receiver callbacks, both directions`, { timeout: 60_000 }, async (t) => {
    const setup = setUp(t);
    if (setup === undefined) return;
    const n = AM_SIZES.length;
    const byCallback = new Map<number, UcxxAmMessage>();
    const expectedCallbacks = AM_SIZES.filter((_, k) => hasCallback(k)).length;
    let callbacksDone!: () => void;
    const allCallbacks = new Promise<void>((resolve) => { callbacksDone = resolve; });

    const check = (k: number, message: UcxxAmMessage, endpoint: Endpoint): void => {
      const what = `AM ${k} from libucxx`;
      assert.equal(message.error, null, `${what}: ${String(message.error)}`);
      assert.equal(message.endpoint, endpoint, `${what}: attributed to the connection's endpoint`);
      assert.equal(message.memoryType, 0, `${what}: memory type`);
      assert.equal(message.memoryTypePolicy, 'fallbackToHost', `${what}: policy`);
      assert.deepEqual(message.receiverCallbackInfo, hasCallback(k) ? { owner: OWNER, id: CALLBACK_ID_BASE + BigInt(k) } : null, what);
      assertCPattern(message.userHeader, userHeaderLength(k), 4500 + k, `${what}: user header`);
      assertCPattern(message.data, AM_SIZES[k] as number, 4000 + k, `${what}: data`);
    };

    const out = await session(setup.binary, role, ['am', ...AM_SIZES.map(String)], async ({ endpoint, peer }) => {
      const sends = AM_SIZES.map((size, k) => endpoint.amSend(cPattern(size, 3000 + k), {
        userHeader: userHeaderLength(k) > 0 ? cPattern(userHeaderLength(k), 3500 + k) : null,
        receiverCallbackInfo: hasCallback(k) ? { owner: OWNER, id: CALLBACK_ID_BASE + BigInt(k) } : null,
      }).promise);
      await peer.guard(Promise.all(sends), 'amSend');
      for (let k = 0; k < n; k++) {
        if (hasCallback(k)) continue;
        check(k, await peer.guard(endpoint.amRecv(), `amRecv ${k}`), endpoint);
      }
      await peer.guard(allCallbacks, 'receiver callbacks');
      assert.deepEqual([...byCallback.keys()].sort(), AM_SIZES.map((_, k) => k).filter(hasCallback));
      for (const [k, message] of byCallback) check(k, message, endpoint);
    }, {
      endpoint: DEFAULTS,
      prepare: (worker) => {
        for (let k = 0; k < n; k++) {
          if (!hasCallback(k)) continue;
          worker.registerAmReceiverCallback({ owner: OWNER, id: CALLBACK_ID_BASE + BigInt(k) }, (message) => {
            byCallback.set(Number((message.receiverCallbackInfo?.id ?? 0n) - CALLBACK_ID_BASE), message);
            if (byCallback.size === expectedCallbacks) callbacksDone();
          });
        }
      },
    });
    assert.match(out, new RegExp(`^AM RECEIVED ${n}$`, 'm'));
  });
}

// ---- a ucxx peer killed mid-transfer ------------------------------------------------------------

/** Asserts that `outcome` is a rejection with a UcxError (a typed UCS status), and returns the error. */
function typedFailure(outcome: PromiseSettledResult<unknown>, what: string): UcxError {
  assert.equal(outcome.status, 'rejected', `${what}: completed although the peer was killed`);
  const reason = (outcome as PromiseRejectedResult).reason as unknown;
  assert.ok(reason instanceof UcxError, `${what}: ${String(reason)} is not a UcxError`);
  assert.equal(typeof reason.status, 'number', `${what}: status`);
  return reason;
}

const KILL_SIZE = 16 * MiB;

/** A tag the libucxx sink never receives: a rendezvous send on it waits for the receiver until the end. */
const TAG_NEVER_RECEIVED = 0x7563787800000999n;

test('a libucxx server killed while ucxx-ts sends to it: the sends reject with typed errors, the worker serves the next peer', { timeout: 60_000 }, async (t) => {
  const setup = setUp(t);
  if (setup === undefined) return;
  await using context = new Context();
  const worker = context.createWorker();
  const { endpoint, peer } = await open(setup.binary, worker, 'libucxx server, ucxx-ts client', ['sink', String(KILL_SIZE)], DEFAULTS);
  try {
    await peer.line(/^READY$/m, 'waiting for the sink');
    const errors: UcxError[] = [];
    endpoint.on('error', (err) => errors.push(err));
    const closed = new Promise<void>((resolve) => endpoint.once('close', resolve));
    const data = cPattern(KILL_SIZE, 5);
    // The sink takes the first message; the rest go on a tag it never receives, so each is certain to be
    // in flight (a rendezvous waiting for its receiver) when the peer dies.
    await peer.guard(endpoint.tagSend(data, TAG_TS_TO_C), 'the first message');
    const sends = Array.from({ length: 8 }, () => endpoint.tagSend(data, TAG_NEVER_RECEIVED).promise);
    const multi = endpoint.tagMultiSend([data, data], TAG_NEVER_RECEIVED).promise;
    await new Promise((resolve) => setTimeout(resolve, 200));
    peer.kill();
    const outcomes = await Promise.allSettled([...sends, multi]);
    for (const [i, o] of outcomes.entries()) typedFailure(o, `send ${i}`);
    await closed;
    assert.ok(errors.every((err) => err instanceof UcxError), String(errors));
  } finally {
    peer.kill();
  }
  // The worker goes on: a fresh libucxx peer on it.
  await servesNextPeer(setup.binary, worker, 'libucxx server, ucxx-ts client');
});

test('a libucxx client killed while ucxx-ts receives from it and reads its memory: typed errors, the worker serves the next peer', { timeout: 60_000 }, async (t) => {
  const setup = setUp(t);
  if (setup === undefined) return;
  await using context = new Context();
  const worker = context.createWorker();
  const { endpoint, peer } = await open(setup.binary, worker, 'ucxx-ts listener, libucxx client', ['source', String(KILL_SIZE)], DEFAULTS);
  try {
    const key = createRemoteKeyFromSerialized(endpoint, await peer.guard(recvSized(endpoint, TAG_KEY_C), 'receiving the key'));
    await peer.line(/^READY$/m, 'waiting for the source');
    const first = new Uint8Array(KILL_SIZE);
    await peer.guard(endpoint.tagRecv(first, TAG_C_TO_TS), 'the first message');
    assertCPattern(first, KILL_SIZE, 51, 'the first message');
    const receives = Array.from({ length: 4 }, () => endpoint.tagRecv(new Uint8Array(KILL_SIZE), TAG_C_TO_TS).promise);
    const gets = Array.from({ length: 4 }, () => endpoint.memGet(new Uint8Array(KILL_SIZE), key, 0).promise);
    const multi = endpoint.tagMultiRecv(TAG_KEY_TS);
    const am = endpoint.amRecv();
    peer.kill();
    const outcomes = await Promise.allSettled([...receives, ...gets]);
    // What completed before the kill is whole; what did not is a typed error.
    for (const [i, o] of outcomes.entries()) if (o.status === 'rejected') typedFailure(o, `operation ${i}`);
    typedFailure((await Promise.allSettled([multi]))[0] as PromiseSettledResult<unknown>, 'tagMultiRecv');
    typedFailure((await Promise.allSettled([am]))[0] as PromiseSettledResult<unknown>, 'amRecv');
    assert.ok(outcomes.some((o) => o.status === 'rejected'), 'nothing failed although the peer was killed');
  } finally {
    peer.kill();
  }
  await servesNextPeer(setup.binary, worker, 'ucxx-ts listener, libucxx client');
});

// ucxx's basic.cpp shape: the libucxx server answers (a tag message and a tagMulti) and closes at once,
// so ucxx-ts's receives are often posted after the close reached it. What is in the worker must be
// delivered; a message UCX dropped with the connection (fragments still unread in the TCP socket when
// it handled the disconnect, docs/ucxx-python.md) is a ConnectionResetError, never a ClosedError.
test('a libucxx server that answers and closes at once: the tag answer and the tagMulti arrive whole, 10 connections', { timeout: 180_000 }, async (t) => {
  const setup = setUp(t);
  if (setup === undefined) return;
  const TAG_MULTI_C = 0x7563787800000301n;
  const ROUNDS = 10;
  let whole = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const size = 64 * 1024 + round;
    const peer: CPeer = new CPeer(setup.binary, ['server', 'echo', String(size)]);
    try {
      await using context = new Context();
      const worker = context.createWorker();
      const endpoint: Endpoint = await peer.guard(worker.connect('127.0.0.1', await peer.port()), `round ${round}: connect`);
      await peer.guard(endpoint.tagSend(cPattern(size, 5), TAG_TS_TO_C).promise, `round ${round}: send`);
      try {
        const back = new Uint8Array(size);
        assert.equal((await endpoint.tagRecv(back, TAG_C_TO_TS)).length, size);
        assertCPattern(back, size, 5, `round ${round}: the echo`);
        const frames = await endpoint.tagMultiRecv(TAG_MULTI_C);
        assert.equal(frames.length, 2, `round ${round}: frames`);
        assertCPattern(frames[0] as Uint8Array, size, 6, `round ${round}: frame 0`);
        assertCPattern(frames[1] as Uint8Array, 100, 7, `round ${round}: frame 1`);
        whole++;
      } catch (err) {
        assert.ok(err instanceof ConnectionResetError, `round ${round}: ${String(err)}\n${peer.describe()}`);
        t.diagnostic(`round ${round}: ${err.message}`);
      }
      await endpoint.close();
      await peer.success();
    } finally {
      peer.kill();
    }
  }
  t.diagnostic(`${whole} of ${ROUNDS} rounds delivered every byte`);
  assert.ok(whole > 0, 'no round delivered every byte');
});
