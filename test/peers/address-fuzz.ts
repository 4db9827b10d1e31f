/**
 * Test peer: feeds random and mutated worker addresses to `worker.connectToAddress` and checks that
 * each one is either refused (WorkerAddressFormatError, or a UcxError from UCX) or gives an endpoint
 * that survives progress, a small send and a short flush, and then closes. A crash kills this process,
 * which is why it runs apart from the test runner.
 *
 * Argument: JSON { seed, count, configs?: [UCX config of each worker], trace?: path, batch? }.
 * Prints one summary line:
 *   address-fuzz: seed=S inputs=N refused=R (format=F ucx=U) accepted=A flushed=L failed=E stalled=T
 *   foreign=X [per-mutation refused/accepted]
 * and exits 0; exits 1 on any other outcome, naming the seed and the input.
 *
 * What is fuzzed is the address *format*. A mutation that keeps the format but names another target
 * (another tcp host:port, shared-memory segment or process) is connected only when that target is one of
 * this process's own workers or provably absent (no listener on the port of a local address, no such
 * process, fd or segment): then UCX either refuses it or the endpoint fails and closes. Targets that
 * exist and belong to somebody else are counted as "foreign" and not connected: what they do is up to
 * them, and UCX 1.13's transports trust their peers (uct_tcp asserts on a non-UCX reply), which no
 * address check can change; nor should a test write into other processes' shared memory.
 */
import { existsSync, openSync, readFileSync, writeSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { Context, UcxError, WorkerAddressFormatError, type Endpoint, type Worker } from 'ucxx-ts';
import { parseWorkerAddress, type ParsedWorkerAddress } from '#ucxx-ts/internal/worker-address.js';
import { requireLoadedProfile } from '#ucxx-ts/ffi/ucx-versions.js';

interface Options {
  seed: number;
  count: number;
  configs?: Record<string, string>[];
  trace?: string;
  batch?: number;
}

const options = JSON.parse(process.argv[2] ?? '{}') as Options;
const seed = options.seed >>> 0;
const count = options.count;
const batchSize = options.batch ?? 24;
const trace = options.trace === undefined ? -1 : openSync(options.trace, 'w');

/** xorshift32, seeded: the whole run replays from the seed. */
let state = seed || 1;
function next(): number {
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state;
}
const below = (n: number): number => next() % n;

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('hex');
}

function die(message: string): never {
  console.error(`address-fuzz: FAILED (seed ${seed}): ${message}`);
  process.exit(1);
}

// Workers of contexts configured differently (address v1 and v2, debug info, tcp only, shared memory
// only, ...), all in this process so that accepted endpoints have a live peer. Each input is a mutation
// of one worker's address, passed to a randomly chosen worker: a tcp-only worker exercises the tcp
// addresses, the others mostly self and shared memory.
const contexts: Context[] = [];
const sources: Worker[] = [];
const open = (config: Record<string, string>): void => {
  const context = new Context({ config });
  contexts.push(context);
  sources.push(context.createWorker());
};
open(options.configs?.[0] ?? {}); // loads UCX, whose profile says what the other configurations can be
// Where tcp on lo reaches nobody (a UCX bug, see UcxProfile.unavoidableBugs), the tcp+self worker uses
// every network device instead of lo alone, so that it can still reach itself after the fuzz.
const loopbackOnly = requireLoadedProfile().unavoidableBugs.tcpLoopbackUnreachable ? {} : { NET_DEVICES: 'lo' };
const configs = options.configs ?? [
  {}, { ADDRESS_VERSION: 'v2' }, { ADDRESS_DEBUG_INFO: 'y' }, { TLS: 'tcp' },
  { TLS: 'tcp', ADDRESS_VERSION: 'v2' }, { TLS: 'sm' }, { TLS: 'tcp,self', ...loopbackOnly },
];
for (const config of configs.slice(1)) open(config);
const genuine = sources.map((w) => w.getAddress());
const parsedGenuine = genuine.map((a) => parseWorkerAddress(a));

