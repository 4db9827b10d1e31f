/**
 * Structural validation of a packed UCP remote key, the opaque buffer that `ucp_rkey_pack` returns.
 *
 * `ucp_ep_rkey_unpack(ep, buffer, &rkey)` receives no length: it walks the buffer from the md_map on,
 * trusting every size byte, and hands each per-MD record to that component's `uct_rkey_unpack`, which
 * reads as many bytes as *its* format needs. A truncated or corrupted key therefore makes libucp read
 * past the buffer, or index its tables with garbage (the memory type is used as an array index). This
 * module checks, in TypeScript, that a key has exactly the shape `ucp_rkey_pack` produces, so that only
 * well-formed keys reach `ucp_ep_rkey_unpack`.
 *
 * Format (UCX 1.13.1, src/ucp/core/ucp_rkey.c: `ucp_rkey_packed_size`, `ucp_rkey_pack_common`,
 * `ucp_ep_rkey_unpack_internal`, `ucp_rkey_dump_packed`; unchanged in its layout up to UCX 1.18/master),
 * all fields packed (UCS_S_PACKED, no padding), native-endian (little-endian on every supported target):
 *
 *     u64 md_map          bitmap of the *sender's* MD indices that have a record below
 *     u8  mem_type        ucs_memory_type_t of the region (HOST = 0; 1.13 has 0..4, LAST = UNKNOWN = 5)
 *     for each bit i of md_map, in increasing order:
 *         u8  size        rkey_packed_size of MD i (0 for self, tcp, cma; 12 for sysv; 24 for posix here)
 *         u8  rkey[size]  the UCT rkey of MD i
 *     optional (only when the region's sys_dev is known, i.e. never from ucp_rkey_pack in 1.13.1, which
 *     always passes UCS_SYS_DEVICE_ID_UNKNOWN; the rendezvous path packs it for GPU memory):
 *         u8  sys_dev     system device of the memory (never UCS_SYS_DEVICE_ID_UNKNOWN = 255)
 *         { u8 sys_dev; u8 latency_fp8; u8 bandwidth_fp8 } for each bit of a 64-bit sys_dev_map,
 *                         in increasing sys_dev order
 *
 * An md_map of 0 is a real key: the zero-length dummy key, and also what ucp_rkey_pack returns for
 * malloc'ed memory when no selected transport registers memory (UCX_TLS=posix gives
 * `000000000000000000`); UCX then emulates RMA over active messages, and a put through such a key was
 * checked to work on UCX 1.13.1. So an empty md_map is accepted here.
 *
 * UCP_MAX_MDS is min(UCP_MD_INDEX_BITS = 64, UCP_MAX_RESOURCES = 128) = 64 in 1.13 (ucp_types.h), so
 * every bit of the 64-bit md_map is a possible MD index; `maxMds` is kept as an option for callers that
 * know their context has fewer MDs.
 *
 * UCX 1.20 (same file, `ucp_rkey_pack_memh`, `ucp_rkey_extract_sys_dev`, `ucp_rkey_unpack_lanes_distance`)
 * keeps the header and the MD records, and changes the tail of a key whose md_map is not 0:
 *
 *     u8  sys_dev         always packed: UCS_SYS_DEVICE_ID_UNKNOWN (255) for host memory, and then the
 *                         key ends; else the device (at most 127) | FLUSH_BIT 0x80, followed by
 *         { u8 sys_dev; u8 latency_fp8; u8 bandwidth_fp8 } for each bit of a 64-bit sys_dev_map,
 *         u8  255         a terminator: ucp_ep_rkey_unpack gets no length, and a 1.20 receiver reads
 *                         distance records until it finds one (so a key without it is read past its end)
 *
 * An md_map of 0 is the 9-byte header alone, as in 1.13. The memory type must be below 9
 * (UCS_MEMORY_TYPE_LAST of 1.20: 1.13's five, then RDMA and three ZE types).
 */

import { RemoteKeyFormatError } from '../errors/remote-key-format.js';
import { InvalidArgumentError } from '../errors/misuse.js';
import { requireLoadedProfile, type UcxFormat } from '../ffi/ucx-versions.js';

/** `UCS_MEMORY_TYPE_LAST` of UCX 1.13 (HOST, CUDA, CUDA_MANAGED, ROCM, ROCM_MANAGED). */
export const UCS_MEMORY_TYPE_LAST_1_13 = 5;
/** `UCS_MEMORY_TYPE_LAST` of UCX 1.20 (1.13's, then RDMA, ZE_HOST, ZE_DEVICE, ZE_MANAGED). */
export const UCS_MEMORY_TYPE_LAST_1_20 = 9;
/** UCX 1.20's `UCP_SYS_DEVICE_FLUSH_BIT` in the packed sys_dev byte. */
const UCP_SYS_DEVICE_FLUSH_BIT = 0x80;
/** `UCP_MAX_MDS` of UCX 1.13: min(UCP_MD_INDEX_BITS = 64, UCP_MAX_RESOURCES = 128). */
export const UCP_MAX_MDS_1_13 = 64;
/** `UCP_MAX_SYS_DEVICES`: width of `ucp_sys_dev_map_t`; distance records name a device below it. */
export const UCP_MAX_SYS_DEVICES = 64;
/** `UCS_SYS_DEVICE_ID_UNKNOWN`: never packed (its presence means "no sys_dev section"). */
export const UCS_SYS_DEVICE_ID_UNKNOWN = 255;

