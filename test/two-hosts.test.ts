/**
 * ucxx-ts between two hosts: a server in host B and a client in host A (two network, UTS and IPC
 * namespaces joined by a veth pair: test/helpers/two-hosts.ts), so UCX reaches the peer over TCP only,
 * as between two machines. Tag (eager and rendezvous), stream, active messages, RMA into both memory
 * kinds with keys serialized on B and unpacked on A, atomics, connectToAddress with B's worker address,
 * the transports in use, the key validation across hosts, and ucxx-perf. A client in host B is the
 * same-host control. Needs root; skips with the reason otherwise.
 */
import { after, before, test, type TestContext } from 'node:test';
import { strict as assert } from 'node:assert';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import type { EndpointTransport } from 'ucxx-ts';
import { TwoHosts, skipReasonOrThrow, type HostCommand } from './helpers/two-hosts.js';
import type { Peer, PeerMessage } from './helpers/peer.js';

const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'cli', 'ucxx-perf.js');
const SHARED_MEMORY = new Set(['sysv', 'posix', 'cma', 'xpmem', 'knem']);
const KiB = 1024;
const MiB = 1024 * KiB;

const skip = skipReasonOrThrow();
let hosts: TwoHosts | undefined;
let server: Peer;
let client: Peer;
/** A client in host B: the same-host control. */
let local: Peer;

/** Sends a command and returns its reply; a peer-side error or a timeout fails with the peer's output. */
async function ask(peer: Peer, command: PeerMessage, timeoutMs = 15_000): Promise<PeerMessage> {
  const reply = await peer.call(command, 'reply', timeoutMs);
  if (reply['error'] !== undefined) {
    throw new Error(`peer failed '${command.type}': ${String(reply['error'])}\npeer output:\n${peer.stderr}`);
  }
  return reply;
}

function skipped(t: TestContext): boolean {
  if (skip === null) return false;
  t.skip(skip);
  return true;
}

before(async () => {
  if (skip !== null) return;
  hosts = await TwoHosts.create();
  server = hosts.startPeer(hosts.b, 'two-host-server', { host: hosts.b.address });
  client = hosts.startPeer(hosts.a, 'two-host-client');
  local = hosts.startPeer(hosts.b, 'two-host-client');
  const ready = await server.next('ready', 20_000);
  await Promise.all([client.next('ready', 20_000), local.next('ready', 20_000)]);
  const port = ready['port'] as number;
  await ask(client, { type: 'connect', host: hosts.b.address, port });
  await server.next('connected', 10_000);
  await ask(local, { type: 'connect', host: hosts.b.address, port });
  await server.next('connected', 10_000);
  // By address: A as any host would (tcp over the veth), the control without peer error handling, so
  // that it uses shared memory whatever UCX_MM_ERROR_HANDLING says.
  const address = ready['address'] as string;
  await ask(client, { type: 'connect-address', address });
  await ask(local, { type: 'connect-address', address, errorHandling: false });
});

after(async () => {
  if (hosts === undefined) return;
  try {
    await Promise.all([client, local, server].map((peer) => peer?.stop(5000)));
  } finally {
    hosts.close();
  }
});

test('tag messages from A to B and back: 8 B, 64 KiB and 4 MiB (eager and rendezvous)', async (t) => {
  if (skipped(t)) return;
  for (const [size, seed] of [[8, 1], [64 * KiB, 2], [4 * MiB, 3]] as const) {
    const reply = await ask(client, { type: 'tag', size, seed });
    assert.equal(reply['length'], size);
    assert.equal(reply['mismatch'], -1, `tag message of ${size} bytes`);
  }
  const { halfRoundTripUs } = await ask(client, { type: 'latency', iterations: 500, size: 8 });
  t.diagnostic(`8 B tag latency between the hosts (half the median round trip): ${Number(halfRoundTripUs).toFixed(1)} us`);
});

test('stream bytes from A to B and back: 8 B, 64 KiB, 4 MiB', async (t) => {
  if (skipped(t)) return;
  for (const [size, seed] of [[8, 4], [64 * KiB, 5], [4 * MiB, 6]] as const) {
    const reply = await ask(client, { type: 'stream', size, seed });
    assert.equal(reply['length'], size);
    assert.equal(reply['mismatch'], -1, `stream of ${size} bytes`);
  }
});

test('active messages, plain amSend(id, header, data): 8 B and 1 MiB (rendezvous)', async (t) => {
  if (skipped(t)) return;
  for (const [size, seed] of [[8, 7], [1 * MiB, 8]] as const) {
    const reply = await ask(client, { type: 'am', size, seed, headerSize: 16 });
    assert.equal(reply['length'], size);
    assert.equal(reply['headerMismatch'], -1, 'AM header');
    assert.equal(reply['mismatch'], -1, `AM of ${size} bytes`);
  }
});