// ---- targets ---------------------------------------------------------------------------------------

const dv = (b: Uint8Array): DataView => new DataView(b.buffer, b.byteOffset, b.byteLength);

/** What each transport entry of an address points at: 'tcp:ip:port', 'posix:segid', 'sysv:id', 'cma:pid'. */
function targetsOf(bytes: Uint8Array, parsed: ParsedWorkerAddress): string[] {
  const out: string[] = [];
  for (const device of parsed.devices) {
    const dev = bytes.subarray(device.address.offset, device.address.offset + device.address.length);
    for (const iface of device.ifaces) {
      const addr = bytes.subarray(iface.address.offset, iface.address.offset + iface.address.length);
      switch (iface.transport) {
        case 'tcp': {
          const loopback = ((dev[0] as number) & 1) !== 0;
          const v4 = dev[1] === 2;
          const ip = loopback ? (v4 ? '127.0.0.1' : '::1')
            : v4 ? [...dev.subarray(2, 6)].join('.')
              : Buffer.from(dev.subarray(2, 18)).toString('hex');
          out.push(`tcp:${ip}:${dv(addr).getUint16(0, false)}`);
          break;
        }
        case 'posix': out.push(`posix:${dv(addr).getBigUint64(0, true).toString(16)}:${hex(addr.subarray(8))}`); break;
        case 'sysv': out.push(`sysv:${dv(addr).getBigUint64(0, true).toString(16)}`); break;
        case 'cma': out.push(`cma:${dv(addr).getUint32(0, true) & 0x7fffffff}`); break;
        default: break; // self (only reachable by its own id), or a transport this process lacks
      }
    }
  }
  return out;
}

const ownTargets = new Set(genuine.flatMap((a, i) => targetsOf(a, parsedGenuine[i] as ParsedWorkerAddress)));

/** An IPv6 address as the 32 hex digits of its 16 bytes. */
function ipv6Hex(text: string): string {
  const [head = '', tail = ''] = text.split('%')[0]?.split('::') ?? [];
  const h = head === '' ? [] : head.split(':');
  const t = tail === '' ? [] : tail.split(':');
  const groups = text.includes('::') ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h;
  return groups.map((g) => g.padStart(4, '0')).join('');
}

const localIps = new Set<string>(['127.0.0.1', '::1']);
for (const list of Object.values(networkInterfaces())) {
  for (const info of list ?? []) localIps.add(info.family === 'IPv4' ? info.address : ipv6Hex(info.address));
}

function listeningPorts(): Set<number> {
  const ports = new Set<number>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try { text = readFileSync(file, 'utf8'); } catch { continue; }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[3] === '0A') ports.add(parseInt((fields[1] ?? ':0').split(':')[1] ?? '0', 16));
    }
  }
  return ports;
}

function sysvIds(): Set<number> {
  const ids = new Set<number>();
  try {
    for (const line of readFileSync('/proc/sysvipc/shm', 'utf8').split('\n').slice(1)) {
      const id = Number(line.trim().split(/\s+/)[1]);
      if (Number.isInteger(id)) ids.add(id);
    }
  } catch { /* no sysv */ }
  return ids;
}

const processExists = (pid: number): boolean => pid === 0 ? false : existsSync(`/proc/${pid}`);

/** True when connecting cannot reach anybody but this process's own workers (or nobody at all). */
function harmless(target: string): boolean {
  if (ownTargets.has(target)) return true;
  const [kind, ...rest] = target.split(':');
  switch (kind) {
    case 'tcp': {
      const port = Number(rest.pop());
      const ip = rest.join(':');
      // A local address with nobody listening: connection refused. Anything else may answer.
      return (localIps.has(ip) || ip.startsWith('127.')) && !listeningPorts().has(port);
    }
    case 'posix': {
      const seg = BigInt(`0x${rest[0]}`);
      if ((seg & (1n << 63n)) !== 0n) { // procfs: /proc/<pid>/fd/<fd>
        const pid = Number(seg & 0x3fffffffn);
        const fd = Number((seg >> 30n) & 0x3fffffffn);
        if (!processExists(pid)) return true;
        return pid === process.pid && !existsSync(`/proc/self/fd/${fd}`);
      }
      const mmid = (seg & ((1n << 60n) - 1n)).toString(16);
      if ((seg & (1n << 62n)) !== 0n) return !existsSync(`/dev/shm/ucx_shm_posix_${mmid}`);
      return false; // a backing directory chosen by the address: leave it alone
    }
    case 'sysv': return !sysvIds().has(Number(BigInt.asIntN(32, BigInt(`0x${rest[0]}`))));
    case 'cma': {
      const pid = Number(rest[0]);
      return pid === process.pid || !processExists(pid);
    }
    default: return false;
  }
}

