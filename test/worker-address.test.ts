/**
 * Worker addresses from peers are untrusted: `connectToAddress` validates them (src/internal/
 * worker-address.ts) before `ucp_ep_create`, whose `ucp_address_unpack` trusts every byte. Genuine
 * addresses of many configurations validate and connect; truncated, corrupted and random ones are
 * refused with WorkerAddressFormatError (or a UcxError when UCX itself refuses a well-formed one), and
 * the process never crashes (the fuzz runs in a child process, test/peers/address-fuzz.ts).
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { Context, UcxError, UnreachableError, WorkerAddressFormatError, type Worker } from 'ucxx-ts';
import { requireLoadedProfile } from '#ucxx-ts/ffi/ucx-versions.js';
import {
  parseWorkerAddress, transportOfCsum, ucsCrc16, validateWorkerAddress,
} from '#ucxx-ts/internal/worker-address.js';

const PEERS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'peers');

const fromHex = (hex: string): Uint8Array => new Uint8Array(Buffer.from(hex, 'hex'));

/**
 * Addresses packed by UCX 1.13.1 (`worker.getAddress()`) on a host with eth0 = 192.0.2.2 and lo, in a
 * non-default network namespace, with the configuration named (environment for the posix ones).
 */
const FIXTURES: Record<string, { hex: string; transports: string }> = {
  'default (v1)': {
    hex: '204ae773d25f6e00962000637577cc2b3200f8d74f00000000004f03c0888a01cd7f4307c68921060002c0000202cf1917b7513897' +
      '63344bd7e037370013230082cbd721120102e8b9910daaf10a9ef9ffffef00000000cf1917b75138539e3e4bd7e0373701132300828a' +
      '954208e8b9910daaf10a1e8d5377cc2b32004c3e5077ccab33004f23c08823803700000000004308e8b9910daaf10a1ea7d377cc2b32' +
      '004c3e5077ccab33004f23c088c5410000070000c02488e8b9910daaf10a1e478bbd37063600242e5077ccab330092210084c5410000',
    transports: 'self|tcp|tcp|sysv|posix|cma',
  },
  'TLS=tcp': {
    hex: '20ab5603cfd7cf871120060002c0000202cf1917b751389763344bd7e037370013230082e9e520920102e8b9910daaf10a9ef9ffffef' +
      '00000000cf1917b75138539e3e4bd7e037370113230082a591',
    transports: 'tcp|tcp',
  },
  'TLS=sm': {
    hex: '204f69c0b2537eef4d4008e8b9910daaf10a1e8d5377cc2b32004c3e5077ccab33004f23c08825803700000000004108e8b9910daaf1' +
      '0a1ea7d377cc2b32004c3e5077ccab33004f23c088df410040050000c02288e8b9910daaf10a1e478bbd37063600242e5077ccab3300' +
      '92210084df410000',
    transports: 'sysv|posix|cma',
  },
  'TLS=tcp,self': {
    hex: '20d7f8892ea2c880ef2000637577cc2b3200f8d74f00000000004f03c0880b6c6b77bc9bff2121060002c0000202cf1917b7513897' +
      '63344bd7e037370013230082d7e721920102e8b9910daaf10a9ef9ffffef00000000cf1917b75138539e3e4bd7e037370113230082a82f',
    transports: 'self|tcp|tcp',
  },
  'NET_DEVICES=lo': {
    hex: '2046f3f7f9110d91e42000637577cc2b3200f8d74f00000000004f03c088920101201ca3bace21120102e8b9910daaf10a9ef9ffffef' +
      '00000000cf1917b75138539e3e4bd7e037370113230082d6fd4208e8b9910daaf10a1e8d5377cc2b32004c3e5077ccab33004f23c088' +
      '27803700000000004308e8b9910daaf10a1ea7d377cc2b32004c3e5077ccab33004f23c088f9410080060000c02488e8b9910daaf10a' +
      '1e478bbd37063600242e5077ccab330092210084f9410000',
    transports: 'self|tcp|sysv|posix|cma',
  },
  'ADDRESS_VERSION=v2': {
    hex: '0102dbe79a61d438b8d70000637544a4000080001b03881db09a3f5708bb9701060002c0000202cf190c015a0080008b0082cbb90112' +
      '0102e8b9910daaf10a9ef9ffffef00000000cf190c015a0180008b0082c3890208e8b9910daaf10a1e8d534475430081009b03882980' +
      '3700000000000308e8b9910daaf10a1ea7d34475430081009b038806420000070000c00488e8b9910daaf10a1e478bfb554300000099' +
      '008406420000',
    transports: 'self|tcp|tcp|sysv|posix|cma',
  },
  'ADDRESS_DEBUG_INFO=y (name "vm:16931")': {
    hex: '303f960efa9910090c08766d3a31363933312000637577cc2b3200f8d74f00000000004f03c08855266f2fc6d91c8f21060002c00002' +
      '02cf1917b751389763344bd7e037370013230082d85b21120102e8b9910daaf10a9ef9ffffef00000000cf1917b75138539e3e4bd7e0' +
      '37370113230082bcd34208e8b9910daaf10a1e8d5377cc2b32004c3e5077ccab33004f23c0882b803700000000004308e8b9910daaf1' +
      '0a1ea7d377cc2b32004c3e5077ccab33004f23c08823420000070000c02488e8b9910daaf10a1e478bbd37063600242e5077ccab3300' +
      '9221008423420000',
    transports: 'self|tcp|tcp|sysv|posix|cma',
  },
  'ADDRESS_VERSION=v2 ADDRESS_DEBUG_INFO=y': {
    hex: '0103c824adb7c778a21308766d3a31363934340000637544a4000080001b0388a7d7e471f65931a701060002c0000202cf190c015a00' +
      '80008b008288b301120102e8b9910daaf10a9ef9ffffef00000000cf190c015a0180008b0082bb530208e8b9910daaf10a1e8d534475' +
      '430081009b03882d803700000000000308e8b9910daaf10a1ea7d34475430081009b038830420000070000c00488e8b9910daaf10a1e' +
      '478bfb554300000099008430420000',
    transports: 'self|tcp|tcp|sysv|posix|cma',
  },
  'TLS=tcp UCX_TCP_AF_PRIO=inet6 (fd00::2)': {
    hex: '20ae2a8d57cc61f9572092000afd000000000000000000000000000002cf1917b751389763344bd7e037370013230082cda1',
    transports: 'tcp',
  },
  'TLS=posix UCX_POSIX_USE_PROC_LINK=n UCX_POSIX_DIR=/tmp': {
    hex: '209f01aa9066ccfa6e4088e8b9910daaf10a1ea7d377cc2b32004c3e5077ccab33004f23c08db26ea570000000002f746d7000',
    transports: 'posix',
  },
  'TLS=posix ADDRESS_VERSION=v2 UCX_POSIX_USE_PROC_LINK=n UCX_POSIX_DIR=<82-byte path> (extended length)': {
    hex: '0102909474a61a7c35220088e8b9910daaf10a1ea7d34475430081009b03bf52fe5eb418000000002f746d702f77612f6469725f7769' +
      '74685f615f7261746865725f6c6f6e675f6e616d655f746f5f666f7263655f7468655f657874656e6465645f6c656e6774685f656e63' +
      '6f64696e6700',
    transports: 'posix',
  },
  'TLS=posix UCX_POSIX_USE_PROC_LINK=n': {
    hex: '2089293b5fb355b5274088e8b9910daaf10a1ea7d377cc2b32004c3e5077ccab33004f23c088d4b7947600000040',
    transports: 'posix',
  },
  // Host B of test/helpers/two-hosts.ts (own network, UTS and IPC namespaces; tcp on a veth at 10.77.83.2):
  // what a worker on another host sends. Shared-memory and loopback device addresses carry a namespace.
  'another host, namespaced (v1)': {
    hex: '20e9d682fe5b5422222000637577cc2b3200f8d74f00000000004f03c0880c712e83c766d1e921120102f4b54482ae53e4c5950100f0' +
      '00000000cf1917b75138539e3e4bd7e037370113230082bbd5210600020a4d5302cf1917b7513857748d4e716ab0360113230082a367' +
      '4210f4b54482ae53e4c5e10100f0000000008d5377cc2b32004c3e5077ccab33004f23c08800000000000000004310f4b54482ae53e4' +
      'c5e10100f000000000a7d377cc2b32004c3e5077ccab33004f23c0886e5c00c0060000c02490f4b54482ae53e4c5e10100f000000000' +
      '478bbd37063600242e5077ccab3300922100846e5c0000',
    transports: 'self|tcp|tcp|sysv|posix|cma',
  },
  'another host, namespaced (ADDRESS_VERSION=v2)': {
    hex: '0102277466c80810f68d0000637544a4000080001b0388c46d70983751babd01120102f4b54482ae53e4c5950100f000000000cf190c' +
      '015a0180008b0082ba53010600020a4d5302cf190c12490180008b0082c64b0210f4b54482ae53e4c5e10100f0000000008d53447543' +
      '0081009b038802000000000000000310f4b54482ae53e4c5e10100f000000000a7d34475430081009b03887b5c00c0060000c00490f4' +
      'b54482ae53e4c5e10100f000000000478bfb55430000009900847b5c0000',
    transports: 'self|tcp|tcp|sysv|posix|cma',
  },
};

