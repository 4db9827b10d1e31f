/**
 * The TCP sockets this process holds on a local port, read from Linux's /proc: which connections a
 * listener's socket has accepted (by peer address) and how many wait in its accept queue. A listener
 * uses it to tell whether UCX still holds a connection whose request it has not handed over.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { endianness } from 'node:os';

const AF_INET = 2;
const AF_INET6 = 10;
const TCP_LISTEN = 0x0a;

export interface PortSockets {
  /** Peer addresses (as `peerKey` spells them) of the connections accepted on the port. */
  readonly accepted: Set<string>;
  /** Connections in the listening socket's accept queue, not accepted yet. */
  readonly backlog: number;
}

/** One spelling of a peer address on both sides: an IPv4 address mapped into IPv6 reads as IPv4. */
function key(address: Buffer, port: number): string {
  const mapped = address.length === 16 && address.subarray(0, 10).every((b) => b === 0) &&
    address[10] === 0xff && address[11] === 0xff;
  return `${(mapped ? address.subarray(12) : address).toString('hex')}:${port}`;
}

/** The key of a peer address given as a sockaddr (ucp_conn_request_query's client_address). */
export function peerKey(storage: Buffer, offset = 0): string | null {
  const family = storage.readUInt16LE(offset);
  const port = storage.readUInt16BE(offset + 2);
  if (family === AF_INET) return key(storage.subarray(offset + 4, offset + 8), port);
  if (family === AF_INET6) return key(storage.subarray(offset + 8, offset + 24), port);
  return null;
}

/** /proc/net/tcp spells an address as 32-bit words in host byte order, each as 8 hex digits. */
function procAddress(text: string): { address: Buffer; port: number } {
  const [hex = '', portHex = ''] = text.split(':');
  const address = Buffer.alloc(hex.length / 2);
  const little = endianness() === 'LE';
  for (let i = 0; i < hex.length / 8; i++) {
    const word = parseInt(hex.slice(i * 8, i * 8 + 8), 16);
    if (little) address.writeUInt32LE(word, i * 4);
    else address.writeUInt32BE(word, i * 4);
  }
  return { address, port: parseInt(portHex, 16) };
}

function ownSocketInodes(): Set<string> {
  const inodes = new Set<string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue; // closed meanwhile
    }
    const match = /^socket:\[(\d+)\]$/.exec(target);
    if (match?.[1] !== undefined) inodes.add(match[1]);
  }
  return inodes;
}

/**
 * The file descriptor of this process's TCP connection from `local` to `remote` (keys as `peerKey`
 * spells them), or null where none is found or /proc cannot tell (not Linux).
 */
export function connectionFd(local: string, remote: string): number | null {
  const inodes = new Set<string>();
  try {
    for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
      for (const line of readFileSync(file, 'latin1').split('\n').slice(1)) {
        const fields = line.trim().split(/\s+/);
        if (fields.length < 10) continue;
        const l = procAddress(fields[1] as string);
        const r = procAddress(fields[2] as string);
        if (key(l.address, l.port) === local && key(r.address, r.port) === remote) inodes.add(fields[9] as string);
      }
    }
    for (const fd of readdirSync('/proc/self/fd')) {
      let target: string;
      try {
        target = readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        continue;
      }
      const match = /^socket:\[(\d+)\]$/.exec(target);
      if (match?.[1] !== undefined && inodes.has(match[1])) return Number(fd);
    }
  } catch {
    return null;
  }
  return null;
}

/**
 * The sockets of this process on local TCP port `port` of an IPv4 or IPv6 listening socket (an IPv6 one
 * lists its IPv4 clients as mapped addresses); null where /proc cannot tell (not Linux). Each call walks
 * the kernel's whole TCP connection table: for closing a listener, not for every message.
 */
export function socketsOnPort(port: number, ipv6: boolean): PortSockets | null {
  let table: string;
  let inodes: Set<string>;
  try {
    table = readFileSync(ipv6 ? '/proc/net/tcp6' : '/proc/net/tcp', 'latin1');
    inodes = ownSocketInodes();
  } catch {
    return null;
  }
  const accepted = new Set<string>();
  let backlog = 0;
  for (const line of table.split('\n').slice(1)) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
    const fields = line.trim().split(/\s+/);
    if (fields.length < 10 || !inodes.has(fields[9] as string)) continue;
    const local = procAddress(fields[1] as string);
    if (local.port !== port) continue;
    if (parseInt(fields[3] as string, 16) === TCP_LISTEN) {
      // For a listening socket rx_queue is the accept queue's length.
      backlog += parseInt((fields[4] as string).split(':')[1] ?? '0', 16);
    } else {
      const remote = procAddress(fields[2] as string);
      accepted.add(key(remote.address, remote.port));
    }
  }
  return { accepted, backlog };
}

/**
 * Whether any process of this network namespace has a TCP socket listening on local port `port`
 * (IPv4 or IPv6); null where /proc cannot tell. For the message of a refused connect: nobody listening
 * and a server refusing the connection look alike to UCX 1.13.
 */
export function listeningOnPort(port: number): boolean | null {
  let found: boolean | null = null;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let table: string;
    try {
      table = readFileSync(file, 'latin1');
    } catch {
      continue;
    }
    found ??= false;
    for (const line of table.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 4 || parseInt(fields[3] as string, 16) !== TCP_LISTEN) continue;
      if (procAddress(fields[1] as string).port === port) return true;
    }
  }
  return found;
}

/** Readings of `listeningOnPortRecently`, by port (cleared when it holds many). */
const recentReadings = new Map<number, { at: number; listening: boolean | null }>();

/**
 * `listeningOnPort`, answered from a reading of the last `maxAgeMs`: the tables grow with every open
 * connection, so a process that connects again and again (churn, or hundreds of connections at once)
 * reads them once a second per port instead of once per connection.
 */
export function listeningOnPortRecently(port: number, maxAgeMs = 1000): boolean | null {
  const now = Date.now();
  const recent = recentReadings.get(port);
  if (recent !== undefined && now - recent.at <= maxAgeMs) return recent.listening;
  if (recentReadings.size >= 64) recentReadings.clear();
  const listening = listeningOnPort(port);
  recentReadings.set(port, { at: now, listening });
  return listening;
}
