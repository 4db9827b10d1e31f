/**
 * The ucxx-ts side of test/c/rma_peer.c's protocol (RMA and atomics through ucxx-serialized remote keys;
 * the protocol, the regions, the byte pattern and the atomic words are described at the top of
 * rma_peer.c, and every constant here must match the one there). Shared by test/rma-interop.test.ts
 * (ucxx-ts in the test process) and test/peers/interop-host.ts (ucxx-ts in another "host").
 *
 * - `tsInitiates` (dir 0, the C program owns the memory): receives its two keys, gets, puts, gets again,
 *   runs the atomics, checking every byte and every fetched word here, sends DONE and returns the C
 *   program's verdict (it checks its regions byte for byte).
 * - `tsExposes` (dir 1, ucxx-ts owns the memory): a UCX-allocated MemoryHandle and a registered Node
 *   Buffer, keys from `createRemoteKeyFromMemoryHandle(h).serialize()`; waits for the C program's DONE,
 *   checks both regions byte for byte, sends its verdict and returns it.
 */
import {
  createRemoteKeyFromMemoryHandle, createRemoteKeyFromSerialized,
  type Context, type Endpoint, type MemoryHandle, type RemoteKey, type Worker,
} from 'ucxx-ts';

const KiB = 1024;
const MiB = 1024 * KiB;
export const REGION_SIZE = 8 * MiB;
export const ATOMIC_OFFSET = 2 * MiB;
export const REGION_NAMES = ['UCX-allocated', 'registered'] as const;

/** [offset, size]: 8 B .. 4 MiB, aligned and not, disjoint; the last ends at the region's end. */
export const OPS: readonly (readonly [number, number])[] = [
  [0, 8],
  [4093, 13],
  [8193, 4101],
  [64 * KiB, 64 * KiB],
  [256 * KiB + 7, 1 * MiB],
  [4 * MiB, 4 * MiB],
];

export const keyTag = (dir: 0 | 1, r: number): bigint => 0x4b45590000000000n | (BigInt(dir) << 8n) | BigInt(r);
export const doneTag = (dir: 0 | 1): bigint => 0x444f4e4500000000n | (BigInt(dir) << 8n);
export const verdictTag = (dir: 0 | 1): bigint => 0x5645524400000000n | (BigInt(dir) << 8n);
export const BYE_TAG = 0x4259450000000000n;
const initSeed = (dir: 0 | 1, r: number): number => 100 * dir + 1 + r;
const putSeed = (dir: 0 | 1, r: number, k: number): number => 100 * dir + 10 + 8 * r + k;

/** (uint8_t)((i * 131 + s * 7 + (i >> 8)) ^ (i >> 16)), as in rma_peer.c (the low 8 bits are exact in JS). */
export function patternByte(i: number, seed: number): number {
  return ((i * 131 + seed * 7 + (i >>> 8)) ^ (i >>> 16)) & 0xff;
}

function fillPattern(out: Uint8Array, seed: number, start = 0): Uint8Array {
  for (let j = 0; j < out.length; j++) out[j] = patternByte(start + j, seed);
  return out;
}

/** Initial words at ATOMIC_OFFSET (+0 u64, +8 u32, +16 u64, +24 u32, +28 u32 sentinel). */
function writeWords(region: Uint8Array, final: boolean): void {
  const v = new DataView(region.buffer, region.byteOffset + ATOMIC_OFFSET, 32);
  v.setBigUint64(0, final ? 0x8000000000000064n : 10n, true);
  v.setUint32(8, final ? 42 : 7, true);
  v.setBigUint64(16, final ? 0x0000001000000000n : 0x0000000fffffffffn, true);
  v.setUint32(24, final ? 1 : 0xffffffff, true);
  v.setUint32(28, 0x5a5a5a5a, true);
}

function expectedRegion(dir: 0 | 1, r: number): Uint8Array {
  const out = fillPattern(new Uint8Array(REGION_SIZE), initSeed(dir, r));
  writeWords(out, true);
  OPS.forEach(([offset, size], k) => out.set(fillPattern(new Uint8Array(size), putSeed(dir, r, k)), offset));
  return out;
}

function firstDifference(actual: Uint8Array, expected: Uint8Array): number {
  if (Buffer.from(actual.buffer, actual.byteOffset, actual.length)
    .equals(Buffer.from(expected.buffer, expected.byteOffset, expected.length))) return -1;
  for (let i = 0; i < actual.length; i++) if (actual[i] !== expected[i]) return i;
  return actual.length === expected.length ? -1 : Math.min(actual.length, expected.length);
}