/**
 * Addresses packed by UCX 1.20.1 (the libucx-cu12 wheel) on the same host (eth0 = 192.0.2.2 and lo, in a
 * non-default network namespace). v1 ends with the empty device `0x84 0x80` (md index = release 4), and
 * v2's first byte carries the release in its high nibble (0x41).
 */
const FIXTURES_120: Record<string, { hex: string; transports: string }> = {
  'default (v1)': {
    hex: '201afaf46e7454b97e0000637577cc2b320040975000000000004f03c088380c044c46838a8501060002c0000202cf1917b7513897' +
      '63344bd7e037370013230082e49101120102bdba97ff85086bcef9ffffef00000000cf1917b75138539e3e4bd7e037370113230082e5' +
      'fb0208bdba97ff85086b4e8d5377cc2b320000705077ccab33004f23c0880c808500000000000308bdba97ff85086b4ea7d377cc2b32' +
      '0000705077ccab33004f23c088620a0000070000c00408bdba97ff85086b4e478bbd37063600242e5077ccab330092210084620a0000' +
      '8480',
    transports: 'self|tcp|tcp|sysv|posix|cma|',
  },
  'TLS=tcp': {
    hex: '206272c87cf61e61a200060002c0000202cf1917b751389763344bd7e0373700132300828cf300120102bdba97ff85086bcef9ffff' +
      'ef00000000cf1917b75138539e3e4bd7e037370113230082b67b8480',
    transports: 'tcp|tcp|',
  },
  'TLS=sm': {
    hex: '2005dd13e8525a8cee0008bdba97ff85086b4e8d5377cc2b320000705077ccab33004f23c08815808500000000000108bdba97ff85' +
      '086b4ea7d377cc2b320000705077ccab33004f23c088620a0040050000c00208bdba97ff85086b4e478bbd37063600242e5077ccab33' +
      '0092210084620a00008480',
    transports: 'sysv|posix|cma|',
  },
  'ADDRESS_VERSION=v2': {
    hex: '4102527469ef9e42678c000063754426000080001b0388214216fd5dde451101060002c0000202cf190c015a0080008b0082c59501' +
      '120102bdba97ff85086bcef9ffffef00000000cf190c015a0180008b00828ed70208bdba97ff85086b4e8d5344e5430081009b038817' +
      '808500000000000308bdba97ff85086b4ea7d344e5430081009b0388620a0000070000c00488bdba97ff85086b4e478bfb5543000000' +
      '990084620a0000',
    transports: 'self|tcp|tcp|sysv|posix|cma',
  },
  'ADDRESS_DEBUG_INFO=y (name "vm:2658")': {
    hex: '300090ed39ee38181507766d3a323635380000637577cc2b320040975000000000004f03c0888bed0c75c56af16201060002c00002' +
      '02cf1917b751389763344bd7e037370013230082d67901120102bdba97ff85086bcef9ffffef00000000cf1917b75138539e3e4bd7e0' +
      '37370113230082a3cd0208bdba97ff85086b4e8d5377cc2b320000705077ccab33004f23c0881b808500000000000308bdba97ff8508' +
      '6b4ea7d377cc2b320000705077ccab33004f23c088620a0000070000c00408bdba97ff85086b4e478bbd37063600242e5077ccab3300' +
      '92210084620a00008480',
    transports: 'self|tcp|tcp|sysv|posix|cma|',
  },
  'ADDRESS_VERSION=v2 ADDRESS_DEBUG_INFO=y': {
    hex: '410338af30979065ce6707766d3a32363538000063754426000080001b03888076a503b82fc2e101060002c0000202cf190c015a00' +
      '80008b0082ca5301120102bdba97ff85086bcef9ffffef00000000cf190c015a0180008b0082ea530208bdba97ff85086b4e8d5344e5' +
      '430081009b03881d808500000000000308bdba97ff85086b4ea7d344e5430081009b0388620a0000070000c00488bdba97ff85086b4e' +
      '478bfb5543000000990084620a0000',
    transports: 'self|tcp|tcp|sysv|posix|cma',
  },
};