test('RMA put/get into UCX-allocated and registered memory, keys serialized on B and unpacked on A', async (t) => {
  if (skipped(t)) return;
  let seed = 100;
  for (const key of ['allocated', 'registered'] as const) {
    for (const [offset, size] of [[0, 8], [8 * KiB + 3, 64 * KiB], [256 * KiB, 512 * KiB]] as const) {
      const what = `${size} bytes at ${offset} of ${key} memory`;
      await ask(client, { type: 'put', key, offset, size, seed: ++seed });
      const verified = await ask(server, { type: 'verify', which: key, offset, length: size, seed });
      assert.equal(verified['mismatch'], -1, `put of ${what}, checked on B`);
      await ask(server, { type: 'fill', which: key, offset, length: size, seed: ++seed });
      const got = await ask(client, { type: 'get', key, offset, size, seed });
      assert.equal(got['mismatch'], -1, `get of ${what}`);
    }
  }
});

test('atomics across the hosts: fetchAdd and compareAndSwap, 64 and 32 bit, on both memory kinds', async (t) => {
  if (skipped(t)) return;
  for (const key of ['allocated', 'registered'] as const) {
    const offset = 4 * KiB;
    await ask(server, { type: 'write-word', which: key, offset, width: 64, value: '10' });
    await ask(server, { type: 'write-word', which: key, offset: offset + 8, width: 32, value: '7' });
    const { results } = await ask(client, { type: 'atomics', key, offset });
    // fetchAdd 10+5, cswap 15->100, failed cswap 1->2, fetchAdd32 7+3, cswap32 10->42, failed cswap32 0->1
    assert.deepEqual(results, ['10', '15', '100', '7', '10', '42'], `${key} memory`);
    assert.equal((await ask(server, { type: 'read-word', which: key, offset, width: 64 }))['value'], '100');
    assert.equal((await ask(server, { type: 'read-word', which: key, offset: offset + 8, width: 32 }))['value'], '42');
  }
});

test("connectToAddress with B's worker address: the address validates, tag and RMA work", async (t) => {
  if (skipped(t)) return;
  const received = ask(server, { type: 'recv-tag', tag: '77', length: 4 * KiB, seed: 200 });
  await ask(client, { type: 'tag-to', via: 'address', tag: '77', size: 4 * KiB, seed: 200 });
  const tag = await received;
  assert.equal(tag['length'], 4 * KiB);
  assert.equal(tag['mismatch'], -1, 'tag message through the address endpoint, checked on B');
  for (const key of ['allocated', 'registered'] as const) {
    await ask(client, { type: 'put', via: 'address', key, offset: 64 * KiB, size: 32 * KiB, seed: 201 });
    assert.equal((await ask(server, { type: 'verify', which: key, offset: 64 * KiB, length: 32 * KiB, seed: 201 }))['mismatch'], -1);
    const got = await ask(client, { type: 'get', via: 'address', key, offset: 64 * KiB, size: 32 * KiB, seed: 201 });
    assert.equal(got['mismatch'], -1, `get through the address endpoint, ${key} memory`);
  }
});

test('transports: tcp over the veth pair only between the hosts; shared memory on one host', async (t) => {
  if (skipped(t)) return;
  const h = hosts as TwoHosts;
  const lanes = async (peer: Peer, via?: string): Promise<EndpointTransport[]> =>
    (await ask(peer, { type: 'transports', ...(via === undefined ? {} : { via }) }))['transports'] as EndpointTransport[];
  const show = (ls: EndpointTransport[]): string => ls.map((l) => `${l.transport}/${l.device}[${l.usage.join(',')}]`).join(' ');

  for (const [side, ls, device] of [
    ['A, by listener', await lanes(client), h.a.device],
    ['A, by address', await lanes(client, 'address'), h.a.device],
    ['B, accepted', await lanes(server), h.b.device],
  ] as const) {
    const data = ls.filter((l) => !l.usage.includes('cm'));
    assert.ok(data.length > 0, `${side}: no lanes`);
    for (const lane of data) {
      assert.equal(lane.transport, 'tcp', `${side}: ${show(ls)}`);
      assert.equal(lane.device, device, `${side}: ${show(ls)}`);
    }
    assert.ok(data.some((l) => l.usage.includes('am')), `${side}: an am lane: ${show(ls)}`);
    t.diagnostic(`${side}: ${show(ls)}`);
  }
  const control = await lanes(local, 'address');
  assert.ok(control.some((l) => SHARED_MEMORY.has(l.transport)), `same host: shared memory expected: ${show(control)}`);
  assert.ok(!control.some((l) => l.device === h.b.device), `same host: no lane over the veth: ${show(control)}`);
  t.diagnostic(`same host, by address: ${show(control)}`);
});