function hex(v: number | bigint | undefined): string {
  return v === undefined ? 'undefined' : `0x${v.toString(16)}`;
}

/** Bounds a promise (the caller's guard also shows the C program's output when it fails). */
export type Guard = <T>(promise: PromiseLike<T>, what: string) => Promise<T>;

export interface InitiatorResult {
  /** The C program's verdict on its own memory: "OK" or "FAIL ...". */
  verdict: string;
  /** Serialized key lengths as received. */
  keyLengths: number[];
  gets: number;
  puts: number;
  atomics: number;
}

/** dir 0: the C program exposes, ucxx-ts initiates. Throws on the first wrong byte or word. */
export async function tsInitiates(endpoint: Endpoint, guard: Guard): Promise<InitiatorResult> {
  const keys: RemoteKey[] = [];
  const keyLengths: number[] = [];
  let gets = 0;
  let puts = 0;
  let atomics = 0;
  try {
    for (let r = 0; r < 2; r++) {
      const buffer = new Uint8Array(4096);
      const { length } = await guard(endpoint.tagRecv(buffer, keyTag(0, r)), `receiving the C program's ${REGION_NAMES[r]} key`);
      keyLengths.push(length);
      const key = createRemoteKeyFromSerialized(endpoint, buffer.subarray(0, length));
      if (key.getSize() !== REGION_SIZE) throw new Error(`${REGION_NAMES[r]} key: size ${key.getSize()}, expected ${REGION_SIZE}`);
      if (key.access !== 'read-write') throw new Error(`${REGION_NAMES[r]} key: access ${key.access}`);
      keys.push(key);
    }
    for (const [r, key] of keys.entries()) {
      const where = (k: number): string => `${REGION_NAMES[r]} region, ${OPS[k]?.[1]} bytes at ${OPS[k]?.[0]}`;
      const check = (actual: Uint8Array, expected: Uint8Array, what: string): void => {
        const i = firstDifference(actual, expected);
        if (i >= 0) throw new Error(`${what}: byte ${i} is ${hex(actual[i])}, expected ${hex(expected[i])}`);
      };
      // Gets of the initial pattern.
      const before = OPS.map(([, size]) => new Uint8Array(size).fill(0xee));
      await guard(Promise.all(OPS.map(([offset], k) => endpoint.memGet(before[k] as Uint8Array, key, offset))), `gets from the ${REGION_NAMES[r]} region`);
      gets += OPS.length;
      OPS.forEach(([offset, size], k) => check(before[k] as Uint8Array, fillPattern(new Uint8Array(size), initSeed(0, r), offset), `get before the puts, ${where(k)}`));
      // Puts, then one flush.
      const sources = OPS.map(([, size], k) => fillPattern(new Uint8Array(size), putSeed(0, r, k)));
      const posted = OPS.map(([offset], k) => endpoint.memPut(sources[k] as Uint8Array, key, offset));
      await guard(endpoint.flush(), `flush after the puts into the ${REGION_NAMES[r]} region`);
      await guard(Promise.all(posted), `puts into the ${REGION_NAMES[r]} region`);
      puts += OPS.length;
      // Gets of what was put.
      const after = OPS.map(([, size]) => new Uint8Array(size).fill(0xee));
      await guard(Promise.all(OPS.map(([offset], k) => endpoint.memGet(after[k] as Uint8Array, key, offset))), `gets after the puts, ${REGION_NAMES[r]} region`);
      gets += OPS.length;
      OPS.forEach((_, k) => check(after[k] as Uint8Array, sources[k] as Uint8Array, `get after the puts, ${where(k)}`));
      // Atomics, one at a time, each fetched value checked.
      const w = ATOMIC_OFFSET;
      const steps: [string, () => PromiseLike<number | bigint | undefined>, bigint][] = [
        ['fetchAdd64 +5', () => endpoint.fetchAdd(key, w, 5n), 10n],
        ['cswap64 15 -> 0x8000000000000064', () => endpoint.compareAndSwap(key, w, 15n, 0x8000000000000064n), 15n],
        ['cswap64 1 -> 2 (fails)', () => endpoint.compareAndSwap(key, w, 1n, 2n), 0x8000000000000064n],
        ['fetchAdd32 +3', () => endpoint.fetchAdd(key, w + 8, 3), 7n],
        ['cswap32 10 -> 42', () => endpoint.compareAndSwap(key, w + 8, 10, 42), 10n],
        ['cswap32 0 -> 1 (fails)', () => endpoint.compareAndSwap(key, w + 8, 0, 1), 42n],
        ['fetchAdd64 +1 (carry into the high half)', () => endpoint.fetchAdd(key, w + 16, 1n), 0xfffffffffn],
        ['fetchAdd32 +2 (wraps)', () => endpoint.fetchAdd(key, w + 24, 2, { width: 32 }), 0xffffffffn],
      ];
      for (const [what, run, fetched] of steps) {
        const got = await guard(run(), `${what} on the ${REGION_NAMES[r]} region`);
        if (got === undefined || BigInt(got) !== fetched) {
          throw new Error(`${what} on the ${REGION_NAMES[r]} region fetched ${hex(got)}, expected ${hex(fetched)}`);
        }
        atomics++;
      }
      await guard(endpoint.flush(), `flush after the atomics on the ${REGION_NAMES[r]} region`);
    }
    const verdict = new Uint8Array(256);
    const received = endpoint.tagRecv(verdict, verdictTag(0));
    await guard(endpoint.tagSend(new TextEncoder().encode('DONE'), doneTag(0)), 'sending DONE');
    const { length } = await guard(received, "waiting for the C program's verdict on its memory");
    return { verdict: new TextDecoder().decode(verdict.subarray(0, length)), keyLengths, gets, puts, atomics };
  } finally {
    for (const key of keys) key.close();
  }
}