// ---- inputs ------------------------------------------------------------------------------------------

/** Offsets of the bytes that carry structure (lengths, flags, md bytes) in each genuine address. */
const structural = genuine.map((address, i) => {
  const parsed = parsedGenuine[i] as ParsedWorkerAddress;
  const offsets = new Set<number>([0, 1]);
  for (const device of parsed.devices) {
    offsets.add(device.offset);
    offsets.add(device.offset + 1);
    offsets.add(device.address.offset - 1);
    for (const iface of device.ifaces) {
      offsets.add(iface.offset);
      offsets.add(iface.offset + 1);
      for (let k = 0; k < iface.attributes.length; k++) offsets.add(iface.attributes.offset + k);
      offsets.add(iface.address.offset - 1);
      for (let k = 0; k < Math.min(iface.address.length, 8); k++) offsets.add(iface.address.offset + k);
    }
    for (let k = 0; k < Math.min(device.address.length, 10); k++) offsets.add(device.address.offset + k);
  }
  return [...offsets].filter((o) => o < address.length);
});

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = next() & 0xff;
  return out;
}

/** A port nobody listens on (connection refused). */
function closedPort(): number {
  const busy = listeningPorts();
  for (;;) {
    const port = 1024 + below(64511);
    if (!busy.has(port)) return port;
  }
}

// ---- structure-preserving mutations: decode, change the model, encode again -------------------------

interface ModelIface { csum: number; attr: Uint8Array; addr: Uint8Array }
interface ModelDevice { mdByte: number; md: number; empty: boolean; numPaths: number; sysDev: number | null; dev: Uint8Array; ifaces: ModelIface[] }
interface Model { v2: boolean; flags: number; uuid: Uint8Array; name: Uint8Array | null; devices: ModelDevice[] | null }

function decode(bytes: Uint8Array): Model {
  const parsed = parseWorkerAddress(bytes);
  const v2 = parsed.version === 2;
  const headerLength = v2 ? 2 : 1;
  const uuid = bytes.slice(headerLength, headerLength + 8);
  const name = parsed.name === null ? null : Buffer.from(parsed.name, 'latin1');
  const slice = (r: { offset: number; length: number }): Uint8Array => bytes.slice(r.offset, r.offset + r.length);
  return {
    v2, flags: parsed.headerFlags, uuid, name,
    devices: parsed.devices.length === 0 ? null : parsed.devices.map((d) => ({
      mdByte: bytes[d.offset] as number, md: d.mdIndex, empty: d.empty, numPaths: d.numPaths, sysDev: d.sysDev,
      dev: slice(d.address),
      ifaces: d.ifaces.map((f) => ({ csum: f.tlNameCsum, attr: slice(f.attributes), addr: slice(f.address) })),
    })),
  };
}

