/**
 * Peers on different UCX releases: a ucxx-ts process on the system's UCX (Debian 12: 1.13.1) and one on
 * the libucx-cu12 wheel's (1.20.1, from .venv through UCXX_TS_UCX_LIBDIR), whatever UCX this run
 * uses. UCX connects no such pair; what is checked is that each side gets a typed error that names the
 * releases, within the time a connect takes, and that neither process crashes or hangs: over a listener
 * in both directions and both error-handling modes, and with the other release's worker address.
 * Skipped (visibly) without the wheel, unless UCXX_TS_REQUIRE_WHEEL=1 makes that a failure (CI).
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Peer, type PeerMessage } from './helpers/peer.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** How long one step may take before the test calls it a hang (a refused connect takes well under 1 s). */
const STEP_MS = 20_000;
/** Connects of a client on the other release per test: each must be refused, on both sides. */
const CROSSED_CONNECTS = 10;

function wheelLibDir(): string | null {
  const lib = join(ROOT, '.venv', 'lib');
  if (!existsSync(lib)) return null;
  for (const python of readdirSync(lib).filter((name) => name.startsWith('python3'))) {
    const dir = join(lib, python, 'site-packages', 'libucx', 'lib');
    if (existsSync(join(dir, 'libucp.so.0'))) return dir;
  }
  return null;
}

const wheel = wheelLibDir();
const skip = wheel === null ? 'no libucx wheel in .venv (bash scripts/ensure-deps.sh installs it)' : null;
if (skip !== null && process.env['UCXX_TS_REQUIRE_WHEEL'] === '1') throw new Error(`UCXX_TS_REQUIRE_WHEEL=1 but ${skip}`);

type Side = 'system' | 'wheel';
const libDir = (side: Side): string => (side === 'system' ? '' : wheel ?? '');

async function start(side: Side, errorHandling: string | undefined): Promise<{ peer: Peer; version: string }> {
  const peer = Peer.start('version-peer', errorHandling === undefined ? {} : { errorHandling }, { UCXX_TS_UCX_LIBDIR: libDir(side) });
  const ready = await peer.next('ready', STEP_MS);
  return { peer, version: String(ready['version']) };
}

const minorOf = (version: string): string => version.split('.').slice(0, 2).join('.');

/** Stops a peer and checks it ended by itself with status 0 (no crash, no hang in its teardown). */
async function stopCleanly(peer: Peer, what: string): Promise<void> {
  await peer.stop(STEP_MS);
  const { code, signal } = await peer.exited;
  assert.deepEqual({ code, signal }, { code: 0, signal: null }, `${what} exit; its stderr:\n${peer.stderr}`);
}

/** The system's and the wheel's versions, once (each from a peer that loaded it). */
let versions: Record<Side, string> | undefined;
async function releases(): Promise<Record<Side, string> | string> {
  if (versions === undefined) {
    const a = await start('system', undefined);
    const b = await start('wheel', undefined);
    versions = { system: a.version, wheel: b.version };
    await stopCleanly(a.peer, 'system peer');
    await stopCleanly(b.peer, 'wheel peer');
  }
  return minorOf(versions.system) === minorOf(versions.wheel)
    ? `the system's UCX and the wheel's are both ${versions.system}: no pair of releases to test`
    : versions;
}

const DIRECTIONS: [listener: Side, client: Side][] = [['system', 'wheel'], ['wheel', 'system']];
const MODES: (string | undefined)[] = [undefined, 'peer'];

