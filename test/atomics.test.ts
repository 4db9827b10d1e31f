/**
 * Remote atomics between processes: every op and width, with and without fetch, on UCX-allocated and
 * registered memory, checked by the owner; alignment and bounds; concurrent adds from two processes.
 */
import { after, before, describe, test } from 'node:test';
import { strict as assert } from 'node:assert';
import { Context, createRemoteKeyFromSerialized, type Endpoint, type RemoteKey } from 'ucxx-ts';
import { Peer } from './helpers/peer.js';
import { connectToEchoPeer, echoPeerConfig, echoPeerConnected } from './helpers/fast-lane-variant.js';
import { within } from './helpers/deadline.js';
import { failsAtOnce } from './helpers/fails-at-once.js';

let peer: Peer;
let context: Context;
let endpoint: Endpoint;
const keys: Record<'allocated' | 'registered', RemoteKey> = {} as never;
let port: number;

before(async () => {
  peer = Peer.start('echo-peer', echoPeerConfig());
  port = (await peer.next('ready'))['port'] as number;
  context = new Context();
  const worker = context.createWorker();
  endpoint = await connectToEchoPeer(worker, port);
  await echoPeerConnected(peer);
  const buffers = [new Uint8Array(512), new Uint8Array(512)];
  const received = [endpoint.tagRecv(buffers[0] as Uint8Array, 1n), endpoint.tagRecv(buffers[1] as Uint8Array, 2n)];
  await peer.call({ type: 'send-keys' }, 'keys-sent');
  const [a, r] = await Promise.all(received);
  keys.allocated = createRemoteKeyFromSerialized(endpoint, (buffers[0] as Uint8Array).subarray(0, a?.length));
  keys.registered = createRemoteKeyFromSerialized(endpoint, (buffers[1] as Uint8Array).subarray(0, r?.length));
});

after(async () => {
  await context.close();
  assert.equal(await peer.stop(), 0, peer.stderr);
});

async function word(which: string, offset: number, width: number): Promise<bigint> {
  return BigInt((await peer.call({ type: 'read-word', which, offset, width }, 'word'))['value'] as string);
}
async function setWord(which: string, offset: number, width: number, value: bigint): Promise<void> {
  await peer.call({ type: 'write-word', which, offset, width, tag: String(value) }, 'written');
}

const INITIAL = 0b1100_0101n;
const OPERAND = 0b1010_0110n;
const EXPECT: Record<string, (a: bigint, b: bigint) => bigint> = {
  add: (a, b) => a + b,
  and: (a, b) => a & b,
  or: (a, b) => a | b,
  xor: (a, b) => a ^ b,
  swap: (_a, b) => b,
};

for (const which of ['allocated', 'registered'] as const) {
  describe(`atomics on ${which} memory`, () => {
    for (const width of [32, 64] as const) {
      for (const op of ['add', 'and', 'or', 'xor', 'swap'] as const) {
        for (const fetch of [false, true]) {
          if (op === 'swap' && !fetch) continue;
          test(`${op}${width}${fetch ? ' with fetch' : ''}`, async () => {
            const offset = width === 64 ? 64 : 68;
            const high = width === 64 ? (0xdeadbeefn << 32n) : 0n;
            await setWord(which, offset, width, high | INITIAL);
            const value = width === 64 ? (high | OPERAND) : Number(OPERAND);
            const old = await endpoint.atomic(op, keys[which], offset, value, { fetch, width });
            await endpoint.flush();
            if (fetch) assert.equal(BigInt(old ?? -1), high | INITIAL, 'the fetched previous value');
            else assert.equal(old, undefined);
            const expected = BigInt.asUintN(width, (EXPECT[op] as (a: bigint, b: bigint) => bigint)(high | INITIAL, high | OPERAND));
            assert.equal(await word(which, offset, width), expected);
          });
        }
      }
      test(`compare-and-swap ${width}: stores on a match, not on a miss`, async () => {
        const offset = 128;
        await setWord(which, offset, width, 5n);
        const w = (v: bigint): number | bigint => (width === 64 ? v : Number(v));
        assert.equal(BigInt(await endpoint.compareAndSwap(keys[which], offset, w(5n), w(9n), { width }) ?? -1), 5n);
        assert.equal(await word(which, offset, width), 9n);
        assert.equal(BigInt(await endpoint.compareAndSwap(keys[which], offset, w(5n), w(11n), { width }) ?? -1), 9n);
        assert.equal(await word(which, offset, width), 9n);
      });
    }
  });
}

