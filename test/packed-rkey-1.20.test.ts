// The parser of UCX 1.20's packed remote keys, on keys that ucp_rkey_pack of UCX 1.20.1 (the libucx-cu12
// wheel) produced on the development machine: they parse with the records UCX packed, every truncation,
// extension and single-byte corruption is refused or parses consistently (never a crash), and ucxx's
// serialized format carries them. Pure TypeScript: this file loads no UCX, so it checks the 1.20 format
// whichever UCX the run uses (the library's choice of format per loaded version is in ucx-versions.ts,
// and live 1.20 keys go through remote-key-fuzz.test.ts on the wheel).
import { test } from 'node:test';
import { strict as assert } from 'node:assert';

import { parsePackedRkey } from '#ucxx-ts/internal/packed-rkey.js';
import { RemoteKeyFormatError } from '#ucxx-ts/errors/remote-key-format.js';
import { decodeSerializedRemoteKey, encodeSerializedRemoteKey } from '#ucxx-ts/internal/serialized-remote-key.js';

const hex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'hex'));
const F = { format: '1.20' } as const;

interface Key120 {
  readonly name: string;
  readonly packed: string;
  readonly mds: ReadonlyArray<readonly [index: number, size: number]>;
}

// `context.createMemoryHandle(4096[, buffer]).createRemoteKey()` on UCX 1.20.1, MDs on this machine:
// 0 self, 1 tcp, 2 sysv, 3 posix, 4 cma (fewer with UCX_TLS). Host memory: sys_dev 255, no distances.
const KEYS: readonly Key120[] = [
  { name: 'default transports, allocated (sysv key)', packed: '050000000000000000000c17809700003022b03f7f0000ff', mds: [[0, 0], [2, 12]] },
  { name: 'default transports, registered buffer', packed: '01000000000000000000ff', mds: [[0, 0]] },
  { name: 'UCX_TLS=sm, allocated (sysv key)', packed: '0100000000000000000c18809700003022b03f7f0000ff', mds: [[0, 12]] },
  { name: 'UCX_TLS=posix, allocated', packed: '010000000000000000184c2100c0040000c0003022b03f7f00000010000000000000ff', mds: [[0, 24]] },
  { name: 'UCX_TLS=tcp (no MD packs a key): the bare header', packed: '000000000000000000', mds: [] },
];

test('UCX 1.20.1 keys parse as 1.20, with the records ucp_rkey_pack wrote', () => {
  for (const key of KEYS) {
    const parsed = parsePackedRkey(hex(key.packed), F);
    assert.deepEqual(parsed.mds.map((m) => [m.index, m.size]), key.mds, key.name);
    assert.equal(parsed.memType, 0, key.name);
    assert.equal(parsed.sysDev, null, key.name);
    assert.deepEqual(parsed.distances, [], key.name);
    assert.equal(parsed.flush, false, key.name);
  }
});

test('1.20 keys are not 1.13 keys: the always-packed sys_dev byte 255 is refused by the 1.13 parser', () => {
  for (const key of KEYS.filter((k) => k.mds.length > 0)) {
    assert.throws(() => parsePackedRkey(hex(key.packed), { format: '1.13' }), /UCS_SYS_DEVICE_ID_UNKNOWN/, key.name);
  }
  // And a 1.13 key (no sys_dev byte) lacks what 1.20 always packs.
  assert.throws(() => parsePackedRkey(hex('130000000000000000000000'), F), /sys_dev byte after the MD records is missing/);
});

test('1.20: every truncation and every extension of a genuine key is refused', () => {
  for (const key of KEYS) {
    const bytes = hex(key.packed);
    for (let n = 0; n < bytes.length; n++) {
      assert.throws(() => parsePackedRkey(bytes.subarray(0, n), F), RemoteKeyFormatError, `${key.name} cut to ${n}`);
    }
    for (const extra of [[0], [0xff], [1, 2, 3], [0xff, 0xff]]) {
      assert.throws(() => parsePackedRkey(new Uint8Array([...bytes, ...extra]), F), RemoteKeyFormatError,
        `${key.name} + ${extra.join(',')}`);
    }
  }
});