test("a key's shared-memory records are checked only where UCX unpacks them: a bad sysv record is refused on one host, skipped from another", async (t) => {
  if (skipped(t)) return;
  // On B, UCX would attach the forged shmid (and crash, UCX 1.13): refused before UCX sees it.
  const refused = await ask(local, { type: 'unpack', via: 'address', key: 'allocated', bytes: 'forged', as: 'forged' });
  assert.equal(refused['ok'], false, 'one host: the forged key must be refused');
  assert.equal(refused['name'], 'RemoteKeyFormatError');
  assert.match(String(refused['message']), /sysv shared memory segment \d+ does not exist/);

  // The same on one host with peer error handling and UCX_MM_ERROR_HANDLING=n, and no fast lane (a
  // NONE-mode endpoint, which would use shared memory): no lane uses shared memory, yet UCX still
  // unpacks the shared-memory records of a peer on its host. (A pair of its own: both sides need the
  // same setting.)
  const h = hosts as TwoHosts;
  const env = { UCX_MM_ERROR_HANDLING: 'n' };
  const server2 = h.startPeer(h.b, 'two-host-server', { host: h.b.address }, env);
  const client2 = h.startPeer(h.b, 'two-host-client', {}, env);
  try {
    const ready = await server2.next('ready', 20_000);
    await client2.next('ready', 20_000);
    await ask(client2, { type: 'connect', host: h.b.address, port: ready['port'], fastLane: false });
    await ask(client2, { type: 'tag', size: 8, seed: 9 });
    const lanes = (await ask(client2, { type: 'transports' }))['transports'] as EndpointTransport[];
    assert.ok(!lanes.some((l) => SHARED_MEMORY.has(l.transport)), `no shared-memory lane expected: ${JSON.stringify(lanes)}`);
    const refused2 = await ask(client2, { type: 'unpack', key: 'allocated', bytes: 'forged', as: 'forged' });
    assert.equal(refused2['ok'], false, 'one host, tcp lanes only: the forged key must be refused');
    assert.match(String(refused2['message']), /sysv shared memory segment \d+ does not exist/);
    await ask(client2, { type: 'put', key: 'allocated', offset: 0, size: 4 * KiB, seed: 302 });
    assert.equal((await ask(server2, { type: 'verify', which: 'allocated', offset: 0, length: 4 * KiB, seed: 302 }))['mismatch'], -1);
  } finally {
    await Promise.all([client2.stop(5000), server2.stop(5000)]);
  }
  // From A, UCX never unpacks B's shared-memory records: the key is accepted and moves the right bytes.
  const accepted = await ask(client, { type: 'unpack', key: 'allocated', bytes: 'forged', as: 'forged' });
  assert.equal(accepted['ok'], true, `two hosts: ${String(accepted['message'])}`);
  await ask(client, { type: 'put', key: 'forged', offset: 900 * KiB, size: 4 * KiB, seed: 300 });
  assert.equal((await ask(server, { type: 'verify', which: 'allocated', offset: 900 * KiB, length: 4 * KiB, seed: 300 }))['mismatch'], -1);
  // The genuine key still works on one host (its segment exists and covers the region).
  await ask(local, { type: 'put', via: 'address', key: 'allocated', offset: 960 * KiB, size: 4 * KiB, seed: 301 });
  assert.equal((await ask(server, { type: 'verify', which: 'allocated', offset: 960 * KiB, length: 4 * KiB, seed: 301 }))['mismatch'], -1);
});

/** Waits until `command`'s output matches `re`, within `timeoutMs`. */
async function waitForOutput(command: HostCommand, re: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { stdout, stderr } = command.output();
    const match = re.exec(stdout + stderr);
    if (match !== null) return match;
    if (command.child.exitCode !== null || Date.now() > deadline) {
      throw new Error(`no ${re} within ${timeoutMs} ms (exit ${command.child.exitCode}); output:\n${stdout}${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test('ucxx-perf between the hosts: put_bw (allocated and registered) and tag_lat', async (t) => {
  if (skipped(t)) return;
  const h = hosts as TwoHosts;
  const perfServer = h.spawn(h.b, [process.execPath, CLI, '-p', '0']);
  try {
    const port = (await waitForOutput(perfServer, /listening on port (\d+)/, 20_000))[1] as string;
    for (const args of [
      ['-t', 'put_bw', '-s', '8,64K', '-n', '300', '-w', '30'],
      ['-t', 'put_bw', '-s', '64K', '-n', '100', '-w', '10', '-m', 'registered'],
      ['-t', 'tag_lat', '-s', '8', '-n', '1000', '-w', '100'],
    ]) {
      const run = h.spawn(h.a, [process.execPath, CLI, h.b.address, '-p', port, ...args, '--json']);
      const timer = setTimeout(() => run.child.kill('SIGKILL'), 30_000);
      const { code, signal } = await run.exited;
      clearTimeout(timer);
      const { stdout, stderr } = run.output();
      assert.equal(code, 0, `ucxx-perf ${args.join(' ')}: exit ${code} ${signal}\n${stdout}${stderr}\nserver:\n${perfServer.output().stderr}`);
      const results = stdout.trim().split('\n').map((line) => JSON.parse(line) as {
        test: string; size: number; latency_us: { p50: number }; bandwidth_MBps: number;
      });
      assert.ok(results.length > 0);
      for (const r of results) {
        assert.equal(r.test, args[1]);
        assert.ok(r.latency_us.p50 > 0 && r.bandwidth_MBps > 0, JSON.stringify(r));
        t.diagnostic(`ucxx-perf ${args.join(' ')}: ${r.size} B p50 ${r.latency_us.p50.toFixed(2)} us, ${r.bandwidth_MBps.toFixed(1)} MB/s`);
      }
    }
  } finally {
    perfServer.child.kill('SIGKILL');
    await perfServer.exited;
  }
});
