#!/usr/bin/env node
/**
 * net-baseline: what Node's own `net` module does on this machine, as a yardstick for ucxx-ts.
 *
 *   node build/bench/net-baseline.js --mode lat|bw [--transport tcp,unix] [-s SIZES] [-n ITER] [-w WARMUP] --json
 *
 * Two processes, like ucx_perftest and `ucxx-perf --local`: this one (the client) forks a server child that
 * listens on TCP 127.0.0.1 (an ephemeral port, TCP_NODELAY) and on a Unix socket in the temporary directory.
 *
 * - `lat`: ping-pong. The client writes SIZE bytes; the server, once it has all SIZE bytes, writes SIZE bytes
 *   back; the client times each round trip once it has all SIZE bytes. Reported latency is half the round trip
 *   (ucx_perftest's convention for ping-pong tests: tag_lat, ucp_am_lat, ucp_put_lat), p50/avg/p99.
 * - `bw`: one-way stream of ITER messages of SIZE bytes (one `socket.write` each, waiting for 'drain' when
 *   the socket asks for it); the server answers one byte once it has read them all. Bandwidth = ITER * SIZE /
 *   (time from the first write to the answer); latency_us.avg is that time per message (ucx_perftest's
 *   "overhead"), p50/p99 are null (no per-message figure).
 * Warm-up iterations run first on the same connection, untimed. One connection per (transport, size).
 *
 * Output (--json): one object per line per transport and size:
 *   {"tool":"net-baseline","transport":"tcp","mode":"lat","size":8,"iterations":N,"warmup":W,
 *    "latency_us":{"p50":x,"avg":x,"p99":x},"bandwidth_MBps":x,"message_rate":x}
 * Exit status 2 for bad options, 1 for a failure. The whole run is bounded by --timeout (seconds, default 120).
 * Source: bench/net-baseline.ts, compiled by `npm run build:test` (tsconfig.test.json) to build/bench/net-baseline.js.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const HEADER_BYTES = 16; // mode (u32: 1 = lat, 2 = bw), size (u32), warm-up count (u32), measured count (u32)
const MODE_CODES = { lat: 1, bw: 2 } as const;

type Mode = keyof typeof MODE_CODES;
type Transport = 'tcp' | 'unix';

/** What the server child sends its parent once it listens. */
interface ServerAddress {
  tcpPort: number;
  unixPath: string;
}

const SIZE_UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

function parseSize(text: string): number {
  const match = /^(\d+)([kKmMgG]?)[bB]?$/.exec(text.trim());
  if (match === null) throw new UsageError(`bad size: ${JSON.stringify(text)}`);
  const unit = SIZE_UNITS[(match[2] ?? '').toLowerCase()] ?? 1;
  const size = Number(match[1]) * unit;
  if (!Number.isSafeInteger(size) || size < 1 || size > 1024 ** 3) throw new UsageError(`size out of range: ${text}`);
  return size;
}

function parseSizes(text: string): number[] {
  if (text.includes(':')) {
    const [lo, hi] = text.split(':').map(parseSize);
    if (lo === undefined || hi === undefined || hi < lo) throw new UsageError(`bad size range: ${text}`);
    const sizes: number[] = [];
    for (let s = lo; s <= hi; s *= 2) sizes.push(s);
    return sizes;
  }
  return text.split(',').map(parseSize);
}

class UsageError extends Error {}

// ---- server (child process) ---------------------------------------------------------------------------

/** Serves one connection: reads the header, then runs the ping-pong or the sink it asks for. */
function serveConnection(socket: net.Socket): void {
  socket.setNoDelay?.(true);
  let header = Buffer.alloc(0);
  let onData: ((chunk: Buffer) => void) | null = null;
  socket.on('data', (chunk: Buffer) => {
    if (onData !== null) {
      onData(chunk);
      return;
    }
    header = Buffer.concat([header, chunk]);
    if (header.length < HEADER_BYTES) return;
    const mode = header.readUInt32LE(0);
    const size = header.readUInt32LE(4);
    const total = header.readUInt32LE(8) + header.readUInt32LE(12);
    const warmup = header.readUInt32LE(8);
    const rest = header.subarray(HEADER_BYTES);
    if (mode === MODE_CODES.lat) {
      const reply = Buffer.alloc(size, 0xa5);
      let have = 0;
      onData = (data: Buffer) => {
        have += data.length;
        // The client never sends the next message before it has our reply, so `have` never exceeds size.
        if (have >= size) {
          have -= size;
          socket.write(reply);
        }
      };
    } else if (mode === MODE_CODES.bw) {
      // Two phases: warm-up messages, then measured ones; a one-byte answer after each.
      const phases = [warmup * size, (total - warmup) * size];
      let have = 0;
      const answerEmpty = () => {
        while (phases.length > 0 && phases[0] === 0) {
          phases.shift();
          socket.write(Buffer.of(1));
        }
      };
      onData = (data: Buffer) => {
        have += data.length;
        while (phases.length > 0 && have >= (phases[0] as number)) {
          have -= phases.shift() as number; // phases is not empty
          socket.write(Buffer.of(1));
        }
      };
      answerEmpty();
    } else {
      console.error(`net-baseline server: bad mode ${mode}`);
      socket.destroy();
      return;
    }
    if (rest.length > 0) onData(Buffer.from(rest));
  });
  socket.on('error', () => socket.destroy());
}