export interface OwnerResult {
  /** Our verdict, also sent to the C program: "OK" or "FAIL ...". */
  verdict: string;
  /** Serialized key lengths as sent. */
  keyLengths: number[];
  handles: MemoryHandle[];
}

/**
 * dir 1: ucxx-ts exposes a UCX-allocated region and a registered Node Buffer; the C program initiates.
 * The handles are returned open (the caller closes them, or their Context does, once the C program is
 * done); the verdict says whether both regions hold exactly what the C program had to leave there.
 */
export async function tsExposes(context: Context, endpoint: Endpoint, guard: Guard): Promise<OwnerResult> {
  const registered = Buffer.alloc(REGION_SIZE);
  const handles = [context.createMemoryHandle(REGION_SIZE), context.createMemoryHandle(REGION_SIZE, registered)];
  const regions = [(handles[0] as MemoryHandle).view(), registered];
  const keyLengths: number[] = [];
  regions.forEach((region, r) => {
    fillPattern(region, initSeed(1, r));
    writeWords(region, false);
  });
  const done = new Uint8Array(16);
  const doneReceived = endpoint.tagRecv(done, doneTag(1));
  for (const [r, handle] of handles.entries()) {
    const bytes = createRemoteKeyFromMemoryHandle(handle).serialize();
    keyLengths.push(bytes.length);
    await guard(endpoint.tagSend(bytes, keyTag(1, r)), `sending the ${REGION_NAMES[r]} key`);
  }
  const { length } = await guard(doneReceived, 'waiting for the C program to finish its RMA and atomics (DONE)');
  let verdict = 'OK';
  if (new TextDecoder().decode(done.subarray(0, length)) !== 'DONE') verdict = `FAIL bad DONE message (${length} bytes)`;
  for (const [r, region] of regions.entries()) {
    if (verdict !== 'OK') break;
    const expected = expectedRegion(1, r);
    const i = firstDifference(region, expected);
    if (i >= 0) verdict = `FAIL ${REGION_NAMES[r]} region: byte ${i} is ${hex(region[i])}, expected ${hex(expected[i])}`;
  }
  await guard(endpoint.tagSend(new TextEncoder().encode(verdict), verdictTag(1)), 'sending our verdict');
  return { verdict, keyLengths, handles };
}

/**
 * Post before the exchange; resolves once the C program's BYE (its last message) has arrived. A
 * worker receive, not an endpoint one: the C program closes right after BYE, and its disconnect may be
 * seen before the message itself (an endpoint receive would be cancelled by it).
 */
export function receiveBye(worker: Worker): Promise<void> {
  const buffer = new Uint8Array(16);
  return worker.tagRecv(buffer, BYE_TAG).promise.then(({ length }) => {
    const text = new TextDecoder().decode(buffer.subarray(0, length));
    if (text !== 'BYE') throw new Error(`bad BYE message: '${text}'`);
  });
}