/** Size of md_map (u64) + mem_type (u8). */
export const PACKED_RKEY_HEADER_SIZE = 9;
/** Size of one packed distance record: sys_dev, latency (fp8), bandwidth (fp8). */
const DISTANCE_RECORD_SIZE = 3;

export interface PackedRkeyMd {
  /** The sender's MD index (bit number in md_map). */
  readonly index: number;
  /** Offset in the packed key of the first byte of this MD's UCT rkey (just after its size byte). */
  readonly offset: number;
  /** Length of this MD's UCT rkey, as its size byte says. */
  readonly size: number;
}

export interface PackedRkeyDistance {
  readonly sysDev: number;
  /** Raw ucs_fp8_t bytes, as packed. */
  readonly latencyFp8: number;
  readonly bandwidthFp8: number;
}

export interface ParsedPackedRkey {
  readonly mdMap: bigint;
  readonly memType: number;
  readonly mds: readonly PackedRkeyMd[];
  /** Number of bytes after the last per-MD record (0, or 1 + 3k for a sys_dev section). */
  readonly trailer: number;
  /** The region's system device from the optional sys_dev section, or null when absent. */
  readonly sysDev: number | null;
  readonly distances: readonly PackedRkeyDistance[];
  /** 1.20 only: the sender asks for a remote flush (UCP_SYS_DEVICE_FLUSH_BIT of the sys_dev byte). */
  readonly flush?: boolean;
}

export interface ParsePackedRkeyOptions {
  /** Which UCX version's format to check. Default: the loaded UCX's (its UcxProfile.packedRkeyFormat). */
  readonly format?: UcxFormat;
  /** Memory types must be below this (UCS_MEMORY_TYPE_LAST of the UCX in use). Default: the format's. */
  readonly memoryTypeLimit?: number;
  /** MD indices must be below this (UCP_MAX_MDS). Default: 64 (1.13). */
  readonly maxMds?: number;
}

function fail(message: string): never {
  throw new RemoteKeyFormatError(`packed remote key: ${message}`);
}

/**
 * Parse and validate a packed remote key (as `ucp_rkey_pack` returned it). The whole buffer must be
 * consumed exactly. Throws RemoteKeyFormatError on any deviation, TypeError if `bytes` is not a
 * Uint8Array.
 */
export function parsePackedRkey(bytes: Uint8Array, options: ParsePackedRkeyOptions = {}): ParsedPackedRkey {
  if (!(bytes instanceof Uint8Array)) {
    throw new InvalidArgumentError('packed remote key must be a Uint8Array');
  }
  const format = options.format ?? requireLoadedProfile().packedRkeyFormat;
  if (format === 'unvalidated') fail('this UCX version\'s packed remote key format is not known to ucxx-ts: refused');
  const memoryTypeLimit = options.memoryTypeLimit ?? (format === '1.13' ? UCS_MEMORY_TYPE_LAST_1_13 : UCS_MEMORY_TYPE_LAST_1_20);
  const maxMds = options.maxMds ?? UCP_MAX_MDS_1_13;
  const length = bytes.length;
  if (length < PACKED_RKEY_HEADER_SIZE) {
    fail(`${length} bytes is shorter than its md_map (8 bytes) and memory type (1 byte)`);
  }

  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const mdMap = view.getBigUint64(0, true);
  const memType = bytes[8] as number;
  if (memType >= memoryTypeLimit) {
    fail(`memory type ${memType} is not a valid ucs_memory_type_t (must be below ${memoryTypeLimit})`);
  }
  if (maxMds < 64 && mdMap >> BigInt(maxMds) !== 0n) {
    fail(`md_map 0x${mdMap.toString(16)} names an MD index of ${maxMds} or more (UCP_MAX_MDS is ${maxMds})`);
  }

  const mds: PackedRkeyMd[] = [];
  let p = PACKED_RKEY_HEADER_SIZE;
  const mapLo = Number(mdMap & 0xffff_ffffn);
  const mapHi = Number(mdMap >> 32n);
  for (let index = 0; index < 64; index++) {
    const bit = index < 32 ? (mapLo >>> index) & 1 : (mapHi >>> (index - 32)) & 1;
    if (bit === 0) continue;
    if (p >= length) {
      fail(`the size byte of the record of MD ${index} is at offset ${p}, past the end (${length} bytes)`);
    }
    const size = bytes[p] as number;
    const offset = p + 1;
    if (offset + size > length) {
      fail(`the ${size}-byte record of MD ${index} at offset ${offset} runs past the end (${length} bytes)`);
    }
    mds.push({ index, offset, size });
    p = offset + size;
  }

  if (format === '1.20') return parseTail1_20(bytes, p, { mdMap, memType, mds });
  const trailer = length - p;
  let sysDev: number | null = null;
  const distances: PackedRkeyDistance[] = [];
  if (trailer > 0) {
    if ((trailer - 1) % DISTANCE_RECORD_SIZE !== 0) {
      fail(
        `${trailer} bytes follow the MD records at offset ${p}; a sys_dev section is 1 byte plus ` +
          `${DISTANCE_RECORD_SIZE} bytes per device distance`,
      );
    }
    sysDev = bytes[p] as number;
    if (sysDev === UCS_SYS_DEVICE_ID_UNKNOWN) {
      fail(`the sys_dev section at offset ${p} names UCS_SYS_DEVICE_ID_UNKNOWN (255), which is never packed`);
    }
    let previous = -1;
    for (let q = p + 1; q < length; q += DISTANCE_RECORD_SIZE) {
      const dev = bytes[q] as number;
      if (dev >= UCP_MAX_SYS_DEVICES) {
        fail(`the distance record at offset ${q} names system device ${dev} (must be below ${UCP_MAX_SYS_DEVICES})`);
      }
      if (dev <= previous) {
        fail(`the distance record at offset ${q} names system device ${dev} out of increasing order`);
      }
      previous = dev;
      distances.push({ sysDev: dev, latencyFp8: bytes[q + 1] as number, bandwidthFp8: bytes[q + 2] as number });
    }
  }

  return { mdMap, memType, mds, trailer, sysDev, distances };
}

