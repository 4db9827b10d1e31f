/**
 * The C baseline's surroundings, for the bench scripts that run ucx_perftest: which ucx_perftest
 * (the system's, or that of the UCX in UCXX_TS_UCX_LIBDIR) and a port for its server.
 */
import { existsSync, readFileSync } from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';

/** Ports that some socket on this machine uses (any state), from /proc. */
function portsInUse(): Set<number> {
  const ports = new Set<number>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try { text = readFileSync(file, 'utf8'); } catch { continue; }
    for (const line of text.split('\n').slice(1)) {
      const local = line.trim().split(/\s+/)[1];
      if (local !== undefined) ports.add(Number.parseInt(local.slice(local.lastIndexOf(':') + 1), 16));
    }
  }
  return ports;
}

/**
 * A port for ucx_perftest's server. Not from the kernel's ephemeral range: a port that bind(0) handed us
 * and that we then closed can be handed to any other process (UCX listeners bind port 0) before
 * ucx_perftest binds it. Below the ephemeral range nobody gets it by chance.
 */
export async function freePort(): Promise<number> {
  let low = 32768;
  try {
    low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || low;
  } catch { /* not Linux */ }
  const hi = Math.min(low, 65536) - 1;
  const lo = Math.max(1024, hi - 12000);
  const used = portsInUse();
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = lo + Math.floor(Math.random() * (hi - lo + 1));
    if (used.has(port)) continue;
    const ok = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
    });
    if (ok) return port;
  }
  throw new Error('no free port for ucx_perftest');
}

/**
 * With UCXX_TS_UCX_LIBDIR (a UCX other than the system's, e.g. the libucx-cu12 wheel's lib/), the C
 * baseline is the ucx_perftest and ucx_info of that UCX: its bin/ beside lib/ goes first on PATH, and
 * LD_LIBRARY_PATH names the lib/ (the wheel's programs do not find their libraries without it).
 * Returns the bin/ used, or null for the system's programs.
 */
export function useUcxLibDir(): string | null {
  const dir = process.env['UCXX_TS_UCX_LIBDIR'];
  if (dir === undefined || dir === '') return null;
  const bin = path.join(path.dirname(dir), 'bin');
  if (!existsSync(path.join(bin, 'ucx_perftest'))) return null;
  process.env['PATH'] = `${bin}${path.delimiter}${process.env['PATH'] ?? ''}`;
  process.env['LD_LIBRARY_PATH'] = [dir, process.env['LD_LIBRARY_PATH']].filter((x) => x).join(path.delimiter);
  return bin;
}
