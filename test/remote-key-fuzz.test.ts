/**
 * Deserializing remote keys from untrusted bytes on a live endpoint: thousands of random, corrupted,
 * truncated and structurally mutated inputs give typed errors, never a crash, and the endpoint keeps
 * working afterwards.
 */
import { after, before, test } from 'node:test';
import { strict as assert } from 'node:assert';
import {
  Context, RemoteKeyFormatError, UcxError, createRemoteKeyFromSerialized, type Endpoint,
} from 'ucxx-ts';
import { Peer } from './helpers/peer.js';
import { firstMismatch, pattern } from './helpers/pattern.js';
import { stdHashBytes } from '#ucxx-ts/internal/std-hash.js';

let peer: Peer;
let context: Context;
let endpoint: Endpoint;
let valid: Uint8Array;

/** A seeded PRNG so that a failure can be replayed. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x;
  };
}

/** Re-seals a serialized key after mutation, so that the checks behind the checksum are reached. */
function reseal(bytes: Uint8Array): Uint8Array {
  if (bytes.length >= 8) {
    new DataView(bytes.buffer, bytes.byteOffset).setBigUint64(0, stdHashBytes(bytes.subarray(8)), true);
  }
  return bytes;
}

/** Tries one input; returns what happened. Anything but a typed refusal or a usable key fails the test. */
function attempt(input: Uint8Array): 'refused' | 'unpacked' {
  try {
    const key = createRemoteKeyFromSerialized(endpoint, input);
    key.close();
    return 'unpacked';
  } catch (err) {
    if (err instanceof RemoteKeyFormatError || err instanceof UcxError) return 'refused';
    throw err;
  }
}

before(async () => {
  peer = Peer.start('rma-target', { kind: 'allocated', size: 1 << 16 });
  const ready = await peer.next('ready');
  context = new Context();
  const worker = context.createWorker();
  endpoint = await worker.connect('127.0.0.1', ready['port'] as number);
  const buffer = new Uint8Array(512);
  const info = await endpoint.tagRecv(buffer, 1n);
  valid = buffer.slice(0, info.length);
});

after(async () => {
  await context.close();
  assert.equal(await peer.stop(), 0);
});

test('the genuine key unpacks', () => {
  assert.equal(attempt(valid), 'unpacked');
});

test('non-byte inputs are TypeErrors', () => {
  for (const input of [null, undefined, 'abc', 42, {}, [1, 2, 3]]) {
    assert.throws(() => createRemoteKeyFromSerialized(endpoint, input as never), TypeError);
  }
});

test('5,000 random inputs of 0..300 bytes are refused with RemoteKeyFormatError', () => {
  const next = rng(1);
  for (let i = 0; i < 5000; i++) {
    const input = new Uint8Array(next() % 301);
    for (let j = 0; j < input.length; j++) input[j] = next() & 0xff;
    assert.throws(() => createRemoteKeyFromSerialized(endpoint, input), RemoteKeyFormatError);
  }
});

test('every truncation and 5,000 corruptions of the genuine key are refused', () => {
  for (let n = 0; n < valid.length; n++) {
    assert.throws(() => createRemoteKeyFromSerialized(endpoint, valid.subarray(0, n)), RemoteKeyFormatError);
  }
  const next = rng(2);
  for (let i = 0; i < 5000; i++) {
    const input = valid.slice();
    const flips = 1 + (next() % 4);
    for (let f = 0; f < flips; f++) {
      const at = next() % input.length;
      input[at] = (input[at] as number) ^ (1 + (next() % 255));
    }
    assert.throws(() => createRemoteKeyFromSerialized(endpoint, input), RemoteKeyFormatError);
  }
});

test('5,000 resealed mutations (valid checksum) are refused or unpack, and nothing crashes', () => {
  const next = rng(3);
  const counts = { refused: 0, unpacked: 0 };
  for (let i = 0; i < 5000; i++) {
    let input = valid.slice();
    switch (next() % 4) {
      case 0: // flip bytes anywhere after the checksum
        for (let f = 0; f < 1 + (next() % 3); f++) {
          const at = 8 + (next() % (input.length - 8));
          input[at] = (input[at] as number) ^ (1 + (next() % 255));
        }
        break;
      case 1: // a packed-key length out of range
        new DataView(input.buffer).setBigUint64(8, BigInt(next()) * BigInt(next() % 3 === 0 ? 1 : 2 ** 20), true);
        break;
      case 2: { // base/size near the top of the address space
        const n = Number(new DataView(input.buffer).getBigUint64(8, true));
        new DataView(input.buffer).setBigUint64(16 + n, 2n ** 64n - BigInt(1 + (next() % 4096)), true);
        break;
      }
      default: { // grow or shrink the tail
        const extra = new Uint8Array(next() % 40);
        for (let j = 0; j < extra.length; j++) extra[j] = next() & 0xff;
        const cut = valid.length - (next() % 12);
        input = new Uint8Array([...valid.subarray(0, cut), ...extra]);
      }
    }
    counts[attempt(reseal(input))]++;
  }
  assert.ok(counts.refused > 4000, `refused ${counts.refused} of 5000`);
});

test('the endpoint still moves data after the fuzzing', async () => {
  const key = createRemoteKeyFromSerialized(endpoint, valid);
  await endpoint.memPut(pattern(9, 1000), key, 10);
  await endpoint.flush();
  const back = new Uint8Array(1000);
  await endpoint.memGet(back, key, 10);
  assert.equal(firstMismatch(back, pattern(9, 1000)), -1);
  key.close();
});