/** The fixtures packed by the UCX of a format (a live worker's address is of the loaded format). */
const FIXTURES_OF: Record<'1.13' | '1.20', Record<string, { hex: string; transports: string }>> = {
  '1.13': FIXTURES, '1.20': FIXTURES_120,
};

/** The loaded UCX's worker address format (UCX is loaded by then: a Context exists). */
function loadedFormat(): '1.13' | '1.20' {
  const format = requireLoadedProfile().workerAddressFormat;
  assert.ok(format === '1.13' || format === '1.20', `no worker address parser for this UCX (${format})`);
  return format;
}

/** The configurations whose live addresses are checked (each worker also connects to itself). */
const CONFIGS: Record<string, string>[] = [
  {}, { TLS: 'tcp' }, { TLS: 'sm' }, { TLS: 'tcp,self' }, { NET_DEVICES: 'lo' }, { TLS: 'posix' }, { TLS: 'sysv,cma' },
  { ADDRESS_VERSION: 'v2' }, { ADDRESS_DEBUG_INFO: 'y' }, { ADDRESS_VERSION: 'v2', ADDRESS_DEBUG_INFO: 'y' },
  { TLS: 'tcp', ADDRESS_VERSION: 'v2' },
];

function transportsOf(bytes: Uint8Array, format?: '1.13' | '1.20'): string {
  return parseWorkerAddress(bytes, format).devices.map((d) => d.ifaces.map((i) => i.transport ?? '?').join('+')).join('|');
}

