/**
 * Whether a peer runs on this host, for the 'auto' error-handling mode: shared memory is only usable
 * (and UCX 1.13 only uses it with its defaults) in NONE mode, so a same-host peer gets NONE and a remote
 * one PEER.
 */
import { networkInterfaces } from 'node:os';
import { isIP } from 'node:net';
import { parseWorkerAddress } from './worker-address.js';

/** True for a loopback address or one of this machine's (this network namespace's) interface addresses. */
export function isLocalIp(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4 && ip.startsWith('127.')) return true;
  if (family === 6 && (ip === '::1' || ip === '::ffff:127.0.0.1' || /^::ffff:127\./.test(ip))) return true;
  const normalized = ip.toLowerCase();
  for (const list of Object.values(networkInterfaces())) {
    for (const entry of list ?? []) {
      if (entry.address.toLowerCase() === normalized) return true;
    }
  }
  return false;
}

/**
 * The device addresses of the shared-memory transports in a worker address. UCX packs the host's system
 * identity (boot id, UTS and IPC namespaces) as their device address, which is what it compares to
 * decide that shared memory reaches a peer.
 */
function sharedMemoryDevices(address: Uint8Array): string[] {
  const parsed = parseWorkerAddress(address);
  const devices: string[] = [];
  for (const device of parsed.devices) {
    if (device.ifaces.some((iface) => iface.transport === 'sysv' || iface.transport === 'posix')) {
      const { offset, length } = device.address;
      devices.push(Buffer.from(address.subarray(offset, offset + length)).toString('hex'));
    }
  }
  return devices;
}

/** True when the peer's worker address has a shared-memory device of this host (`own`: our address). */
export function sharesHost(own: Uint8Array, peer: Uint8Array): boolean {
  const ours = new Set(sharedMemoryDevices(own));
  return sharedMemoryDevices(peer).some((device) => ours.has(device));
}
