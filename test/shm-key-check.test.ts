/**
 * The shared-memory check of deserialized keys (README, trust model): on one host, UCX 1.13 attaches a
 * key's sysv record itself, crashing when the segment does not exist, and a segment that does not cover
 * the region would let an in-bounds memPut write elsewhere in this process. Such keys must be refused
 * with RemoteKeyFormatError before UCX sees them; the genuine key still works.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { Context, RemoteKeyFormatError, createRemoteKeyFromSerialized, type Endpoint } from 'ucxx-ts';
import { decodeSerializedRemoteKey, encodeSerializedRemoteKey } from '#ucxx-ts/internal/serialized-remote-key.js';
import { parsePackedRkey } from '#ucxx-ts/internal/packed-rkey.js';
import { firstMismatch, pattern } from './helpers/pattern.js';
import { within } from './helpers/deadline.js';
import { mdComponents } from './helpers/md-components.js';

/** The offset of the sysv record in a packed key, and its shmid and owner address. */
function sysvRecord(context: Context, packed: Uint8Array): { offset: number; shmid: number; owner: bigint } {
  const components = mdComponents(context);
  const record = parsePackedRkey(packed).mds.find((md) => components.get(md.index) === 'sysv');
  assert.ok(record !== undefined, 'the key of UCX-allocated memory has no sysv record');
  const view = new DataView(packed.buffer, packed.byteOffset);
  return { offset: record.offset, shmid: view.getUint32(record.offset, true), owner: view.getBigUint64(record.offset + 4, true) };
}

/** `serialized` with the shmid of its sysv record replaced, checksum resealed. */
function withShmid(context: Context, serialized: Uint8Array, shmid: number): Uint8Array {
  const decoded = decodeSerializedRemoteKey(serialized);
  const packed = decoded.packedRkey.slice();
  const { offset } = sysvRecord(context, packed);
  new DataView(packed.buffer, packed.byteOffset).setUint32(offset, shmid, true);
  return encodeSerializedRemoteKey({ packedRkey: packed, baseAddress: decoded.baseAddress, size: decoded.size, access: decoded.access });
}

test('a key whose sysv record names a missing segment, or one too small for the region, is a RemoteKeyFormatError; the genuine key works', async () => {
  await using context = new Context();
  const owner = context.createWorker();
  const initiator = context.createWorker();
  let accepted!: (ep: Endpoint) => void;
  const acceptedEndpoint = new Promise<Endpoint>((resolve) => { accepted = resolve; });
  using listener = owner.listen({ host: '127.0.0.1', port: 0 }, (ep) => accepted(ep));
  const endpoint = await within(initiator.connect('127.0.0.1', listener.port), 5000, 'connect');
  await within(acceptedEndpoint, 5000, 'accept');
  const big = context.createMemoryHandle(1 << 20);
  const small = context.createMemoryHandle(4096);
  const bigKey = big.createRemoteKey().serialize();
  const smallRecord = sysvRecord(context, decodeSerializedRemoteKey(small.createRemoteKey().serialize()).packedRkey);
  const bigRecord = sysvRecord(context, decodeSerializedRemoteKey(bigKey).packedRkey);
  assert.notEqual(smallRecord.shmid, bigRecord.shmid, 'two regions share one segment: the test needs two');

  const refusedWith = (bytes: Uint8Array, message: RegExp): void => {
    assert.throws(() => createRemoteKeyFromSerialized(endpoint, bytes), (err: unknown) => {
      assert.ok(err instanceof RemoteKeyFormatError, `expected RemoteKeyFormatError, got ${String(err)}`);
      assert.equal(err.code, 'UCXX_ERR_REMOTE_KEY_FORMAT');
      assert.match(err.message, message);
      return true;
    });
  };
  // A segment that does not exist (UCX 1.13 would crash attaching it).
  refusedWith(withShmid(context, bigKey, 0x7ffffff0), /sysv shared memory segment 2147483632 does not exist/);
  // A real segment, of another region: 4 KiB cannot hold the 1 MiB region the key describes.
  refusedWith(withShmid(context, bigKey, smallRecord.shmid), /does not cover the region/);
  // The genuine key unpacks and moves bytes into the region.
  const key = createRemoteKeyFromSerialized(endpoint, bigKey);
  const data = pattern(11, 64 << 10);
  await within(endpoint.memPut(data, key, 512 << 10), 5000, 'memPut');
  await within(endpoint.flush(), 5000, 'flush');
  assert.equal(firstMismatch(big.view().subarray(512 << 10, (512 << 10) + data.length), data), -1);
  await endpoint.close();
});