/**
 * A tag message from `worker` to itself through `address`, after a flush. NONE mode: some
 * configurations have shared memory only, which PEER mode (the default from UCX 1.19 on) cannot use.
 */
async function roundTrip(worker: Worker, address: Uint8Array, tag: bigint): Promise<void> {
  const endpoint = worker.connectToAddress(address, { errorHandling: 'none' });
  try {
    await endpoint.flush();
    const data = new Uint8Array(200).map((_, i) => (i * 7 + Number(tag)) & 0xff);
    const back = new Uint8Array(256);
    const receive = worker.tagRecv(back, tag);
    await endpoint.tagSend(data, tag);
    const info = await receive;
    assert.equal(info.length, data.length);
    assert.deepEqual(back.subarray(0, info.length), data);
  } finally {
    await endpoint.close();
  }
}

test('the hex fixtures of UCX 1.20.1 validate as 1.20, and each version refuses the other\'s v1 addresses', () => {
  for (const [name, fixture] of Object.entries(FIXTURES_120)) {
    const bytes = fromHex(fixture.hex);
    assert.doesNotThrow(() => validateWorkerAddress(bytes, '1.20'), name);
    assert.equal(transportsOf(bytes, '1.20'), fixture.transports, name);
  }
  const named = parseWorkerAddress(fromHex((FIXTURES_120['ADDRESS_DEBUG_INFO=y (name "vm:2658")'] as { hex: string }).hex), '1.20');
  assert.equal(named.version, 1);
  assert.equal(named.name, 'vm:2658');
  assert.equal(named.uuid, 0x151838ee39ed9000n);
  const v2 = parseWorkerAddress(fromHex((FIXTURES_120['ADDRESS_VERSION=v2'] as { hex: string }).hex), '1.20');
  assert.equal(v2.version, 2);
  // Each parser names the other version's addresses by the release their bytes tell: 1.20's v2 header
  // nibble and v1 trailing empty device (release 4), 1.13's md flags (which 1.20 reads as md indices
  // beyond 64) or the absent release device.
  // (validateWorkerAddress is src/internal's, whose error class is not the package's: by name.)
  const refusal = (hex: string, format: '1.13' | '1.20'): { packedBy?: string; message: string } => {
    try {
      validateWorkerAddress(fromHex(hex), format);
    } catch (err) {
      assert.equal((err as Error).name, 'WorkerAddressFormatError', String(err));
      return err as { packedBy?: string; message: string };
    }
    assert.fail(`accepted as ${format}`);
  };
  for (const name of ['ADDRESS_VERSION=v2', 'default (v1)', 'TLS=tcp', 'TLS=sm']) {
    const err = refusal((FIXTURES_120[name] as { hex: string }).hex, '1.13');
    assert.equal(err.packedBy, 'UCX 1.20', name);
    assert.match(err.message, /packed by UCX 1\.20, but this process runs UCX 1\.13/, name);
  }
  for (const name of ['TLS=sm', 'default (v1)', 'ADDRESS_VERSION=v2']) {
    const err = refusal((FIXTURES[name] as { hex: string }).hex, '1.20');
    assert.equal(err.packedBy, 'UCX 1.13.x', name);
    assert.match(err.message, /packed by UCX 1\.13\.x, but this process runs UCX 1\.(19|20)/, name);
  }
  // A 1.13 tcp-only address has no md flags: only the missing release device tells it from 1.20's.
  assert.equal(refusal((FIXTURES['TLS=tcp'] as { hex: string }).hex, '1.20').packedBy, 'UCX 1.13.x');
  // A malformed address is no release's: packedBy stays undefined.
  assert.equal(refusal('2001', '1.20').packedBy, undefined);
});

