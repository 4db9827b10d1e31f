/**
 * RMA between two processes through real UCX: both memory kinds, sizes from 0 B to 64 MiB, at offsets,
 * with the bytes checked on both sides; access rights and bounds.
 */
import { after, before, describe, test } from 'node:test';
import { strict as assert } from 'node:assert';
import {
  Context, ClosedError, RemoteAccessError, RemoteKey, createRemoteKeyFromSerialized, type Endpoint, type Worker,
} from 'ucxx-ts';
import { Peer } from './helpers/peer.js';
import { firstMismatch, pattern } from './helpers/pattern.js';
import { failsAtOnce } from './helpers/fails-at-once.js';

const MiB = 1 << 20;
const REGION = 65 * MiB;
const SIZES = [0, 1, 8, 4096, MiB, 64 * MiB];

interface Session {
  peer: Peer;
  context: Context;
  worker: Worker;
  endpoint: Endpoint;
  key: RemoteKey;
}

async function connectToTarget(config: object, progressMode: 'event' | 'polling' | 'manual' = 'event'): Promise<Session> {
  const peer = Peer.start('rma-target', config);
  const ready = await peer.next('ready');
  const context = new Context();
  const worker = context.createWorker({ progressMode });
  const endpoint = await worker.connect('127.0.0.1', ready['port'] as number);
  const buffer = new Uint8Array(512);
  const info = await endpoint.tagRecv(buffer, 1n);
  const key = createRemoteKeyFromSerialized(endpoint, buffer.subarray(0, info.length));
  return { peer, context, worker, endpoint, key };
}

async function closeSession(s: Session): Promise<void> {
  await s.context.close();
  assert.equal(await s.peer.stop(), 0, `peer exit status; stderr: ${s.peer.stderr}`);
}

for (const kind of ['allocated', 'registered'] as const) {
  describe(`RMA into ${kind} memory of another process`, () => {
    let s: Session;
    before(async () => {
      s = await connectToTarget({ kind, size: REGION });
    });
    after(async () => {
      await closeSession(s);
    });

    test('the key describes the remote region', () => {
      assert.equal(s.key.getSize(), REGION);
      assert.equal(typeof s.key.getBaseAddress(), 'bigint');
      assert.notEqual(s.key.getHandle(), null);
      assert.equal(s.key.access, 'read-write');
    });

    for (const size of SIZES) {
      const offset = size === 64 * MiB ? 3 : 4096 * 7 + 5; // unaligned offsets
      test(`memPut ${size} B at offset ${offset}, verified by the target`, async () => {
        const data = pattern(size + 11, size);
        await s.endpoint.memPut(data, s.key, offset);
        await s.endpoint.flush();
        const reply = await s.peer.call({ type: 'verify', offset, length: size, seed: size + 11 }, 'verified');
        assert.equal(reply['mismatch'], -1, `first differing byte at the target: ${String(reply['mismatch'])}`);
      });

      test(`memGet ${size} B at offset ${offset} of bytes the target wrote`, async () => {
        await s.peer.call({ type: 'fill', offset, length: size, seed: size + 99 }, 'filled');
        const back = new Uint8Array(size);
        await s.endpoint.memGet(back, s.key, BigInt(offset));
        assert.equal(firstMismatch(back, pattern(size + 99, size)), -1);
      });
    }

    test('the raw form memPut(buffer, remoteAddress, rkeyHandle) reaches the same memory', async () => {
      const data = pattern(5, 64);
      const handle = s.key.getHandle();
      assert.ok(handle !== null);
      await s.endpoint.memPut(data, s.key.getBaseAddress() + 100n, handle);
      await s.worker.flush();
      const reply = await s.peer.call({ type: 'verify', offset: 100, length: 64, seed: 5 }, 'verified');
      assert.equal(reply['mismatch'], -1);
    });

    test('many puts without awaiting each, one flush, all visible', async () => {
      const requests = [];
      for (let i = 0; i < 64; i++) requests.push(s.endpoint.memPut(pattern(1000 + i, 4096), s.key, i * 4096));
      await s.endpoint.flush();
      assert.ok(requests.every((r) => r.completed && r.status === 0));
      for (let i = 0; i < 64; i += 21) {
        const reply = await s.peer.call({ type: 'verify', offset: i * 4096, length: 4096, seed: 1000 + i }, 'verified');
        assert.equal(reply['mismatch'], -1);
      }
    });

    test('offset + length outside the region is a RangeError before UCX sees it', () => {
      failsAtOnce(() => s.endpoint.memPut(new Uint8Array(2), s.key, REGION - 1), RangeError);
      failsAtOnce(() => s.endpoint.memGet(new Uint8Array(1), s.key, REGION), RangeError);
      failsAtOnce(() => s.endpoint.memPut(new Uint8Array(REGION + 1), s.key), RangeError);
      failsAtOnce(() => s.endpoint.memPut(new Uint8Array(1), s.key, -1), RangeError);
      failsAtOnce(() => s.endpoint.memPut(new Uint8Array(1), s.key, 2n ** 64n), RangeError);
      failsAtOnce(() => s.endpoint.memPut(new Uint8Array(1), s.key, 1.5), RangeError);
      // The last byte and an empty access at the very end are inside.
      assert.doesNotThrow(() => s.endpoint.memPut(new Uint8Array(1), s.key, REGION - 1));
      assert.doesNotThrow(() => s.endpoint.memPut(new Uint8Array(0), s.key, REGION));
    });

    test('bad arguments are TypeErrors', () => {
      failsAtOnce(() => s.endpoint.memPut('text' as never, s.key), TypeError);
      failsAtOnce(() => s.endpoint.memPut(new Uint8Array(1), {} as never), TypeError);
      failsAtOnce(() => s.endpoint.memPut(new Uint8Array(1), 5n, 7 as never), TypeError);
    });
  });
}