async function serve(): Promise<void> {
  const unixPath = path.join(os.tmpdir(), `ucxx-net-baseline-${process.pid}.sock`);
  rmSync(unixPath, { force: true });
  const tcp = net.createServer({ noDelay: true }, serveConnection);
  const unix = net.createServer(serveConnection);
  tcp.listen(0, '127.0.0.1');
  unix.listen(unixPath);
  await Promise.all([once(tcp, 'listening'), once(unix, 'listening')]);
  const address = tcp.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  const cleanup = () => {
    rmSync(unixPath, { force: true });
    process.exit(0);
  };
  process.on('disconnect', cleanup); // the client went away (normally or not)
  process.on('SIGTERM', cleanup);
  const message: ServerAddress = { tcpPort: address.port, unixPath };
  process.send?.(message);
}

// ---- client -------------------------------------------------------------------------------------------

async function connect(server: ServerAddress, transport: Transport): Promise<net.Socket> {
  const socket = transport === 'tcp'
    ? net.connect({ port: server.tcpPort, host: '127.0.0.1', noDelay: true })
    : net.connect({ path: server.unixPath });
  await once(socket, 'connect');
  return socket;
}

/** Reads from `socket` through a resettable byte counter: `until(n)` resolves once n more bytes have come. */
function byteCounter(socket: net.Socket): { until(n: number): Promise<void> } {
  let have = 0;
  let want = Infinity;
  let resolve: (() => void) | null = null;
  let reject: ((err: Error) => void) | null = null;
  socket.on('data', (chunk: Buffer) => {
    have += chunk.length;
    if (have >= want && resolve !== null) {
      have -= want;
      want = Infinity;
      const r = resolve;
      resolve = null;
      reject = null;
      r();
    }
  });
  const fail = (err: Error) => reject?.(err);
  socket.on('error', fail);
  socket.on('close', () => fail(new Error('the server closed the connection')));
  return {
    until(n: number): Promise<void> {
      if (have >= n) {
        have -= n;
        return Promise.resolve();
      }
      want = n;
      return new Promise<void>((res, rej) => {
        resolve = () => res(undefined);
        reject = rej;
      });
    },
  };
}

function sendHeader(socket: net.Socket, mode: number, size: number, warmup: number, iterations: number): void {
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt32LE(mode, 0);
  header.writeUInt32LE(size, 4);
  header.writeUInt32LE(warmup, 8);
  header.writeUInt32LE(iterations, 12);
  socket.write(header);
}

/** The figures of one (transport, size), as they go into the JSON line. */
interface Measured {
  latency_us: { p50: number | null; avg: number; p99: number | null };
  bandwidth_MBps: number;
  message_rate: number;
}

async function measureLatency(server: ServerAddress, transport: Transport, size: number, iterations: number, warmup: number): Promise<Measured> {
  const socket = await connect(server, transport);
  try {
    const counter = byteCounter(socket);
    sendHeader(socket, MODE_CODES.lat, size, warmup, iterations);
    const message = Buffer.alloc(size, 0x5a);
    const samples = new Float64Array(iterations);
    for (let k = 0; k < warmup + iterations; k++) {
      const t0 = process.hrtime.bigint();
      socket.write(message);
      await counter.until(size);
      if (k >= warmup) samples[k - warmup] = Number(process.hrtime.bigint() - t0) / 1000 / 2; // half round trip, us
    }
    const sorted = Float64Array.from(samples).sort();
    const avg = sorted.reduce((a, b) => a + b, 0) / iterations;
    // In range: iterations >= 1.
    const p50 = sorted[Math.floor(iterations * 0.5)] as number;
    const p99 = sorted[Math.min(iterations - 1, Math.floor(iterations * 0.99))] as number;
    return {
      latency_us: { p50: round(p50), avg: round(avg), p99: round(p99) },
      // As ucx_perftest computes them for ping-pong tests: one message per half round trip.
      bandwidth_MBps: round(size / avg),
      message_rate: Math.round(1e6 / avg),
    };
  } finally {
    socket.destroy();
  }
}