test('the hex fixtures (UCX 1.13.1 addresses of several configurations) validate', () => {
  for (const [name, fixture] of Object.entries(FIXTURES)) {
    const bytes = fromHex(fixture.hex);
    assert.doesNotThrow(() => validateWorkerAddress(bytes, '1.13'), name);
    assert.equal(transportsOf(bytes, '1.13'), fixture.transports, name);
  }
  const parsed = parseWorkerAddress(fromHex((FIXTURES['ADDRESS_DEBUG_INFO=y (name "vm:16931")'] as { hex: string }).hex), '1.13');
  assert.equal(parsed.version, 1);
  assert.equal(parsed.name, 'vm:16931');
  assert.equal(parsed.uuid, 0x0c091099fa0e963fn);
  assert.equal(parseWorkerAddress(fromHex((FIXTURES['ADDRESS_VERSION=v2'] as { hex: string }).hex), '1.13').version, 2);
});

test('transport checksums are ucs_crc16_string of the names', () => {
  assert.equal(ucsCrc16('self'), 0x7563);
  assert.equal(ucsCrc16('tcp'), 0x19cf);
  assert.equal(transportOfCsum(0x538d), 'sysv');
  assert.equal(transportOfCsum(0xd3a7), 'posix');
  assert.equal(transportOfCsum(0x8b47), 'cma');
  assert.equal(transportOfCsum(0x1234), undefined);
});

test("PEER mode to an address with shared memory only: an UnreachableError that names { errorHandling: 'none' }, which connects", async () => {
  await using context = new Context({ config: { TLS: 'sm' } });
  const worker = context.createWorker();
  const address = worker.getAddress();
  assert.throws(() => worker.connectToAddress(address, { errorHandling: 'peer' }), (err: unknown) => {
    assert.ok(err instanceof UnreachableError, `not an UnreachableError: ${String(err)}`);
    assert.match(err.message, /connect with \{ errorHandling: 'none' \}/);
    return true;
  });
  await roundTrip(worker, address, 99n);
});

test('genuine addresses of every configuration validate, connect, flush and carry a tag message', async () => {
  for (const [index, config] of CONFIGS.entries()) {
    const context = new Context({ config });
    try {
      const worker = context.createWorker();
      const address = worker.getAddress();
      assert.doesNotThrow(() => validateWorkerAddress(address), JSON.stringify(config));
      await roundTrip(worker, address, BigInt(100 + index));
    } finally {
      await context.close();
    }
  }
});

test('workers of different configurations connect to each other (v1 <-> v2, debug info, tcp only)', async () => {
  const configs: Record<string, string>[] = [{}, { ADDRESS_VERSION: 'v2' }, { ADDRESS_DEBUG_INFO: 'y' }, { TLS: 'tcp' }];
  const contexts = configs.map((config) => new Context({ config }));
  try {
    const workers = contexts.map((c) => c.createWorker());
    const addresses = workers.map((w) => w.getAddress());
    let tag = 500n;
    for (const [i, from] of workers.entries()) {
      for (const [j, to] of workers.entries()) {
        if (i === j) continue;
        const endpoint = from.connectToAddress(addresses[j] as Uint8Array);
        try {
          const back = new Uint8Array(64);
          const receive = to.tagRecv(back, ++tag);
          await endpoint.tagSend(new Uint8Array(64).fill(i * 16 + j), tag);
          assert.equal((await receive).length, 64);
          assert.ok(back.every((b) => b === i * 16 + j));
        } finally {
          await endpoint.close();
        }
      }
    }
  } finally {
    for (const c of contexts) await c.close();
  }
});

test('any memory view of a genuine address connects, and the caller may reuse it at once', async () => {
  const context = new Context();
  try {
    const worker = context.createWorker();
    const address = worker.getAddress();
    const big = new Uint8Array(address.length + 13);
    big.set(address, 5);
    const shared = new Uint8Array(new SharedArrayBuffer(address.length));
    shared.set(address);
    for (const view of [Buffer.from(address), big.subarray(5, 5 + address.length), new DataView(shared.buffer),
      address.slice().buffer]) {
      const endpoint = worker.connectToAddress(view);
      if (view instanceof DataView) shared.fill(0); // the endpoint was made from a private copy
      await endpoint.flush();
      await endpoint.close();
    }
  } finally {
    await context.close();
  }
});

