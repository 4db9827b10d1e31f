/** Building `ucp_dt_iov_t` arrays for operations on a list of buffers (UCP_DATATYPE_IOV). */
import { addressOf, layouts } from '../ffi/index.js';
import { asBytes } from './bytes.js';
import { InvalidArgumentError } from '../errors/misuse.js';

const ENTRY = layouts.ucp_dt_iov_t;

export interface Iov {
  /** The ucp_dt_iov_t array (pass as the buffer, with `count` = entries). */
  readonly array: Buffer;
  readonly count: number;
  /** Total bytes over all entries. */
  readonly bytes: number;
  /** The buffers, kept reachable with the request. */
  readonly parts: Uint8Array[];
}

/** Describes a list of buffers as a ucp_dt_iov_t array. Throws TypeError for an empty or bad list. */
export function buildIov(buffers: readonly unknown[], what: string): Iov {
  if (buffers.length === 0) throw new InvalidArgumentError(`${what}: the list of buffers is empty`);
  const parts = buffers.map((b, i) => asBytes(b, `${what}[${i}]`));
  const array = Buffer.alloc(ENTRY.size * parts.length);
  let bytes = 0;
  parts.forEach((part, i) => {
    const at = i * ENTRY.size;
    array.writeBigUInt64LE(part.byteLength === 0 ? 0n : addressOf(part), at + ENTRY.offsets.buffer);
    array.writeBigUInt64LE(BigInt(part.byteLength), at + ENTRY.offsets.length);
    bytes += part.byteLength;
  });
  return { array, count: parts.length, bytes, parts };
}