function encode(m: Model): Uint8Array {
  const out: number[] = [];
  if (m.v2) out.push(1, m.flags); else out.push(m.flags << 4);
  out.push(...m.uuid);
  if (m.name !== null) out.push(m.name.length, ...m.name);
  if (m.devices === null) {
    out.push(0xff);
    return new Uint8Array(out);
  }
  m.devices.forEach((d, di) => {
    if (m.v2) {
      const md = d.md >= 0x7f ? [0x7f, d.md] : [d.md];
      md[0] = (md[0] as number) | (d.empty ? 0x80 : 0);
      out.push(...md);
    } else {
      out.push((d.mdByte & 0x60) | (d.empty ? 0x80 : 0) | d.md);
    }
    const flags = (di === (m.devices as ModelDevice[]).length - 1 ? 0x80 : 0) | (d.numPaths > 1 ? 0x40 : 0) |
      (d.sysDev !== null ? 0x20 : 0);
    if (m.v2 && d.dev.length >= 0x1f) out.push(flags | 0x1f, d.dev.length); else out.push(flags | d.dev.length);
    if (d.numPaths > 1) out.push(d.numPaths);
    if (d.sysDev !== null) out.push(d.sysDev);
    out.push(...d.dev);
    if (d.empty) return;
    d.ifaces.forEach((f, fi) => {
      out.push(f.csum & 0xff, f.csum >> 8, ...f.attr);
      const last = fi === d.ifaces.length - 1 ? 0x80 : 0;
      if (m.v2 && f.addr.length >= 0x3f) out.push(last | 0x3f, f.addr.length); else out.push(last | f.addr.length);
      out.push(...f.addr);
    });
  });
  return new Uint8Array(out);
}

/** fp8 values that decode to finite numbers (exponent 1..14), or the canonical zero. */
const fp8 = (zeroOk: boolean): number => (zeroOk && below(8) === 0 ? 0 : (1 + below(14)) | (below(16) << 4));

/** A genuine address changed in its content but kept well-formed (mostly: a few edits break rules). */
function modelMutation(base: Uint8Array): { input: Uint8Array; kind: string } {
  const m = decode(base);
  const devices = m.devices ?? [];
  const device = devices[below(Math.max(devices.length, 1))];
  const allIfaces = devices.flatMap((d) => d.ifaces);
  const iface = allIfaces[below(Math.max(allIfaces.length, 1))];
  const op = below(12);
  switch (op) {
    case 0: if (device) device.md = below(m.v2 ? 70 : 32); break; // md index (64..69 must be refused)
    case 1: if (device) device.numPaths = below(4) === 0 ? 1 : 2 + below(254); break;
    case 2: if (device) device.sysDev = below(4) === 0 ? null : below(4) === 0 ? 64 + below(192) : below(64); break;
    case 3: { // attributes: random but well-formed values
      if (!iface) break;
      const v = dv(iface.attr);
      if (m.v2) {
        v.setUint8(0, fp8(true)); v.setUint8(1, fp8(false)); v.setUint8(2, fp8(true)); v.setUint8(3, below(256));
        v.setUint16(4, below(3) === 0 ? below(25) : 25 + below(65511), true);
        v.setUint16(6, below(1024), true);
      } else {
        v.setFloat32(0, below(10) === 0 ? 0 : (next() / 2 ** 32) * 1e-5, true);
        v.setFloat32(4, (below(2) === 0 ? -1 : 1) * (1 + next()) * 1e3, true);
        v.setFloat32(8, (next() / 2 ** 32) * 1e-5, true);
        v.setUint32(12, (next() & 0x3fffff) | (below(4) << 30), true);
      }
      break;
    }
    case 4: // another transport's checksum on the same entry
      if (iface) iface.csum = [0x7563, 0x19cf, 0x538d, 0xd3a7, 0x8b47, 0x8a27, 0xd47a][below(7)] as number;
      break;
    case 5: devices.reverse(); break; // device order
    case 6: if (device && device.ifaces.length > 0) device.ifaces.push(device.ifaces[0] as ModelIface); break; // duplicate
    case 7: if (device && device.ifaces.length > 1) device.ifaces.splice(below(device.ifaces.length), 1); break;
    case 8: if (devices.length > 1) devices.splice(below(devices.length), 1); else m.devices = null; break;
    case 9: if (device) device.empty = !device.empty; break;
    case 10: m.name = below(3) === 0 ? null : randomBytes(below(40)).map((b) => b | 1); // debug name
      m.flags = m.name === null ? m.flags & ~1 : m.flags | 1;
      break;
    default: // several devices, one copied many times (up to and past the 128-entry limits)
      if (device) {
        const n = below(150);
        for (let k = 0; k < n; k++) devices.push(device);
      }
      break;
  }
  return { input: encode(m), kind: `model${op}` };
}

