/**
 * Checks the shared-memory records of a packed remote key against the live system before
 * `ucp_ep_rkey_unpack` attaches them.
 *
 * Two reasons, both UCX 1.13 weaknesses:
 * - When a transport's record fails to unpack (a sysv shmid that does not exist, a posix segment that
 *   cannot be opened), `ucp_ep_rkey_unpack` releases rkey slots it never filled and crashes the process
 *   (ucp_rkey.c, err_destroy). So an attach that would fail must be refused before UCX tries it.
 * - A record's owner address maps remote addresses to the local attachment: a record whose segment
 *   does not cover the key's [base, base + size) would turn an in-bounds memPut into a write to
 *   arbitrary memory of this process. So the region must lie inside the segment the record names.
 *
 * Records are matched to transports by this context's MD numbering, which is the peer's for two
 * processes on one host with the same UCX settings (shared memory is only reachable on one host).
 */
import { readFileSync, statSync } from 'node:fs';
import { ucx, ucxProfile } from '../ffi/index.js';
import { RemoteKeyFormatError } from '../errors/remote-key-format.js';
import type { ParsedPackedRkey } from './packed-rkey.js';

const SHMAT_FAILED = (1n << 64n) - 1n;
const POSIX_FLAG_PROCFS = 1n << 63n;
const POSIX_FLAG_SHM_OPEN = 1n << 62n;
const POSIX_FLAGS_MASK = 0xfn << 60n;
const SYSV_RECORD = 12; // u32 shmid, u64 owner address (packed)
const POSIX_RECORD = 24; // u64 seg_id (flags + mmid), u64 owner address, u64 length, then a tail

function fail(message: string): never {
  throw new RemoteKeyFormatError(`packed remote key: ${message}`);
}

function sysvSegmentSize(shmid: number): bigint | undefined {
  let table: string;
  try {
    table = readFileSync('/proc/sysvipc/shm', 'latin1');
  } catch {
    return undefined;
  }
  for (const line of table.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields[1] === String(shmid) && fields[3] !== undefined) return BigInt(fields[3]);
  }
  return undefined;
}

function checkCovers(what: string, owner: bigint, length: bigint, base: bigint, size: bigint): void {
  if (base < owner || base + size > owner + length) {
    fail(`the ${what} segment [0x${owner.toString(16)}, +${length}) does not cover the region ` +
      `[0x${base.toString(16)}, +${size})`);
  }
}

function checkSysv(view: DataView, offset: number, size: number, base: bigint, regionSize: bigint): void {
  if (size !== SYSV_RECORD) fail(`the sysv record is ${size} bytes, not ${SYSV_RECORD}`);
  const shmid = view.getUint32(offset, true);
  const owner = view.getBigUint64(offset + 4, true);
  const segmentSize = sysvSegmentSize(shmid);
  if (segmentSize === undefined) fail(`sysv shared memory segment ${shmid} does not exist`);
  const api = ucx();
  const attached = api.shmat(shmid, null, 0);
  if (attached === null || attached === SHMAT_FAILED) fail(`sysv shared memory segment ${shmid} cannot be attached`);
  api.shmdt(attached);
  checkCovers('sysv', owner, segmentSize, base, regionSize);
}

function checkPosix(bytes: Uint8Array, view: DataView, offset: number, size: number, base: bigint, regionSize: bigint): void {
  if (size < POSIX_RECORD) fail(`the posix record is ${size} bytes, less than ${POSIX_RECORD}`);
  const segId = view.getBigUint64(offset, true);
  const owner = view.getBigUint64(offset + 8, true);
  const length = view.getBigUint64(offset + 16, true);
  const mmid = segId & ~POSIX_FLAGS_MASK & ((1n << 64n) - 1n);
  let path: string;
  if (segId & POSIX_FLAG_PROCFS) {
    const pid = Number(mmid & ((1n << 30n) - 1n));
    const fd = Number((mmid >> 30n) & ((1n << 30n) - 1n));
    path = `/proc/${pid}/fd/${fd}`;
  } else if (segId & POSIX_FLAG_SHM_OPEN) {
    path = `/dev/shm/ucx_shm_posix_${mmid.toString(16)}`;
  } else {
    const tail = bytes.subarray(offset + POSIX_RECORD, offset + size);
    const nul = tail.indexOf(0);
    if (nul < 1) fail('the posix record has no NUL-terminated directory');
    path = `${Buffer.from(tail.subarray(0, nul)).toString('latin1')}/ucx_shm_posix_${mmid.toString(16)}`;
  }
  if (length === 0n) fail('the posix segment length is 0');
  let fileSize: bigint;
  try {
    fileSize = statSync(path, { bigint: true }).size;
  } catch {
    fail(`posix shared memory segment ${path} cannot be opened`);
  }
  if (fileSize < length) fail(`posix shared memory segment ${path} is ${fileSize} bytes, less than ${length}`);
  checkCovers('posix', owner, length, base, regionSize);
}

/**
 * Throws RemoteKeyFormatError when a shared-memory record would fail to attach or not cover the region.
 * `unpacks(index, component, size)` says whether the endpoint will unpack that record at all (see
 * rkey-reach.ts): `ucp_ep_rkey_unpack` skips the records of MDs the endpoint does not reach, such as
 * every shared-memory record of a peer on another host, whose segments cannot exist here. Without it,
 * every shared-memory record is checked.
 */
export function checkSharedMemoryRecords(
  packed: Uint8Array, parsed: ParsedPackedRkey, components: ReadonlyMap<number, string>, base: bigint,
  size: bigint, unpacks?: (index: number, component: string, size: number) => boolean,
): void {
  const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  const known = ucxProfile().shmRecordFormat !== 'unvalidated';
  for (const md of parsed.mds) {
    const component = components.get(md.index);
    if ((component === 'sysv' || component === 'posix') && unpacks?.(md.index, component, md.size) === false) continue;
    if ((component === 'sysv' || component === 'posix') && !known) {
      fail(`the ${component} record's format of this UCX version is not known to ucxx-ts: refused`);
    }
    if (component === 'sysv') checkSysv(view, md.offset, md.size, base, size);
    else if (component === 'posix') checkPosix(packed, view, md.offset, md.size, base, size);
  }
}