describe('atomic argument checks', () => {
  test('misaligned and out-of-range offsets are RangeErrors; bad ops and values are refused', () => {
    const key = keys.allocated;
    failsAtOnce(() => endpoint.atomic('add', key, 4, 1n), RangeError); // 64-bit at 4
    failsAtOnce(() => endpoint.atomic('add', key, 2, 1), RangeError); // 32-bit at 2
    failsAtOnce(() => endpoint.atomic('add', key, 8192, 1), RangeError);
    failsAtOnce(() => endpoint.atomic('add', key, 8188, 1n), RangeError);
    failsAtOnce(() => endpoint.atomic('nand' as never, key, 0, 1), TypeError);
    failsAtOnce(() => endpoint.atomic('add', key, 0, 2 ** 40), RangeError); // does not fit in 32 bits
    failsAtOnce(() => endpoint.atomic('add', key, 0, 1, { width: 16 as never }), RangeError);
    failsAtOnce(() => endpoint.atomic('cswap', key, 0, 1), TypeError); // needs compare
  });
});

describe('widths follow the value type', () => {
  test('a number with width 64, a bigint with width 32 and a mixed compare-and-swap are InvalidArgumentErrors', () => {
    const key = keys.allocated;
    const invalid = (err: unknown): boolean => err instanceof TypeError && (err as { code?: string }).code === 'UCXX_ERR_INVALID_ARG';
    failsAtOnce(() => endpoint.fetchAdd(key, 0, 1, { width: 64 as never }), invalid);
    failsAtOnce(() => endpoint.fetchAdd(key, 0, 1n, { width: 32 as never }), invalid);
    failsAtOnce(() => endpoint.atomic('add', key, 0, 1, { width: 64 }), invalid);
    failsAtOnce(() => endpoint.compareAndSwap(key, 0, 1n, 2 as never), invalid);
    failsAtOnce(() => endpoint.compareAndSwap(key, 0, 1 as never, 2n), invalid);
    failsAtOnce(() => endpoint.atomic('cswap', key, 0, 2n, { compare: 1 }), invalid);
  });

  test('results are typed by the arguments: bigint in, bigint out; number in, number out; no fetch, nothing', async () => {
    const key = keys.allocated;
    const at = 256;
    await setWord('allocated', at, 64, (5n << 32n) | 0xffffffffn);
    // A number adds to a 32-bit word: the low half of this 64-bit word wraps, the high half stays.
    const low: number = await endpoint.fetchAdd(key, at, 1);
    assert.equal(low, 0xffffffff);
    assert.equal(await word('allocated', at, 64), 5n << 32n);
    // A bigint adds to the 64-bit word.
    const whole: bigint = await endpoint.fetchAdd(key, at, 1n);
    assert.equal(whole, 5n << 32n);
    const swapped: bigint = await endpoint.compareAndSwap(key, at, (5n << 32n) + 1n, 7n);
    assert.equal(swapped, (5n << 32n) + 1n);
    const previous32: number = await endpoint.compareAndSwap(key, at, 7, 8);
    assert.equal(previous32, 7);
    const fetched: bigint = await endpoint.atomic('or', key, at, 0x10n, { fetch: true });
    assert.equal(fetched, 8n);
    const exchanged: number = await endpoint.atomic('swap', key, at, 3);
    assert.equal(exchanged, 0x18);
    const nothing: void = await endpoint.atomic('add', key, at, 1);
    assert.equal(nothing, undefined);
    await endpoint.flush();
    assert.equal(await word('allocated', at, 64), 4n);
  });
});

describe('concurrency', () => {
  test('fetch-adds from two processes (and this one) sum exactly; every fetched value is distinct', async () => {
    const COUNT = 2000;
    await setWord('allocated', 0, 64, 0n);
    const adders = [0, 1].map(() => Peer.start('atomic-adder', { port, count: COUNT, width: 64 }));
    await Promise.all(adders.map((a) => a.next('connected')));
    // The echo peer sees each connection once its side is wired up, which can be after the adder's
    // connect() resolved: wait until it has both before it hands each its key (tag 1).
    await peer.next('connected');
    await peer.next('connected');
    await peer.call({ type: 'send-keys-all' }, 'keys-sent-all');
    const own = [];
    for (let i = 0; i < COUNT; i++) own.push(BigInt(await endpoint.fetchAdd(keys.allocated, 0, 1n) ?? -1));
    const results = await Promise.all(adders.map((a) => a.next('done', 60_000)));
    for (const r of results) assert.equal(r['distinct'], COUNT);
    assert.equal(new Set(own.map(String)).size, COUNT);
    assert.equal(await word('allocated', 0, 64), BigInt(3 * COUNT));
    for (const adder of adders) {
      adder.send({ type: 'exit' });
      assert.equal((await within(adder.exited, 10_000, 'the adder exits')).code, 0, adder.stderr);
    }
  });
});