/** One input: random bytes, or a genuine address mutated in one of several ways. */
function makeInput(): { input: Uint8Array; kind: string } {
  const which = below(genuine.length);
  const base = genuine[which] as Uint8Array;
  const input = base.slice();
  const flip = (at: number): void => {
    input[at] = (input[at] as number) ^ (1 + below(255));
  };
  switch (below(13)) {
    case 11: case 12: // decoded, changed, encoded again
      return modelMutation(base);
    case 0: // random bytes
      return { input: randomBytes(1 + below(300)), kind: 'random' };
    case 1: { // random bytes behind a plausible header (v1 + uuid flag, or v2 + uuid flag)
      const r = randomBytes(10 + below(250));
      if (below(2) === 0) r[0] = 0x20;
      else { r[0] = 0x01; r[1] = 0x02; }
      return { input: r, kind: 'random-header' };
    }
    case 2: // one byte anywhere
      flip(below(input.length));
      return { input, kind: 'flip1' };
    case 3: { // 2..4 bytes anywhere
      const n = 2 + below(3);
      for (let i = 0; i < n; i++) flip(below(input.length));
      return { input, kind: 'flipN' };
    }
    case 4: case 5: { // a structural byte (length, flags, md, attributes, leading address bytes)
      const offsets = structural[which] as number[];
      flip(offsets[below(offsets.length)] as number);
      if (below(3) === 0) flip(offsets[below(offsets.length)] as number);
      return { input, kind: 'structural' };
    }
    case 6: { // a single bit anywhere
      const at = below(input.length);
      input[at] = (input[at] as number) ^ (1 << below(8));
      return { input, kind: 'bit' };
    }
    case 7: // truncated
      return { input: input.subarray(0, 1 + below(input.length - 1)), kind: 'truncated' };
    case 8: { // extended with random bytes
      const tail = randomBytes(1 + below(40));
      return { input: new Uint8Array([...input, ...tail]), kind: 'extended' };
    }
    case 9: { // valid structure, another tcp target: a closed port, on the same or on the loopback IP
      const parsed = parsedGenuine[which] as ParsedWorkerAddress;
      for (const device of parsed.devices) {
        for (const iface of device.ifaces) {
          if (iface.transport !== 'tcp' || below(2) === 0) continue;
          dv(input).setUint16(iface.address.offset, closedPort(), false);
          if (device.address.length === 6 && below(2) === 0) input.set([127, 0, 0, 1], device.address.offset + 2);
        }
      }
      return { input, kind: 'retarget' };
    }
    default: { // a slice cut out, or duplicated
      const a = below(input.length);
      const b = Math.min(input.length, a + 1 + below(24));
      const out = below(2) === 0
        ? new Uint8Array([...input.subarray(0, a), ...input.subarray(b)])
        : new Uint8Array([...input.subarray(0, b), ...input.subarray(a, b), ...input.subarray(b)]);
      return { input: out, kind: 'splice' };
    }
  }
}

// ---- the loop ----------------------------------------------------------------------------------------

const counts = { refused: 0, format: 0, ucx: 0, accepted: 0, flushed: 0, failed: 0, stalled: 0, foreign: 0 };
const byKind = new Map<string, { refused: number; accepted: number }>();

/** `promise`'s value, or 'timeout' after `ms` (the timer is cleared as soon as either happens). */
async function valueOrTimeout<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), ms); })]);
  } finally {
    clearTimeout(timer);
  }
}

const PAYLOAD = new Uint8Array(64).fill(0xa5);
const FUZZ_TAG = 0xf022n;