test('1.20: the sys_dev section (a known device, the flush bit, distances, the terminator)', () => {
  const head = '0100000000000000000c18809700003022b03f7f0000'; // md_map {0}, host, one 12-byte record
  const ok = parsePackedRkey(hex(`${head}03` + '01aabb' + '05ccdd' + 'ff'), F);
  assert.equal(ok.sysDev, 3);
  assert.equal(ok.flush, false);
  assert.deepEqual(ok.distances, [{ sysDev: 1, latencyFp8: 0xaa, bandwidthFp8: 0xbb }, { sysDev: 5, latencyFp8: 0xcc, bandwidthFp8: 0xdd }]);
  const flushed = parsePackedRkey(hex(`${head}83ff`), F);
  assert.equal(flushed.sysDev, 3);
  assert.equal(flushed.flush, true);
  assert.throws(() => parsePackedRkey(hex(`${head}03` + '01aabb'), F), /terminating byte 255/);
  assert.throws(() => parsePackedRkey(hex(`${head}03` + '01aa' + 'ff'), F), /terminating byte 255/);
  assert.throws(() => parsePackedRkey(hex(`${head}03` + '05aabb' + '01ccdd' + 'ff'), F), /out of increasing order/);
  assert.throws(() => parsePackedRkey(hex(`${head}03` + '40aabb' + 'ff'), F), /system device 64/);
  assert.throws(() => parsePackedRkey(hex(`${head}ff00`), F), /follow the sys_dev byte UCS_SYS_DEVICE_ID_UNKNOWN/);
  // Memory types of 1.20 go up to ZE_MANAGED (8); 9 and above are not ucs_memory_type_t values.
  assert.doesNotThrow(() => parsePackedRkey(hex('010000000000000008' + '00' + 'ff'), F));
  assert.throws(() => parsePackedRkey(hex('010000000000000009' + '00' + 'ff'), F), /memory type 9/);
});

test('1.20: every single-byte corruption of a genuine key is refused or parses consistently, never a crash', () => {
  let refused = 0;
  let parsed = 0;
  for (const key of KEYS) {
    const bytes = hex(key.packed);
    for (let at = 0; at < bytes.length; at++) {
      for (let value = 0; value < 256; value++) {
        if (value === bytes[at]) continue;
        const mutated = bytes.slice();
        mutated[at] = value;
        try {
          const result = parsePackedRkey(mutated, F);
          parsed++;
          // What parses accounts for every byte: header, records, then the sys_dev section.
          const recordBytes = result.mds.reduce((sum, m) => sum + 1 + m.size, 0);
          assert.equal(9 + recordBytes + result.trailer, mutated.length, `${key.name} byte ${at} = ${value}`);
        } catch (err) {
          assert.ok(err instanceof RemoteKeyFormatError, `${key.name} byte ${at} = ${value}: ${String(err)}`);
          refused++;
        }
      }
    }
  }
  assert.ok(refused > 1000 && parsed > 100, `refused ${refused}, parsed ${parsed}`);
});

test('1.20 keys in ucxx\'s serialized format: round trip, and a bad 1.20 structure is refused behind a valid checksum', () => {
  const key = KEYS[0] as Key120;
  const packed = hex(key.packed);
  for (const access of [undefined, 'read', 'write', 'read-write'] as const) {
    const encoded = encodeSerializedRemoteKey({ packedRkey: packed, baseAddress: 0x7f3fb0223000n, size: 4096n, ...(access ? { access } : {}) }, F);
    const decoded = decodeSerializedRemoteKey(encoded, F);
    assert.deepEqual(decoded.packedRkey, packed);
    assert.equal(decoded.baseAddress, 0x7f3fb0223000n);
    assert.equal(decoded.size, 4096n);
    assert.equal(decoded.access, access ?? 'read-write');
    assert.deepEqual(decoded.packedRkeyInfo.mds.map((m) => [m.index, m.size]), key.mds);
  }
  // The 1.13 parser refuses the same serialized key (its packed rkey ends with 255).
  const encoded = encodeSerializedRemoteKey({ packedRkey: packed, baseAddress: 0x1000n, size: 4096n }, F);
  assert.throws(() => decodeSerializedRemoteKey(encoded, { format: '1.13' }), /UCS_SYS_DEVICE_ID_UNKNOWN/);
  // Without its sys_dev byte, encoding (which validates) refuses it as a 1.20 key.
  assert.throws(() => encodeSerializedRemoteKey({ packedRkey: packed.subarray(0, packed.length - 1), baseAddress: 0x1000n, size: 4096n }, F),
    /sys_dev byte after the MD records is missing/);
});
