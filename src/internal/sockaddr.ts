/** Building and reading `struct sockaddr_in`/`sockaddr_in6` for listeners and client endpoints. */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { InvalidArgumentError, ArgumentOutOfRangeError } from '../errors/misuse.js';
import { show } from './bytes.js';

const AF_INET = 2;
const AF_INET6 = 10;

export interface SocketAddress {
  readonly host: string;
  readonly port: number;
}

function checkPort(port: number): void {
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ArgumentOutOfRangeError(`port must be an integer in [0, 65535], got ${show(port)}`);
  }
}

/** Resolves a host name (or takes an IP literal) and encodes it with the port as a sockaddr. */
export async function resolveSockaddr(host: string, port: number): Promise<{ sockaddr: Buffer; ip: string }> {
  checkPort(port);
  if (typeof host !== 'string' || host === '') throw new InvalidArgumentError('host must be a non-empty string');
  const family = isIP(host);
  const ip = family !== 0 ? host : (await lookup(host)).address;
  return { sockaddr: encodeSockaddr(ip, port), ip };
}

/** Encodes an IP literal and a port (network byte order) as sockaddr_in or sockaddr_in6. */
export function encodeSockaddr(address: string, port: number): Buffer {
  checkPort(port);
  const family = isIP(address);
  if (family === 4) {
    const sa = Buffer.alloc(16);
    sa.writeUInt16LE(AF_INET, 0);
    sa.writeUInt16BE(port, 2);
    address.split('.').forEach((octet, i) => sa.writeUInt8(Number(octet), 4 + i));
    return sa;
  }
  if (family === 6) {
    const sa = Buffer.alloc(28);
    sa.writeUInt16LE(AF_INET6, 0);
    sa.writeUInt16BE(port, 2);
    expandIpv6(address).copy(sa, 8);
    return sa;
  }
  throw new InvalidArgumentError(`not an IP address: ${address}`);
}

function expandIpv6(address: string): Buffer {
  const out = Buffer.alloc(16);
  const [head = '', tail] = address.split('::');
  const parse = (part: string): number[] =>
    part === '' ? [] : part.split(':').flatMap((group) => {
      if (group.includes('.')) {
        const v4 = group.split('.').map(Number);
        return [((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0)];
      }
      return [parseInt(group, 16)];
    });
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  const groups = [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  groups.forEach((g, i) => out.writeUInt16BE(g, i * 2));
  return out;
}

/** Decodes a sockaddr_storage (as filled by ucp_listener_query / ucp_conn_request_query). */
export function decodeSockaddr(storage: Buffer, offset = 0): SocketAddress {
  const family = storage.readUInt16LE(offset);
  const port = storage.readUInt16BE(offset + 2);
  if (family === AF_INET) {
    return { host: [...storage.subarray(offset + 4, offset + 8)].join('.'), port };
  }
  if (family === AF_INET6) {
    const groups: string[] = [];
    for (let i = 0; i < 8; i++) groups.push(storage.readUInt16BE(offset + 8 + i * 2).toString(16));
    return { host: groups.join(':').replace(/(^|:)0(:0)+(:|$)/, '::'), port };
  }
  return { host: '', port };
}