async function measureBandwidth(server: ServerAddress, transport: Transport, size: number, iterations: number, warmup: number): Promise<Measured> {
  const socket = await connect(server, transport);
  try {
    const counter = byteCounter(socket);
    sendHeader(socket, MODE_CODES.bw, size, warmup, iterations);
    const message = Buffer.alloc(size, 0x5a);
    const stream = async (count: number) => {
      for (let k = 0; k < count; k++) {
        if (!socket.write(message)) await once(socket, 'drain');
      }
      await counter.until(1);
    };
    if (warmup > 0) await stream(warmup);
    else await counter.until(1); // the server answers an empty warm-up phase at once
    const t0 = process.hrtime.bigint();
    await stream(iterations);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const perMessageUs = (seconds * 1e6) / iterations;
    return {
      latency_us: { p50: null, avg: round(perMessageUs), p99: null },
      bandwidth_MBps: round((iterations * size) / seconds / 1e6),
      message_rate: Math.round(iterations / seconds),
    };
  } finally {
    socket.destroy();
  }
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

const USAGE = `usage: node build/bench/net-baseline.js --mode lat|bw [options]
  --mode lat|bw           lat: SIZE-byte ping-pong (half round trip); bw: one-way stream of SIZE-byte messages
  --transport LIST        tcp,unix (default both): TCP loopback and a Unix socket
  -s, --size SIZES        a list (8,4K,1M) or a range of powers of two (8:64M); default 8
  -n, --iterations N      measured iterations per size (default 1000)
  -w, --warmup N          warm-up iterations (default n/10)
      --timeout SECONDS   bound on the whole run (default 120)
      --json              one JSON object per line (otherwise a table)
  -h, --help              this text`;

async function main(): Promise<void> {
  if (process.argv[2] === '--serve-child') {
    await serve();
    await new Promise(() => {}); // serves until the client disconnects (see serve)
  }
  let options: ReturnType<typeof parseCommandLine>;
  try {
    options = parseCommandLine(process.argv.slice(2));
  } catch (err) {
    // parseArgs throws TypeErrors with a code ERR_PARSE_ARGS_*.
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true) {
      console.error(`net-baseline: ${(err as Error).message}\n${USAGE}`);
      process.exit(2);
    }
    throw err;
  }
  if (options === null) return;
  const child = fork(fileURLToPath(import.meta.url), ['--serve-child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const killer = setTimeout(() => {
    console.error(`net-baseline: timed out after ${options.timeout} s`);
    child.kill('SIGKILL');
    process.exit(1);
  }, options.timeout * 1000);
  killer.unref();
  try {
    const server = await new Promise<ServerAddress>((resolve, reject) => {
      // The only message the child sends (see serve).
      child.once('message', (m) => resolve(m as ServerAddress));
      child.once('exit', (code) => reject(new Error(`the server exited early (status ${code})`)));
    });
    if (!options.json) console.log(['transport', 'mode', 'size', 'iterations', 'p50 us', 'avg us', 'p99 us', 'MB/s', 'msg/s'].map((c) => c.padStart(11)).join(''));
    for (const size of options.sizes) {
      for (const transport of options.transports) {
        const measured = options.mode === 'lat'
          ? await measureLatency(server, transport, size, options.iterations, options.warmup)
          : await measureBandwidth(server, transport, size, options.iterations, options.warmup);
        const result = {
          tool: 'net-baseline', transport, mode: options.mode, size, iterations: options.iterations, warmup: options.warmup,
          ...measured,
        };
        if (options.json) console.log(JSON.stringify(result));
        else {
          const l = result.latency_us;
          console.log([transport, options.mode, size, options.iterations, l.p50 ?? '-', l.avg, l.p99 ?? '-', result.bandwidth_MBps, result.message_rate]
            .map((c) => String(c).padStart(11)).join(''));
        }
      }
    }
  } finally {
    child.disconnect?.();
    child.kill('SIGTERM');
  }
}

interface Options {
  mode: Mode;
  transports: Transport[];
  sizes: number[];
  iterations: number;
  warmup: number;
  timeout: number;
  json: boolean;
}

function parseCommandLine(argv: string[]): Options | null {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: false,
    options: {
      mode: { type: 'string' },
      transport: { type: 'string' },
      size: { type: 'string', short: 's' },
      iterations: { type: 'string', short: 'n' },
      warmup: { type: 'string', short: 'w' },
      timeout: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  void positionals;
  if (values.help === true) {
    console.log(USAGE);
    return null;
  }
  const mode = values.mode;
  if (mode !== 'lat' && mode !== 'bw') throw new UsageError('--mode must be lat or bw');
  const transports = (values.transport ?? 'tcp,unix').split(',').map((t) => t.trim());
  for (const t of transports) if (t !== 'tcp' && t !== 'unix') throw new UsageError(`unknown transport ${t}`);
  const count = (text: string | undefined, what: string, fallback: number, min = 0) => {
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < min || n > 0xffffffff) throw new UsageError(`${what} must be an integer >= ${min}, got ${text}`);
    return n;
  };
  const iterations = count(values.iterations, 'iterations', 1000, 1);
  const warmup = count(values.warmup, 'warmup', Math.floor(iterations / 10));
  const timeout = count(values.timeout, 'timeout', 120, 1);
  return {
    // Each checked above.
    mode, transports: transports as Transport[], sizes: parseSizes(values.size ?? '8'),
    iterations, warmup, timeout, json: values.json === true,
  };
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`net-baseline: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    process.exit(1);
  },
);