test('every truncation of genuine addresses is refused, and so is every extension', async () => {
  const live: Uint8Array[] = [];
  const contexts = CONFIGS.map((config) => new Context({ config }));
  try {
    const workers = contexts.map((c) => c.createWorker());
    for (const w of workers) live.push(w.getAddress());
    const worker = workers[0] as Worker;
    // The fixtures of the loaded UCX's format: another version's addresses are refused whole.
    const all = [...live, ...Object.values(FIXTURES_OF[loadedFormat()]).map((f) => fromHex(f.hex))];
    for (const address of all) {
      assert.throws(() => validateWorkerAddress(address.subarray(0, 0)), WorkerAddressFormatError);
      assert.throws(() => worker.connectToAddress(address.subarray(0, 0)), RangeError);
      for (let n = 1; n < address.length; n++) {
        assert.throws(() => worker.connectToAddress(address.subarray(0, n)), WorkerAddressFormatError,
          `${Buffer.from(address).toString('hex')} cut to ${n}`);
      }
      for (const extra of [[0], [0xff], [1, 2, 3]]) {
        assert.throws(() => worker.connectToAddress(new Uint8Array([...address, ...extra])),
          /after its last device/);
      }
    }
  } finally {
    for (const c of contexts) await c.close();
  }
});

test('the malformations that crash UCX 1.13 are refused with a precise message', async () => {
  const contexts = [new Context(), new Context({ config: { ADDRESS_VERSION: 'v2' } })];
  try {
    const [v1worker, v2worker] = contexts.map((c) => c.createWorker()) as [Worker, Worker];
    const v1 = v1worker.getAddress();
    const v2 = v2worker.getAddress();
    const p1 = parseWorkerAddress(v1);
    const p2 = parseWorkerAddress(v2);
    const refuse = (bytes: Uint8Array, pattern: RegExp): void => {
      assert.throws(() => v1worker.connectToAddress(bytes), (err: unknown) => {
        assert.ok(err instanceof WorkerAddressFormatError, String(err));
        assert.equal(err.code, 'UCXX_ERR_WORKER_ADDRESS_FORMAT');
        assert.equal(err.name, 'WorkerAddressFormatError');
        assert.match(err.message, pattern);
        return true;
      });
    };
    const edit = (base: Uint8Array, fn: (b: Uint8Array, v: DataView) => void): Uint8Array => {
      const b = base.slice();
      fn(b, new DataView(b.buffer));
      return b;
    };
    const tcp1 = p1.devices.find((d) => d.ifaces[0]?.transport === 'tcp' && d.address.length === 6);
    assert.ok(tcp1, 'the default address has a tcp device on an IPv4 interface');

    // ucp_address_unpack_header: ucs_assertv_always(version == V2) aborts on versions 2..15.
    for (let version = 2; version < 16; version++) {
      refuse(edit(v1, (b) => { b[0] = ((b[0] as number) & 0xf0) | version; }), /unknown address version/);
    }
    // ucp_ep_config_init: ucs_assertv_always(rkey_size <= am.max_bcopy) aborts with a small v2 seg_size.
    refuse(edit(v2, (_b, v) => {
      for (const d of p2.devices) for (const i of d.ifaces) v.setUint16(i.attributes.offset + 4, 0, true);
    }), /active-message interface with a 0-byte receive segment/);
    // A tcp device address of length 0 makes ae->dev_addr NULL: uct_tcp_iface_is_reachable segfaults.
    refuse(new Uint8Array([...v1.subarray(0, tcp1.address.offset - 1),
      (v1[tcp1.address.offset - 1] as number) & 0xe0, ...v1.subarray(tcp1.address.offset + tcp1.address.length)]),
    /device #\d+ \(tcp\) address must be at least 2 bytes/);
    // v2 md index >= 64 writes past ae_cmpts[UCP_MAX_MDS] on the stack.
    const dev2 = p2.devices[1] as { offset: number };
    refuse(new Uint8Array([...v2.subarray(0, dev2.offset), 0x7f, 100, ...v2.subarray(dev2.offset + 1)]),
      /md index 100, beyond UCP_MAX_MDS/);
    // Structure that no worker address has.
    refuse(edit(v1, (b) => { b[0] = (b[0] as number) | 0x40; }), /client id/);
    refuse(edit(v1, (b) => { b[0] = (b[0] as number) | 0x80; }), /AM-only/);
    refuse(edit(v2, (b) => { b[1] = 0; }), /v2 address without a worker uuid/);
    refuse(edit(v2, (b) => { b[1] = 0x12; }), /unknown v2 header flags/);
    const ifaceLenAt = (p1.devices[0]?.ifaces[0]?.address.offset ?? 0) - 1;
    refuse(edit(v1, (b) => { b[ifaceLenAt] = (b[ifaceLenAt] as number) | 0x40; }),
      /carries endpoint addresses/);
    refuse(edit(v1, (b, v) => { v.setFloat32((p1.devices[0]?.ifaces[0]?.attributes.offset ?? 0) + 4, NaN, true); }),
      /bandwidth NaN/);
    refuse(edit(v1, (b, v) => { v.setUint32((p1.devices[0]?.ifaces[0]?.attributes.offset ?? 0) + 12, 0x00400000, true); }),
      /unknown capability bits/);
    refuse(edit(v2, (b) => { b[(p2.devices[0]?.ifaces[0]?.attributes.offset ?? 0) + 1] = 0x0f; }), /bandwidth is NaN/);
    refuse(edit(v2, (b) => { b[(p2.devices[0]?.ifaces[0]?.attributes.offset ?? 0) + 7] = 0x04; }), /unknown interface flags/);
    // Number of paths and system device: packed only for 2+ paths and for a system device below 64.
    const lenAt = tcp1.address.offset - 1;
    const insert = (flag: number, value: number): Uint8Array => new Uint8Array([...v1.subarray(0, lenAt),
      (v1[lenAt] as number) | flag, value, ...v1.subarray(lenAt + 1)]);
    assert.doesNotThrow(() => validateWorkerAddress(insert(0x40, 2), loadedFormat()));
    assert.doesNotThrow(() => validateWorkerAddress(insert(0x20, 63), loadedFormat()));
    refuse(insert(0x40, 1), /packs a number of paths of 1/);
    refuse(insert(0x20, 200), /system device 200, beyond 63/);
    refuse(insert(0x20, 255), /system device 255/);
    // A flag without its byte: the byte is taken from the device address, which comes out short.
    refuse(edit(v1, (b) => { b[lenAt] = (b[lenAt] as number) | 0x40; }), /packs a number of paths of 0/);
    // Transport address contents that a transport would read past.
    refuse(edit(v1, (b) => { b[tcp1.address.offset + 1] = 10; }), /must be 18 bytes for an IPv6 interface/);
    refuse(edit(v1, (b) => { b[tcp1.address.offset] = 1; }), /must be 18 bytes for a loopback interface/);
    refuse(edit(v1, (b) => { b[tcp1.address.offset + 1] = 7; }), /address family 7/);
    const sm = p1.devices.find((d) => d.ifaces[0]?.transport === 'sysv');
    assert.ok(sm);
    refuse(edit(v1, (b) => { b[sm.address.offset + 7] = (b[sm.address.offset + 7] as number) | 0x80; }),
      /namespace flag \(bit 63\) but no namespace/);
  } finally {
    for (const c of contexts) await c.close();
  }
});

test('synthetic addresses: IB, posix, cma and empty lists follow the transports\' own rules', async () => {
  const V1_ATTRS = '17b751389763344bd7e0373700132300';
  const HEAD = '200102030405060708';
  // Both parsers: a v1 md byte is REG 0x20 / ALLOC 0x40 | 5-bit index in 1.13, a bare 7-bit index in 1.20.
  for (const format of ['1.13', '1.20'] as const) {
    const md = (byte13: number): string => (format === '1.13' ? byte13 : byte13 & 0x1f).toString(16).padStart(2, '0');
    // 1.20 ends a v1 address with an empty device carrying its release number (0x84 0x80) after the
    // real one, which is then not LAST.
    const devLen = (length: number): string => ((format === '1.13' ? 0x80 : 0) | length).toString(16).padStart(2, '0');
    const tail = format === '1.13' ? '' : '8480';
    const ib = (dev: string, udAddr: string): Uint8Array => fromHex(
      `${HEAD}${md(0x25)}${devLen(dev.length / 2)}${dev}278a${V1_ATTRS}00` + `31d1${V1_ATTRS}${(0x80 | (udAddr.length / 2)).toString(16).padStart(2, '0')}${udAddr}${tail}`);
    // IB link layer, LID only; with path MTU; RoCE GID + pkey.
    for (const dev of ['003412', '02341204', `0c${'ab'.repeat(16)}ffff`, '4034120011223344556677']) {
      assert.doesNotThrow(() => validateWorkerAddress(ib(dev, '563412'), format), dev);
    }
    assert.throws(() => validateWorkerAddress(ib('0034', '563412'), format), /must be 3 bytes for flags 0x0/);
    assert.throws(() => validateWorkerAddress(ib('403412', '563412'), format), /must be 11 bytes/);
    assert.throws(() => validateWorkerAddress(ib('303412aaaa', '563412'), format), /both SUBNET16 and SUBNET64/);
    assert.throws(() => validateWorkerAddress(ib('003412', '5634'), format), /ud_verbs\) address must be 3 bytes/);

    const posix = (addr: string): Uint8Array =>
      fromHex(`${HEAD}${md(0x40)}${devLen(8)}e8b9910daaf10a1ea7d3${V1_ATTRS}${(0x80 | (addr.length / 2)).toString(16)}${addr}${tail}`);
    assert.doesNotThrow(() => validateWorkerAddress(posix('1b816a4f000000002f746d7000'), format)); // dir "/tmp"
    assert.throws(() => validateWorkerAddress(posix('1b816a4f000000002f746d70'), format), /one NUL-terminated string/);
    assert.throws(() => validateWorkerAddress(posix('1b816a4f00000000'), format), /lacks the backing directory/);
    assert.doesNotThrow(() => validateWorkerAddress(posix('2a00000007000090' + '0102030405060708'), format)); // procfs + pid ns
    assert.throws(() => validateWorkerAddress(posix('2a00000007000090'), format), /procfs segment id with PID namespace/);
    assert.throws(() => validateWorkerAddress(posix('2a00000007000010' + '0102030405060708'), format), /without the procfs flag/);

    const cma = (addr: string): Uint8Array =>
      fromHex(`${HEAD}${md(0x24)}${devLen(8)}e8b9910daaf10a1e478b${V1_ATTRS}${(0x80 | (addr.length / 2)).toString(16)}${addr}${tail}`);
    assert.doesNotThrow(() => validateWorkerAddress(cma('96200000'), format));
    assert.doesNotThrow(() => validateWorkerAddress(cma(`96200080${'00'.repeat(4)}${'11'.repeat(8)}`), format));
    assert.throws(() => validateWorkerAddress(cma('96200080'), format), /PID namespace flag \(bit 31\) but no namespace/);

    // An unknown transport is walked over, whatever its addresses: UCX never hands it to a transport.
    assert.doesNotThrow(() => validateWorkerAddress(fromHex(`${HEAD}${md(0x25)}${devLen(3)}aabbcc3412${V1_ATTRS}85${'ee'.repeat(5)}${tail}`), format));
  }

  // The empty list (UCP_NULL_RESOURCE): well-formed, and UCX refuses to connect to it.
  const empty = fromHex(`${HEAD}ff`);
  assert.doesNotThrow(() => validateWorkerAddress(empty));
  const context = new Context();
  try {
    assert.throws(() => context.createWorker().connectToAddress(empty), UcxError);
  } finally {
    await context.close();
  }
});