/** The 1.20 tail after the MD records at `p`: see the format above. */
function parseTail1_20(
  bytes: Uint8Array, p: number, head: Pick<ParsedPackedRkey, 'mdMap' | 'memType' | 'mds'>,
): ParsedPackedRkey {
  const length = bytes.length;
  const trailer = length - p;
  if (head.mdMap === 0n) {
    if (trailer !== 0) fail(`${trailer} bytes follow the header of a key with an empty md_map (it is 9 bytes)`);
    return { ...head, trailer, sysDev: null, distances: [], flush: false };
  }
  if (trailer === 0) fail(`the sys_dev byte after the MD records is missing (offset ${p}, ${length} bytes)`);
  const first = bytes[p] as number;
  if (first === UCS_SYS_DEVICE_ID_UNKNOWN) {
    if (trailer !== 1) fail(`${trailer - 1} bytes follow the sys_dev byte UCS_SYS_DEVICE_ID_UNKNOWN at offset ${p}`);
    return { ...head, trailer, sysDev: null, distances: [], flush: false };
  }
  const flush = (first & UCP_SYS_DEVICE_FLUSH_BIT) !== 0;
  const sysDev = first & ~UCP_SYS_DEVICE_FLUSH_BIT;
  // The distance records, then the terminator, which must be the last byte.
  if ((trailer - 2) % DISTANCE_RECORD_SIZE !== 0 || bytes[length - 1] !== UCS_SYS_DEVICE_ID_UNKNOWN) {
    fail(
      `${trailer} bytes follow the MD records at offset ${p}; after a known sys_dev UCX 1.20 packs ` +
        `${DISTANCE_RECORD_SIZE} bytes per device distance and a terminating byte 255`,
    );
  }
  const distances: PackedRkeyDistance[] = [];
  let previous = -1;
  for (let q = p + 1; q < length - 1; q += DISTANCE_RECORD_SIZE) {
    const dev = bytes[q] as number;
    if (dev >= UCP_MAX_SYS_DEVICES) {
      fail(`the distance record at offset ${q} names system device ${dev} (must be below ${UCP_MAX_SYS_DEVICES})`);
    }
    if (dev <= previous) fail(`the distance record at offset ${q} names system device ${dev} out of increasing order`);
    previous = dev;
    distances.push({ sysDev: dev, latencyFp8: bytes[q + 1] as number, bandwidthFp8: bytes[q + 2] as number });
  }
  return { ...head, trailer, sysDev, distances, flush };
}

/**
 * Reject a key whose per-MD records disagree in length with `reference` (MD index -> rkey_packed_size,
 * built from keys that the local context packed). An MD absent from the reference is not checked.
 *
 * This assumes the sender numbers its MDs as the local context does, which holds for two processes on
 * one host with the same UCX and the same UCX_* settings. Between differently configured peers, MD index
 * i of the sender can be a different component than local MD i (ucp_ep_rkey_unpack maps sender MD
 * indices to components through the endpoint's configuration, which this check cannot see), so a
 * mismatch there can be a false alarm.
 */
export function checkPackedRkeyAgainstReference(
  parsed: ParsedPackedRkey,
  reference: ReadonlyMap<number, number>,
): void {
  for (const md of parsed.mds) {
    const expected = reference.get(md.index);
    if (expected !== undefined && expected !== md.size) {
      fail(
        `the record of MD ${md.index} is ${md.size} bytes, but this context packs ${expected}-byte keys ` +
          `for that MD`,
      );
    }
  }
}