for (const [listenerSide, clientSide] of DIRECTIONS) {
  for (const mode of MODES) {
    const modeText = mode === undefined ? 'default error handling' : `{ errorHandling: '${mode}' }`;
    test(`a ${listenerSide}-UCX listener and a ${clientSide}-UCX client (${modeText}): typed errors on both sides, ` +
      'no crash, and the listener still serves its own release', { timeout: 120_000 }, async (t) => {
      if (skip !== null) return t.skip(skip);
      const known = await releases();
      if (typeof known === 'string') return t.skip(known);
      const server = await start(listenerSide, mode);
      const client = await start(clientSide, mode);
      const same = await start(listenerSide, mode);
      try {
        const listening = await server.peer.call({ type: 'listen' }, 'listening', STEP_MS);
        // A ucxx-ts client tells its UCX release in its client id, and the listener refuses another
        // release's request before UCX reads it: UCX itself reads it as garbage and now and then creates
        // an endpoint that fails at once (docs/ucx-1.20-bugs/cross_release_accept.c, 1-2 of 10-20 tries).
        for (let attempt = 0; attempt < CROSSED_CONNECTS; attempt++) {
          const result = await client.peer.call({ type: 'connect', port: listening['port'] }, 'connect-result', STEP_MS);
          assert.equal(result['ok'], false, `the connect across releases succeeded: ${JSON.stringify(result)}`);
          const error = result['error'] as PeerMessage & { message: string };
          assert.equal(error['name'], 'ConnectionRefusedError', JSON.stringify(error));
          assert.equal(error['code'], 'UCS_ERR_NOT_CONNECTED');
          assert.match(error.message, /listener there refused the connection/);
          assert.ok(error.message.includes(`A listener on another UCX release refuses a client this way too: this process runs UCX ${client.version}`),
            error.message);

          const refused = await server.peer.next('connection-error', STEP_MS);
          const accept = refused['error'] as PeerMessage & { message: string };
          assert.equal(refused['isClass'], true, 'a ConnectionAcceptError');
          assert.equal(accept['name'], 'ConnectionAcceptError');
          assert.equal(accept['code'], 'UCS_ERR_REJECTED');
          assert.equal(refused['ucxStatus'], -23, 'UCS_ERR_REJECTED: the listener refused it itself');
          assert.match(String(refused['client']), /^127\.0\.0\.1:\d+$/);
          assert.ok(accept.message.includes(`that ucxx-ts client runs UCX ${minorOf(client.version)}, this process runs UCX ${server.version}`),
            accept.message);
        }

        // The listener goes on: a client of its own release connects and a message goes through.
        await t.test('the listener still serves a client of its own release', async () => {
          const ok = await same.peer.call({ type: 'connect', port: listening['port'] }, 'connect-result', STEP_MS);
          assert.equal(ok['ok'], true, JSON.stringify(ok));
          assert.deepEqual(ok['probe'], { outcome: 'sent' });
          const accepted = await server.peer.next('accepted', STEP_MS);
          assert.deepEqual(accepted['probe'], { outcome: 'sent' });
          // The crossed client was never handed out as a live connection.
          await assert.rejects(server.peer.next('accepted', 200), /timed out/);
        });
      } finally {
        for (const [p, what] of [[client.peer, 'client'], [same.peer, 'same-release client'], [server.peer, 'listener']] as const) {
          await stopCleanly(p, `the ${what}`);
        }
      }
    });
  }
}

for (const [ownerSide, clientSide] of DIRECTIONS) {
  for (const mode of MODES) {
    const modeText = mode === undefined ? 'default error handling' : `{ errorHandling: '${mode}' }`;
    test(`connectToAddress on ${clientSide} UCX with the worker address of a ${ownerSide}-UCX worker (${modeText}): ` +
      'WorkerAddressFormatError naming both releases, before UCX reads it', { timeout: 60_000 }, async (t) => {
      if (skip !== null) return t.skip(skip);
      const known = await releases();
      if (typeof known === 'string') return t.skip(known);
      const owner = await start(ownerSide, mode);
      const client = await start(clientSide, mode);
      try {
        const listening = await owner.peer.call({ type: 'listen' }, 'listening', STEP_MS);
        const result = await client.peer.call({ type: 'connect-address', address: listening['address'] }, 'connect-result', STEP_MS);
        assert.equal(result['ok'], false, `connectToAddress across releases succeeded: ${JSON.stringify(result)}`);
        const error = result['error'] as PeerMessage & { message: string };
        assert.equal(error['name'], 'WorkerAddressFormatError', JSON.stringify(error));
        assert.equal(error['code'], 'UCXX_ERR_WORKER_ADDRESS_FORMAT');
        // The packer as its bytes tell it: 1.13 by the format it reads, a 1.16+ by its release number.
        const packedBy = String(error['packedBy']);
        const ownerMinor = minorOf(owner.version);
        assert.ok(packedBy === `UCX ${ownerMinor}` || packedBy.startsWith(`UCX ${ownerMinor}.`), `packedBy ${packedBy}`);
        assert.ok(error.message.includes(`packed by ${packedBy}, but this process runs UCX ${client.version},`), error.message);
        // The owner saw nothing: no connection was attempted.
        await assert.rejects(owner.peer.next('accepted', 200), /timed out/);
      } finally {
        await stopCleanly(client.peer, 'client');
        await stopCleanly(owner.peer, 'address owner');
      }
    });
  }
}