test('non-byte inputs are TypeErrors; the error class is exported', () => {
  assert.throws(() => validateWorkerAddress('20' as never), TypeError);
  const err = new WorkerAddressFormatError('x');
  assert.ok(err instanceof Error);
  assert.equal(err.code, 'UCXX_ERR_WORKER_ADDRESS_FORMAT');
  assert.equal(err.name, 'WorkerAddressFormatError');
});

test('fuzz (child processes): random and mutated addresses are refused or connect and close, never crash', () => {
  for (const seed of [1, 2, 3]) {
    const result = spawnSync(process.execPath, [path.join(PEERS, 'address-fuzz.js'), JSON.stringify({ seed, count: 2000 })], {
      encoding: 'utf8', timeout: 240_000, maxBuffer: 64 << 20, env: { ...process.env, UCX_LOG_LEVEL: 'fatal' },
    });
    const why = `address-fuzz seed ${seed}: signal ${String(result.signal)}, status ${String(result.status)}\n` +
      `${result.stdout.slice(-2000)}\n${result.stderr.slice(-6000)}`;
    assert.equal(result.signal, null, why);
    assert.equal(result.status, 0, why);
    const summary = new RegExp('address-fuzz: seed=(\\d+) inputs=(\\d+) refused=(\\d+) \\(format=(\\d+) ucx=(\\d+)\\) ' +
      'accepted=(\\d+) flushed=(\\d+) failed=(\\d+) stalled=(\\d+) foreign=(\\d+)').exec(result.stdout);
    assert.ok(summary, why);
    const [, gotSeed, inputs, refused, format, ucx, accepted, flushed, failed, stalled, foreign] = summary.map(Number) as number[];
    assert.equal(gotSeed, seed, why);
    assert.equal(inputs, 2000, why);
    // The outcomes account for every input, and the refusals for every refused one.
    assert.equal((refused as number) + (accepted as number) + (foreign as number), inputs, `inputs unaccounted for: ${why}`);
    assert.equal((format as number) + (ucx as number), refused, why);
    assert.ok((flushed as number) + (failed as number) + (stalled as number) <= (accepted as number), why);
    assert.ok((format as number) > 500 && (accepted as number) > 100 && (refused as number) > 500, why);
    assert.ok((flushed as number) > 0, `no accepted address carried a message: ${why}`);
  }
});