describe('access rights', () => {
  for (const kind of ['allocated', 'registered'] as const) {
    test(`a put through a read-only key (${kind}) is refused, a get works`, async () => {
      const s = await connectToTarget({ kind, size: 4096, access: 'read' });
      try {
        assert.equal(s.key.access, 'read');
        failsAtOnce(() => s.endpoint.memPut(new Uint8Array(8).fill(1), s.key, 0), RemoteAccessError);
        await s.peer.call({ type: 'fill', offset: 0, length: 64, seed: 3 }, 'filled');
        const back = new Uint8Array(64);
        await s.endpoint.memGet(back, s.key, 0);
        assert.equal(firstMismatch(back, pattern(3, 64)), -1);
      } finally {
        await closeSession(s);
      }
    });
  }

  test('a get through a write-only key is refused, a put works', async () => {
    const s = await connectToTarget({ kind: 'allocated', size: 4096, access: 'write' });
    try {
      failsAtOnce(() => s.endpoint.memGet(new Uint8Array(8), s.key, 0), RemoteAccessError);
      await s.endpoint.memPut(pattern(4, 32), s.key, 0);
      await s.endpoint.flush();
      const reply = await s.peer.call({ type: 'verify', offset: 0, length: 32, seed: 4 }, 'verified');
      assert.equal(reply['mismatch'], -1);
    } finally {
      await closeSession(s);
    }
  });
});

describe('progress modes', () => {
  for (const [mode, busyPollUs] of [['event', undefined], ['event', 0], ['polling', undefined], ['polling', 0], ['manual', undefined]] as const) {
    const label = busyPollUs === undefined ? `'${mode}'` : `'${mode}' with busyPollUs ${busyPollUs}`;
    test(`${label} on both sides moves data`, async () => {
      const peer = Peer.start('rma-target', { kind: 'registered', size: MiB, progressMode: mode });
      const ready = await peer.next('ready');
      const context = new Context();
      const worker = context.createWorker({ progressMode: mode, ...(busyPollUs === undefined ? {} : { busyPollUs }) });
      let pump: NodeJS.Timeout | undefined;
      if (mode === 'manual') pump = setInterval(() => worker.progress(), 1);
      try {
        const endpoint = await worker.connect('127.0.0.1', ready['port'] as number);
        const buffer = new Uint8Array(512);
        const info = await endpoint.tagRecv(buffer, 1n);
        const key = createRemoteKeyFromSerialized(endpoint, buffer.subarray(0, info.length));
        await endpoint.memPut(pattern(77, 65536), key, 12345);
        await endpoint.flush();
        const reply = await peer.call({ type: 'verify', offset: 12345, length: 65536, seed: 77 }, 'verified');
        assert.equal(reply['mismatch'], -1);
      } finally {
        if (pump !== undefined) clearInterval(pump);
        await context.close();
        assert.equal(await peer.stop(), 0);
      }
    });
  }
});

describe('keys and endpoints', () => {
  test('a key unpacked on one endpoint cannot be used on another; closed keys are ClosedError', async () => {
    const s = await connectToTarget({ kind: 'allocated', size: 4096 });
    try {
      const other = s.worker.connectToAddress(s.worker.getAddress());
      failsAtOnce(() => other.memPut(new Uint8Array(1), s.key), /another endpoint/);
      await other.close();
      s.key.close();
      s.key.close(); // idempotent
      failsAtOnce(() => s.endpoint.memPut(new Uint8Array(1), s.key), ClosedError);
    } finally {
      await closeSession(s);
    }
  });

  test('closing an endpoint releases the keys unpacked on it', async () => {
    const s = await connectToTarget({ kind: 'allocated', size: 4096 });
    try {
      await s.endpoint.close();
      assert.equal(s.key.closed, true);
      assert.throws(() => s.key.getHandle(), ClosedError);
      failsAtOnce(() => s.endpoint.memPut(new Uint8Array(1), s.key), ClosedError);
    } finally {
      await closeSession(s);
    }
  });
});