async function progressRounds(n: number): Promise<void> {
  for (let round = 0; round < n; round++) {
    for (const w of sources) w.progress();
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/** Progress rounds, a small send and a short flush, then a close, for a batch of endpoints. */
async function settle(endpoints: Endpoint[]): Promise<void> {
  await progressRounds(5);
  await Promise.all(endpoints.map(async (ep) => {
    if (ep.closed) return;
    let outcome: string;
    try {
      // A small eager message makes UCX connect the lanes for real (tcp connect, attach to the shared
      // memory FIFO, ...) and send through them; nobody receives it, the peer keeps it as unexpected.
      const send = ep.tagSend(PAYLOAD, FUZZ_TAG);
      outcome = await valueOrTimeout(send.then(() => ep.flush()).then(() => 'flushed'), 150);
    } catch {
      outcome = 'failed';
    }
    if (outcome === 'flushed') counts.flushed++;
    else if (outcome === 'failed') counts.failed++;
    else counts.stalled++;
  }));
  await progressRounds(3);
  const result = await valueOrTimeout(Promise.all(endpoints.map((ep) => ep.close())).then(() => 'closed'), 20_000);
  if (result !== 'closed') die('closing a batch of endpoints did not finish valueOrTimeout 20 s');
}

let pending: Endpoint[] = [];
for (let i = 0; i < count; i++) {
  const { input, kind } = makeInput();
  const worker = sources[below(sources.length)] as Worker;
  const tally = byKind.get(kind) ?? { refused: 0, accepted: 0 };
  byKind.set(kind, tally);
  let parsed: ParsedWorkerAddress | undefined;
  try {
    parsed = parseWorkerAddress(input);
  } catch { /* connectToAddress must refuse it too */ }
  if (parsed !== undefined && !targetsOf(input, parsed).every(harmless)) {
    counts.foreign++;
    if (trace >= 0) writeSync(trace, `${i} ${kind} foreign ${hex(input)}\n`);
    continue;
  }
  if (trace >= 0) writeSync(trace, `${i} ${kind} ${hex(input)}\n`);
  try {
    const ep = worker.connectToAddress(input, { closeTimeout: 500 });
    if (parsed === undefined) die(`input #${i} (${kind}) ${hex(input)} was accepted by connectToAddress only`);
    // A peer failure is reported through 'error' only when listened to; listen so it is not unhandled.
    ep.on('error', () => undefined);
    counts.accepted++;
    tally.accepted++;
    pending.push(ep);
  } catch (err) {
    if (err instanceof WorkerAddressFormatError) counts.format++;
    else if (err instanceof UcxError) counts.ucx++;
    else die(`input #${i} (${kind}) ${hex(input)} threw ${String(err)}`);
    if (parsed !== undefined && err instanceof WorkerAddressFormatError) {
      die(`input #${i} (${kind}) ${hex(input)} parses but connectToAddress refused it: ${String(err)}`);
    }
    counts.refused++;
    tally.refused++;
  }
  if (pending.length >= batchSize) {
    await settle(pending);
    pending = [];
  }
}
await settle(pending);

// Every worker must still work after all that: a tag message to itself through its own address (NONE
// mode: some configurations have shared memory only, which PEER mode cannot use).
for (const [index, worker] of sources.entries()) {
  const self = worker.connectToAddress(genuine[index] as Uint8Array, { errorHandling: 'none' });
  const back = new Uint8Array(16);
  const receive = worker.tagRecv(back, 77n);
  await self.tagSend(new Uint8Array(16).fill(5), 77n);
  const info = await receive;
  if (info.length !== 16 || back.some((b) => b !== 5)) die(`the round trip of worker #${index} after the fuzz failed`);
  await self.close();
}
for (const context of contexts) await context.close();

const kinds = [...byKind].map(([k, v]) => `${k}:${v.refused}/${v.accepted}`).join(' ');
console.log(`address-fuzz: seed=${seed} inputs=${count} refused=${counts.refused} (format=${counts.format} ` +
  `ucx=${counts.ucx}) accepted=${counts.accepted} flushed=${counts.flushed} failed=${counts.failed} ` +
  `stalled=${counts.stalled} foreign=${counts.foreign} [${kinds}]`);
