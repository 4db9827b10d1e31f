/**
 * Structural validation of a packed UCP worker address, the bytes `worker.getAddress()` returns
 * (`ucp_worker_query(UCP_WORKER_ATTR_FIELD_ADDRESS)`) and `worker.connectToAddress()` hands to
 * `ucp_ep_create(UCP_EP_PARAM_FIELD_REMOTE_ADDRESS)`.
 *
 * `ucp_ep_create` receives no length with the address. `ucp_address_unpack` (UCX 1.13.1,
 * src/ucp/wireup/address.c) walks it trusting every version nibble, flag bit, length byte and "last"
 * bit, and aborts the process (`ucs_assertv_always`) on a version it does not know. The address entries
 * it produces point into the buffer, and lane selection (src/ucp/wireup/select.c, wireup.c) then hands
 * each device and interface address to the transport whose name checksum matches, which reads a
 * fixed-size (or self-describing) struct from it in `uct_iface_is_reachable()`, `uct_ep_create()`, ...
 * It also indexes fixed-size stack arrays with the md index and the device index taken from the
 * address, and `ucp_ep_config_init` asserts (abort) on a too small remote segment size. So random or
 * corrupted bytes crash the process in several ways; this module re-implements the walk in TypeScript
 * and refuses, with a WorkerAddressFormatError, every address that is not shaped exactly like one
 * `ucp_address_pack` produces for a worker address, before libucp sees it.
 *
 * Format (UCX 1.13.1, `ucp_address_do_pack` / `ucp_address_unpack`), packed, little-endian, for the
 * non-unified mode (UCX_UNIFIED_MODE=n, the default) and the two versions 1.13 packs
 * (UCX_ADDRESS_VERSION=v1, the default, or v2):
 *
 *     v1 header  u8   low nibble = version 0 (UCP_OBJECT_VERSION_V1), high nibble = header flags
 *     v2 header  u8   low nibble = version 1 (UCP_OBJECT_VERSION_V2), high nibble 0; u8 header flags
 *                     header flags: DEBUG_INFO 0x1, WORKER_UUID 0x2, CLIENT_ID 0x4, AM_ONLY 0x8
 *     uuid       u64  v1: always (1.13 reads it even without the flag, as < 1.12 packed it unflagged);
 *                     v2: when WORKER_UUID
 *     client id  u64  when CLIENT_ID (client-server wireup only: refused here)
 *     name       u8 length + that many bytes, when DEBUG_INFO (UCX_ADDRESS_DEBUG_INFO=y)
 *     then either the single byte 0xff (UCP_NULL_RESOURCE: no device), or devices until one is LAST:
 *       md byte     EMPTY_DEV 0x80; v1: ALLOC 0x40, REG 0x20, md index 0x1f;
 *                   v2: md index 0x7f, 0x7f meaning "the md index is the next byte"
 *       dev byte    LAST 0x80, NUM_PATHS 0x40, SYS_DEVICE 0x20, length 0x1f;
 *                   v2: length 0x1f meaning "the length is the next byte"
 *       [u8 number of paths]   when NUM_PATHS
 *       [u8 system device]     when SYS_DEVICE
 *       device address         (length bytes, UCT's uct_iface_get_device_address)
 *       unless EMPTY_DEV, interfaces until one is LAST:
 *         u16 tl_name_csum     ucs_crc16_string(transport name): selects the local transport
 *         attributes           v1: f32 overhead, f32 bandwidth, f32 lat_ovh, u32 prio (8 bits) |
 *                              13 capability bits << 8 | event bit << 21 | ATOMIC32 << 30 | ATOMIC64 << 31
 *                              v2: fp8 overhead, fp8 bandwidth, fp8 latency, u8 prio,
 *                              u16 seg_size (in 64-byte units), u16 UCP_ADDR_IFACE_FLAG_* (bits 0..9)
 *         iface byte           LAST 0x80, HAS_EP_ADDR 0x40, length 0x3f;
 *                              v2: length 0x3f meaning "the length is the next byte"
 *         interface address    (length bytes, UCT's uct_iface_get_address)
 *         [ep addresses]       when HAS_EP_ADDR: { u8 len, len bytes, u8 lane | LAST 0x80 }...
 *                              (never in a worker address: refused here)
 *
 * Unified mode (UCX_UNIFIED_MODE=y, which must then be set on every peer) packs a 5-byte
 * { rsc_index | flags, f32 lat_ovh } block instead of the attributes and no interface address lengths:
 * the receiver takes them from its own interface of that resource index. That cannot be checked from
 * the bytes alone, so it is not supported: genuine unified addresses fail these checks (refused), and a
 * context in unified mode reads addresses accepted here with its own lengths.
 *
 * UCX 1.20 (same file) packs the same structure, with three differences this module follows when the
 * format is '1.20' (the loaded UCX's, see UcxProfile.workerAddressFormat):
 *   - v2 header: the high nibble of the first byte is the packer's release version (minor % 16);
 *   - v1 md byte: no ALLOC/REG flags any more, the md index is the low 7 bits (0x7f);
 *   - v1: a last, empty device whose md index carries the release version (1.20 packs `0x84 0x80`);
 *     it is an ordinary empty device to this walk.
 * Nothing else in the walk (attributes, lengths, transport addresses) changed between the two.
 *
 * Passing these checks says the address is well-formed, not that it is honest: its content (a tcp
 * host:port, a shared-memory segment id, a pid) still names whatever the peer chose, and UCX's
 * transports trust the peer they then talk to.
 */
import { InvalidArgumentError } from '../errors/misuse.js';
import { UCX_PROFILES, loadedProfile, loadedVersion, requireLoadedProfile, type UcxFormat } from '../ffi/ucx-versions.js';
import { UCXX_TS_ERROR } from '../errors/brand.js';

/**
 * Thrown for a worker address that is not shaped like one `ucp_worker_query` packs.
 *
 * @example
 * ```ts
 * try {
 *   ep = worker.connectToAddress(bytesFromPeer);
 * } catch (err) {
 *   if ((err as { code?: string }).code === 'UCXX_ERR_WORKER_ADDRESS_FORMAT') console.error('not a worker address');
 * }
 * ```
 */
export class WorkerAddressFormatError extends Error {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'UCXX_ERR_WORKER_ADDRESS_FORMAT'. */
  readonly code = 'UCXX_ERR_WORKER_ADDRESS_FORMAT' as const;
  /** Always 'WorkerAddressFormatError'. */
  override name = 'WorkerAddressFormatError';
  /**
   * For a well-formed address of a UCX release this one cannot connect to, that release as its bytes
   * tell it (e.g. 'UCX 1.20', 'UCX 1.15 or older'); undefined for an address that is not well-formed.
   */
  readonly packedBy: string | undefined;

  constructor(message: string, options?: ErrorOptions & { packedBy?: string }) {
    super(message, options);
    this.packedBy = options?.packedBy;
  }
}

/** UCP_MAX_RESOURCES (ucp_types.h): the most address entries `ucp_address_unpack` accepts. */
export const UCP_MAX_RESOURCES = 128;
/** UCP_MAX_MDS = min(UCP_MD_INDEX_BITS 64, UCP_MAX_RESOURCES 128). */
export const UCP_MAX_MDS = 64;
/** UCP_MAX_SYS_DEVICES: width of ucp_sys_dev_map_t. */
export const UCP_MAX_SYS_DEVICES = 64;
/** UCP_ADDRESS_IFACE_SEG_SIZE_FACTOR: v2 seg_size unit. */
export const SEG_SIZE_FACTOR = 64;
/**
 * The smallest v2 receive segment accepted for an interface that offers AM_SYNC. ucp_ep_config_init
 * takes `am.max_bcopy = min(local max_bcopy, remote seg_size)` for the AM lane and then
 * `ucs_assertv_always(rndv.rkey_size <= am.max_bcopy)`, which aborts the process. rkey_size is
 * ucp_rkey_packed_size() of the MDs of at most UCP_MAX_LANES (6) RMA lanes: at most
 * 8 + 1 + 6 * (1 + 255) = 1545 bytes. 1600 (25 units) is the smallest multiple of 64 above it, so no
 * local configuration can make the assertion fire. Genuine interfaces pack their AM max_bcopy, which is
 * 8 KiB or more by default (tcp, sysv, posix, self: 128 or 129 units).
 */
export const MIN_AM_SEG_SIZE = 1600;

const NULL_RESOURCE = 0xff;

// Header flags (UCP_ADDRESS_HEADER_FLAG_*).
const HDR_DEBUG_INFO = 0x1;
const HDR_WORKER_UUID = 0x2;
const HDR_CLIENT_ID = 0x4;
const HDR_AM_ONLY = 0x8;

// md byte.
const MD_EMPTY_DEV = 0x80;
const MD_MASK_V1 = 0x1f;
const MD_MASK_V2 = 0x7f;
// device length byte.
const DEV_LAST = 0x80;
const DEV_NUM_PATHS = 0x40;
const DEV_SYS_DEVICE = 0x20;
const DEV_LEN_MASK = 0x1f;
// iface length byte.
const IFACE_LAST = 0x80;
const IFACE_HAS_EP_ADDR = 0x40;
const IFACE_LEN_MASK = 0x3f;

/** v1 prio_cap_flags bits that carry something: prio, 13 capability bits, 1 event bit, 2 atomic bits. */
const V1_PRIO_CAP_KNOWN = 0xc03fffff;
/** v2 UCP_ADDR_IFACE_FLAG_*: CONNECT_TO_IFACE .. ATOMIC64 (bits 0..9). */
const V2_IFACE_FLAGS_KNOWN = 0x3ff;
const V2_FLAG_AM_SYNC = 0x2;

const V1_ATTR_SIZE = 16; // ucp_address_packed_iface_attr_t
const V2_ATTR_SIZE = 8; // ucp_address_v2_packed_iface_attr_t

export interface ByteRange {
  readonly offset: number;
  readonly length: number;
}

export interface ParsedWorkerAddressIface {
  /** Offset of the tl_name_csum. */
  readonly offset: number;
  readonly tlNameCsum: number;
  /** The transport name when the checksum is one this module knows. */
  readonly transport: string | undefined;
  readonly attributes: ByteRange;
  readonly address: ByteRange;
}

export interface ParsedWorkerAddressDevice {
  /** Offset of the md byte. */
  readonly offset: number;
  readonly mdIndex: number;
  readonly empty: boolean;
  readonly numPaths: number;
  readonly sysDev: number | null;
  readonly address: ByteRange;
  readonly ifaces: readonly ParsedWorkerAddressIface[];
}

export interface ParsedWorkerAddress {
  /** 1 or 2 (UCP_OBJECT_VERSION_V1 / _V2). */
  readonly version: 1 | 2;
  readonly headerFlags: number;
  readonly uuid: bigint | null;
  /** The debug name (UCX_ADDRESS_DEBUG_INFO=y), as latin1 text. */
  readonly name: string | null;
  readonly devices: readonly ParsedWorkerAddressDevice[];
  /**
   * The packer's release number as UCX packs it (its minor version modulo 16): the high nibble of a
   * v2 header, or the md index of the trailing empty device UCX 1.16 and newer append to a v1 address;
   * null for a v1 address without one (UCX 1.15 or older). 1.13 packs 0 into a v2 header.
   */
  readonly release: number | null;
}

/** The CRC-16 UCX uses for transport names (ucs_crc16_string: CCITT, reflected, init 0xffff, inverted). */
export function ucsCrc16(text: string): number {
  let crc = 0xffff;
  for (let i = 0; i < text.length; i++) {
    crc ^= text.charCodeAt(i) & 0xff;
    for (let bit = 0; bit < 8; bit++) crc = (crc >>> 1) ^ ((crc & 1) !== 0 ? 0x8408 : 0);
  }
  return ~crc & 0xffff;
}

/** Reads little-endian fields with bounds checks; every failure names the field and the offset. */
class Cursor {
  pos = 0;
  readonly #view: DataView;

  constructor(readonly bytes: Uint8Array) {
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get remaining(): number {
    return this.bytes.length - this.pos;
  }

  fail(message: string, at = this.pos): never {
    throw new WorkerAddressFormatError(`worker address (${this.bytes.length} bytes): ${message} (at offset ${at})`);
  }

  need(n: number, what: string): number {
    if (n > this.remaining) {
      this.fail(`${what} needs ${n} byte${n === 1 ? '' : 's'} but only ${this.remaining} remain`);
    }
    const at = this.pos;
    this.pos += n;
    return at;
  }

  u8(what: string): number {
    return this.#view.getUint8(this.need(1, what));
  }

  u16(what: string): number {
    return this.#view.getUint16(this.need(2, what), true);
  }

  u32(what: string): number {
    return this.#view.getUint32(this.need(4, what), true);
  }

  u64(what: string): bigint {
    return this.#view.getBigUint64(this.need(8, what), true);
  }

  f32(what: string): number {
    return this.#view.getFloat32(this.need(4, what), true);
  }

  range(n: number, what: string): ByteRange {
    return { offset: this.need(n, what), length: n };
  }
}

// ---- transport address checks -------------------------------------------------------------------
//
// ucp_wireup_is_reachable() calls uct_iface_is_reachable(iface, ae->dev_addr, ae->iface_addr) on every
// local transport whose tl_name_csum equals the entry's, and uct_ep_create() then connects with the same
// pointers (NULL when the packed length is 0). The transport reads its own struct from them, whatever
// length the address said. So for each transport that UCX 1.13 can have locally, the lengths must be
// exactly what that transport packs, given the self-describing flags inside the struct. Entries of a
// transport this module does not know cannot match a local transport of this UCX build and are only
// walked over (UCX never hands them to a transport either).

type AddrCheck = (bytes: Uint8Array, range: ByteRange) => string | null;

interface TransportRule {
  readonly device: AddrCheck;
  readonly iface: AddrCheck;
}

function u64At(bytes: Uint8Array, offset: number): bigint {
  return new DataView(bytes.buffer, bytes.byteOffset + offset, 8).getBigUint64(0, true);
}

function u32At(bytes: Uint8Array, offset: number): number {
  return new DataView(bytes.buffer, bytes.byteOffset + offset, 4).getUint32(0, true);
}

function exactly(n: number): AddrCheck {
  return (_bytes, r) => (r.length === n ? null : `must be ${n} bytes, is ${r.length}`);
}

const BIT63 = 1n << 63n;

/**
 * uct_iface_local_addr_ns_t (sm transports' device address, uct_sm_iface_get_device_address): u64 id
 * (system id, bit 63 = "a non-default namespace follows") and, only with bit 63, u64 sys_ns.
 * uct_iface_local_is_reachable() reads the namespace whenever bit 63 is set, so a flagged 8-byte
 * address would be read past its end; an unflagged 16-byte one is never packed.
 */
const smDevice: AddrCheck = (bytes, r) => {
  if (r.length !== 8 && r.length !== 16) return `must be 8 or 16 bytes (uct_iface_local_addr_ns_t), is ${r.length}`;
  const flagged = (u64At(bytes, r.offset) & BIT63) !== 0n;
  if (flagged !== (r.length === 16)) {
    return flagged ? 'has the namespace flag (bit 63) but no namespace (8 bytes)'
      : 'is 16 bytes but lacks the namespace flag (bit 63)';
  }
  return null;
};

/**
 * uct_tcp_device_addr_t: u8 flags (LOOPBACK = 1), u8 sa_family, then for loopback a
 * uct_iface_local_addr_ns_t (16 bytes, always with the namespace field), otherwise the raw in_addr
 * (AF_INET, 4 bytes) or in6_addr (AF_INET6, 16 bytes). uct_tcp_ep_set_dest_addr() copies as many bytes as
 * the family says and uct_tcp_iface_is_reachable() reads the namespace record of a loopback address.
 */
const AF_INET = 2;
const AF_INET6 = 10;
const tcpDevice: AddrCheck = (bytes, r) => {
  if (r.length < 2) return `must be at least 2 bytes (uct_tcp_device_addr_t), is ${r.length}`;
  const flags = bytes[r.offset] as number;
  const family = bytes[r.offset + 1] as number;
  if ((flags & ~1) !== 0) return `has unknown flags 0x${flags.toString(16)}`;
  if (family !== AF_INET && family !== AF_INET6) return `has address family ${family}, not AF_INET or AF_INET6`;
  const expected = 2 + ((flags & 1) !== 0 ? 16 : family === AF_INET ? 4 : 16);
  return r.length === expected ? null
    : `must be ${expected} bytes for ${(flags & 1) !== 0 ? 'a loopback' : family === AF_INET ? 'an IPv4' : 'an IPv6'} interface, is ${r.length}`;
};

/**
 * posix iface address: uct_mm_iface_addr_t (u64 fifo_seg_id) + what uct_posix_iface_addr_pack adds:
 * with PROCFS (bit 63) the PID namespace (8 bytes) iff PID_NS (bit 60), nothing otherwise; with
 * SHM_OPEN (bit 62) and no PROCFS nothing; with neither, the NUL-terminated backing directory, which
 * uct_posix_mem_attach_common() formats with "%s" (an unterminated one is read past its end).
 * uct_posix_is_reachable() reads the namespace whenever PID_NS is set.
 */
const POSIX_PROCFS = 1n << 63n;
const POSIX_SHM_OPEN = 1n << 62n;
const POSIX_PID_NS = 1n << 60n;
const posixIface: AddrCheck = (bytes, r) => {
  if (r.length < 8) return `must be at least 8 bytes (uct_mm_iface_addr_t), is ${r.length}`;
  const seg = u64At(bytes, r.offset);
  const extra = r.length - 8;
  if ((seg & POSIX_PROCFS) !== 0n) {
    const want = (seg & POSIX_PID_NS) !== 0n ? 8 : 0;
    return extra === want ? null : `must be ${8 + want} bytes for a procfs segment id${want ? ' with PID namespace' : ''}, is ${r.length}`;
  }
  if ((seg & POSIX_PID_NS) !== 0n) return 'has the PID namespace flag without the procfs flag';
  if ((seg & POSIX_SHM_OPEN) !== 0n) return extra === 0 ? null : `must be 8 bytes for a shm_open segment id, is ${r.length}`;
  if (extra < 1) return 'lacks the backing directory of a file segment id';
  const dir = bytes.subarray(r.offset + 8, r.offset + r.length);
  const nul = dir.indexOf(0);
  return nul === dir.length - 1 ? null : 'has a backing directory that is not one NUL-terminated string';
};

/**
 * cma iface address: pid_t (4 bytes); with UCT_CMA_IFACE_ADDR_FLAG_PID_NS (bit 31) the (unpacked, so
 * 16-byte) ucs_cma_iface_ext_device_addr_t whose pid_ns uct_cma_iface_is_reachable() reads.
 */
const cmaIface: AddrCheck = (bytes, r) => {
  if (r.length !== 4 && r.length !== 16) return `must be 4 or 16 bytes, is ${r.length}`;
  const flagged = (u32At(bytes, r.offset) & 0x80000000) !== 0;
  if (flagged !== (r.length === 16)) {
    return flagged ? 'has the PID namespace flag (bit 31) but no namespace' : 'is 16 bytes but lacks the PID namespace flag';
  }
  return null;
};

/**
 * uct_ib_address_t (all IB transports' device address): u8 flags, then, as uct_ib_address_unpack()
 * reads them: ETH (0x08): 16-byte GID (bits 4..7: RoCE IPv6 flag and version); else u16 LID, u64
 * interface id when IF_ID (0x40), u16 subnet when SUBNET16 (0x10), u64 subnet when SUBNET64 (0x20);
 * then u8 path MTU when PATH_MTU (0x02), u8 GID index when GID_INDEX (0x01), u16 pkey when PKEY (0x04).
 */
const ibDevice: AddrCheck = (bytes, r) => {
  if (r.length < 1) return 'must hold at least the uct_ib_address_t flags byte';
  const flags = bytes[r.offset] as number;
  let size = 1;
  if ((flags & 0x08) !== 0) {
    size += 16;
  } else {
    if ((flags & 0x80) !== 0) return `has unknown flag 0x80 (flags 0x${flags.toString(16)})`;
    if ((flags & 0x30) === 0x30) return 'has both SUBNET16 and SUBNET64';
    size += 2;
    if ((flags & 0x40) !== 0) size += 8;
    if ((flags & 0x10) !== 0) size += 2;
    if ((flags & 0x20) !== 0) size += 8;
  }
  if ((flags & 0x02) !== 0) size += 1;
  if ((flags & 0x01) !== 0) size += 1;
  if ((flags & 0x04) !== 0) size += 2;
  return r.length === size ? null : `must be ${size} bytes for flags 0x${flags.toString(16)} (uct_ib_address_t), is ${r.length}`;
};

const none = exactly(0);

/** Every transport UCX 1.13.1 ships, with the device and interface address each one packs. */
const TRANSPORTS: ReadonlyMap<number, TransportRule & { readonly name: string }> = new Map(
  ([
    // uct_self_iface_addr_t (u64 id); no device address (self's is_reachable ignores it).
    ['self', { device: none, iface: exactly(8) }],
    // uct_tcp_iface_addr_t (u16 port): uct_tcp_ep_set_dest_addr reads it.
    ['tcp', { device: tcpDevice, iface: exactly(2) }],
    // uct_mm_iface_addr_t (u64 shmid), sysv adds nothing.
    ['sysv', { device: smDevice, iface: exactly(8) }],
    ['posix', { device: smDevice, iface: posixIface }],
    // uct_mm_iface_addr_t + uct_xpmem_iface_addr_t (xpmem_segid_t).
    ['xpmem', { device: smDevice, iface: exactly(16) }],
    ['cma', { device: smDevice, iface: cmaIface }],
    ['knem', { device: smDevice, iface: none }],
    // rc base: no iface address; rc_mlx5: u8; dc_mlx5: uct_dc_mlx5_iface_addr_t (5); ud: u24 qp number.
    ['rc_verbs', { device: ibDevice, iface: none }],
    ['rc_mlx5', { device: ibDevice, iface: exactly(1) }],
    ['dc_mlx5', { device: ibDevice, iface: exactly(5) }],
    ['ud_verbs', { device: ibDevice, iface: exactly(3) }],
    ['ud_mlx5', { device: ibDevice, iface: exactly(3) }],
    // GPU copy transports: u64 iface id, no device address; IPC ones: pid_t iface, u64 device.
    ['cuda_copy', { device: none, iface: exactly(8) }],
    ['gdr_copy', { device: none, iface: exactly(8) }],
    ['rocm_copy', { device: none, iface: exactly(8) }],
    ['rocm_gdr', { device: none, iface: exactly(8) }],
    ['cuda_ipc', { device: exactly(8), iface: exactly(4) }],
    ['rocm_ipc', { device: exactly(8), iface: exactly(4) }],
  ] as const).map(([name, rule]) => [ucsCrc16(name), { name, ...rule }]),
);

/** The transport name for a tl_name_csum, when it is one UCX 1.13.1 ships. */
export function transportOfCsum(csum: number): string | undefined {
  return TRANSPORTS.get(csum)?.name;
}

// ---- the walk ----------------------------------------------------------------------------------------

/** fp8 (ucs/type/float8.h): low 4 bits exponent; 15 decodes to NaN/inf, 0 is the special zero. */
function checkFp8(c: Cursor, value: number, what: string, at: number, mayBeZero: boolean): void {
  const exponent = value & 0xf;
  // ucs_fp8_pack produces exponent 15 only for NaN; the decoded NaN/inf would poison lane scores.
  if (exponent === 0xf) c.fail(`${what} is NaN/infinite (fp8 0x${value.toString(16)})`, at);
  // Exponent 0 is only ever packed for the value 0, with a zero mantissa.
  if (exponent === 0 && value !== 0) c.fail(`${what} is a non-canonical fp8 zero (0x${value.toString(16)})`, at);
  // ucp_address_unpack_iface_attr refuses bandwidth <= 0 (UCS_ERR_INVALID_ADDR).
  if (value === 0 && !mayBeZero) c.fail(`${what} is 0`, at);
}

/**
 * An address length (device or interface): the low bits of `lenByte` under `mask`; in v2, the mask
 * itself escapes to a following byte, which ucp_address_pack_byte_extended uses only for lengths >= mask.
 */
function readAddressLength(c: Cursor, lenByte: number, mask: number, v2: boolean, what: string, lenAt: number): number {
  let length = lenByte & mask;
  if (v2 && length === mask) {
    length = c.u8(`${what} extended address length`);
    if (length < mask) c.fail(`${what} has a non-canonical extended address length ${length}`, lenAt);
  }
  return length;
}

function readAttributes(c: Cursor, v2: boolean, index: number): ByteRange {
  const what = `interface #${index} attributes`;
  const at = c.pos;
  if (!v2) {
    c.need(V1_ATTR_SIZE, `${what} (v1, ${V1_ATTR_SIZE} bytes)`);
    c.pos = at;
    const overhead = c.f32(what);
    const bandwidth = c.f32(what);
    const latOvh = c.f32(what);
    const prioCap = c.u32(what);
    // Genuine values are finite, overhead/latency non-negative; NaN slips through UCX's `bandwidth <= 0`
    // check and poisons the lane-selection arithmetic.
    if (!Number.isFinite(overhead) || overhead < 0) c.fail(`${what}: overhead ${overhead} is not a finite non-negative number`, at);
    if (!Number.isFinite(latOvh) || latOvh < 0) c.fail(`${what}: latency ${latOvh} is not a finite non-negative number`, at + 8);
    // Negative bandwidth is how UCX <= 1.11 packed "shared" bandwidth, and 1.13 still decodes it; zero
    // makes ucp_address_unpack fail anyway.
    if (!Number.isFinite(bandwidth) || bandwidth === 0) c.fail(`${what}: bandwidth ${bandwidth} is not a finite non-zero number`, at + 4);
    // Bits 22..29 of prio_cap_flags carry nothing in 1.13; a packer never sets them.
    if ((prioCap & ~V1_PRIO_CAP_KNOWN) !== 0) {
      c.fail(`${what}: unknown capability bits 0x${((prioCap & ~V1_PRIO_CAP_KNOWN) >>> 0).toString(16)}`, at + 12);
    }
    return { offset: at, length: V1_ATTR_SIZE };
  }
  c.need(V2_ATTR_SIZE, `${what} (v2, ${V2_ATTR_SIZE} bytes)`);
  c.pos = at;
  const overhead = c.u8(what);
  const bandwidth = c.u8(what);
  const latency = c.u8(what);
  c.u8(what); // priority: any value
  const segSize = c.u16(what);
  const flags = c.u16(what);
  checkFp8(c, overhead, `${what}: overhead`, at, true);
  checkFp8(c, bandwidth, `${what}: bandwidth`, at + 1, false);
  checkFp8(c, latency, `${what}: latency`, at + 2, true);
  if ((flags & ~V2_IFACE_FLAGS_KNOWN) !== 0) {
    c.fail(`${what}: unknown interface flags 0x${(flags & ~V2_IFACE_FLAGS_KNOWN).toString(16)}`, at + 6);
  }
  // An AM-capable interface can become the AM lane, whose max_bcopy is capped by this value; see
  // MIN_AM_SEG_SIZE for the assertion a small one triggers.
  if ((flags & V2_FLAG_AM_SYNC) !== 0 && segSize * SEG_SIZE_FACTOR < MIN_AM_SEG_SIZE) {
    c.fail(`${what}: an active-message interface with a ${segSize * SEG_SIZE_FACTOR}-byte receive segment ` +
      `(UCX needs at least ${MIN_AM_SEG_SIZE})`, at + 4);
  }
  return { offset: at, length: V2_ATTR_SIZE };
}

/**
 * Walks `bytes` exactly as UCX 1.13.1's ucp_address_unpack would for ucp_ep_create, with every check
 * described in the module comment, and returns what it found. Throws WorkerAddressFormatError.
 */
export function parseWorkerAddress(bytes: Uint8Array, format: UcxFormat = requireLoadedProfile().workerAddressFormat): ParsedWorkerAddress {
  if (!(bytes instanceof Uint8Array)) throw new InvalidArgumentError('worker address must be a Uint8Array');
  let parsed: ParsedWorkerAddress | undefined;
  let failure: unknown;
  try {
    parsed = walkWorkerAddress(bytes, format);
    if (packedByRange(parsed, format)) return parsed;
  } catch (err) {
    failure = err;
  }
  // Not an address of this release: a well-formed address of another format's releases is named as
  // such, not by the first byte it trips on.
  for (const other of KNOWN_FORMATS) {
    if (other === format || format === 'unvalidated') continue;
    let theirs: ParsedWorkerAddress;
    try {
      theirs = walkWorkerAddress(bytes, other);
    } catch {
      continue;
    }
    if (packedByRange(theirs, other)) refuseRelease(bytes, theirs, other, format);
  }
  if (parsed === undefined) throw failure;
  return refuseRelease(bytes, parsed, undefined, format);
}

/** The formats with a parser, each with the UCX minor versions whose addresses it reads. */
const KNOWN_FORMATS: readonly UcxFormat[] = ['1.13', '1.20'];

function minorsOf(format: UcxFormat): readonly [number, number] {
  const ranges = UCX_PROFILES.filter((p) => p.workerAddressFormat === format).map((p) => p.minors);
  return [Math.min(...ranges.map((r) => r[0])), Math.max(...ranges.map((r) => r[1]))];
}

/** The tested range of a format, as error messages name it (e.g. '1.19.x-1.20.x'). */
function rangeOf(format: UcxFormat): string {
  return UCX_PROFILES.filter((p) => p.workerAddressFormat === format).map((p) => p.range).join(' and ');
}

/**
 * The minor version a packed release number stands for, read as UCX does (ucp_address_unpack_release_version:
 * the value closest to the reader's own minor version).
 */
function releaseMinor(release: number, readerMinor: number): number {
  let best = release;
  for (let m = release; m <= readerMinor + 16; m += 16) if (Math.abs(m - readerMinor) < Math.abs(best - readerMinor)) best = m;
  return best;
}

/** Whether a well-formed address was packed by a UCX of the format's tested range, as far as its bytes tell. */
function packedByRange(parsed: ParsedWorkerAddress, format: UcxFormat): boolean {
  // An address without devices carries no release number in either version.
  if (format === 'unvalidated' || parsed.devices.length === 0) return true;
  const [low, high] = minorsOf(format);
  // Before 1.16, a v1 address carries no release number, and 1.13's v2 header carries 0.
  if (high < 16) return parsed.release === null || (parsed.version === 2 && parsed.release === 0);
  if (parsed.release === null) return false;
  const minor = releaseMinor(parsed.release, high);
  return minor >= low && minor <= high;
}

/** Who packed a well-formed address, in words (see ParsedWorkerAddress.release). */
function packerOf(parsed: ParsedWorkerAddress, format: UcxFormat | undefined, reader: UcxFormat): string {
  if (format !== undefined && minorsOf(format)[1] < 16) return `UCX ${rangeOf(format)}`;
  if (parsed.release === null) return 'UCX 1.15 or older';
  const minor = releaseMinor(parsed.release, minorsOf(reader)[1]);
  return parsed.version === 2 && parsed.release === 0 ? `UCX 1.${minor} or a release before 1.16` : `UCX 1.${minor}`;
}

function refuseRelease(bytes: Uint8Array, parsed: ParsedWorkerAddress, format: UcxFormat | undefined, reader: UcxFormat): never {
  const packedBy = packerOf(parsed, format, reader);
  const version = loadedVersion();
  const own = version !== undefined && loadedProfile()?.workerAddressFormat === reader ? version.join('.') : rangeOf(reader);
  throw new WorkerAddressFormatError(
    `worker address (${bytes.length} bytes): packed by ${packedBy}, but this process runs UCX ${own}, which ` +
      `does not connect to another UCX release: run both peers on UCX ${rangeOf(reader)}`,
    { packedBy },
  );
}

/** The walk of parseWorkerAddress in one format, without the release check. */
function walkWorkerAddress(bytes: Uint8Array, format: UcxFormat): ParsedWorkerAddress {
  const c: Cursor = new Cursor(bytes);
  if (format === 'unvalidated') c.fail('cannot be checked: the worker address format of this UCX version is not known to ucxx-ts');
  if (bytes.length === 0) c.fail('is empty');
  const ucx120 = format === '1.20';

  // Header. ucp_address_unpack_header: a version other than v1 (0) and v2 (1) hits
  // ucs_assertv_always, which aborts the process.
  const b0 = c.u8('header');
  const versionNibble = b0 & 0xf;
  let v2: boolean;
  let flags: number;
  if (versionNibble === 0) {
    v2 = false;
    flags = b0 >> 4;
  } else if (versionNibble === 1) {
    v2 = true;
    // 1.13's ucp_address_do_pack writes the bare version into the first byte; 1.20 its release version
    // into the high nibble.
    if (!ucx120 && (b0 & 0xf0) !== 0) c.fail(`v2 header byte 0x${b0.toString(16)} has bits in its high nibble`, 0);
    flags = c.u8('v2 header flags');
    if ((flags & ~0xf) !== 0) c.fail(`unknown v2 header flags 0x${(flags & ~0xf).toString(16)}`, 1);
  } else {
    c.fail(`unknown address version ${versionNibble} (UCX 1.13 knows v1 = 0 and v2 = 1 and aborts on others)`, 0);
  }
  // CLIENT_ID and AM_ONLY are packed only into the addresses of the client-server (sockaddr) wireup,
  // never by ucp_worker_query, which packs UUID | WORKER_NAME | DEVICE_ADDR | IFACE_ADDR.
  if ((flags & HDR_CLIENT_ID) !== 0) c.fail('has a client id, which only client-server wireup addresses carry', 0);
  if ((flags & HDR_AM_ONLY) !== 0) c.fail('is marked AM-only, which only client-server wireup addresses are', 0);
  // v1: 1.13 reads the uuid even when the flag is absent (UCX < 1.12 did not set it); v2 always had it.
  if (v2 && (flags & HDR_WORKER_UUID) === 0) c.fail('is a v2 address without a worker uuid', 1);
  const uuid = c.u64('worker uuid');

  let name: string | null = null;
  if ((flags & HDR_DEBUG_INFO) !== 0) {
    // ucp_address_unpack_worker_address_name: u8 length, then that many bytes (packed with strlen).
    const at = c.pos;
    const length = c.u8('worker name length');
    const r = c.range(length, `worker name of ${length} bytes`);
    const text = bytes.subarray(r.offset, r.offset + r.length);
    if (text.includes(0)) c.fail('worker name contains a NUL byte', at);
    name = Buffer.from(text).toString('latin1');
  }

  const devices: ParsedWorkerAddressDevice[] = [];
  if (c.remaining === 0) c.fail('ends before its device list');
  if (bytes[c.pos] === NULL_RESOURCE) {
    // An empty address list is the single byte UCP_NULL_RESOURCE; UCX stops reading there.
    c.pos += 1;
  } else {
    let entries = 0;
    for (let last = false; !last;) {
      const devOffset = c.pos;
      const dev = `device #${devices.length}`;
      // ucp_select indexes `unsigned remote_dev_count[UCP_MAX_RESOURCES]` (on the stack) with the
      // device index, which ucp_address_unpack increments (as a u8) for every device, empty ones too.
      if (devices.length >= UCP_MAX_RESOURCES) c.fail(`has more than ${UCP_MAX_RESOURCES} devices`);

      const mdByte = c.u8(`${dev} md index`);
      const empty = (mdByte & MD_EMPTY_DEV) !== 0;
      let mdIndex = mdByte & (v2 || ucx120 ? MD_MASK_V2 : MD_MASK_V1);
      if (v2 && mdIndex === MD_MASK_V2) {
        mdIndex = c.u8(`${dev} extended md index`);
      }
      // ucp_wireup_get_reachable_mds writes `ae_cmpts[ae->md_index]`, a UCP_MAX_MDS (64) array on the
      // stack, and shifts 64-bit md maps by it. No context has more than 64 MDs, and the v2 escape is
      // only packed for md indices >= 127.
      if (mdIndex >= UCP_MAX_MDS) c.fail(`${dev} has md index ${mdIndex}, beyond UCP_MAX_MDS (${UCP_MAX_MDS})`, devOffset);

      const lenAt = c.pos;
      const lenByte = c.u8(`${dev} address length`);
      last = (lenByte & DEV_LAST) !== 0;
      const devLength = readAddressLength(c, lenByte, DEV_LEN_MASK, v2, dev, lenAt);
      let numPaths = 1;
      if ((lenByte & DEV_NUM_PATHS) !== 0) {
        numPaths = c.u8(`${dev} number of paths`);
        // Packed only when the device has more than one path.
        if (numPaths < 2) c.fail(`${dev} packs a number of paths of ${numPaths}`, c.pos - 1);
      }
      let sysDev: number | null = null;
      if ((lenByte & DEV_SYS_DEVICE) !== 0) {
        sysDev = c.u8(`${dev} system device`);
        // Packed only for a known system device (never UCS_SYS_DEVICE_ID_UNKNOWN = 255); it becomes a
        // lane's dst_sys_dev, used as a bit index of the 64-bit ucp_sys_dev_map_t and to index
        // distance_by_dev[UCP_MAX_SYS_DEVICES] in ucp_rkey_proto_resolve.
        if (sysDev >= UCP_MAX_SYS_DEVICES) c.fail(`${dev} has system device ${sysDev}, beyond ${UCP_MAX_SYS_DEVICES - 1}`, c.pos - 1);
      }
      const devAddress = c.range(devLength, `${dev} address of ${devLength} bytes`);

      const ifaces: ParsedWorkerAddressIface[] = [];
      for (let lastIface = empty; !lastIface;) {
        const at = c.pos;
        const what = `interface #${entries}`;
        // ucp_address_unpack refuses more than UCP_MAX_RESOURCES entries.
        if (entries >= UCP_MAX_RESOURCES) c.fail(`has more than ${UCP_MAX_RESOURCES} interfaces`);
        const csum = c.u16(`${what} transport checksum`);
        const attributes = readAttributes(c, v2, entries);
        const ifLenAt = c.pos;
        const ifLenByte = c.u8(`${what} address length`);
        lastIface = (ifLenByte & IFACE_LAST) !== 0;
        const ifLength = readAddressLength(c, ifLenByte, IFACE_LEN_MASK, v2, what, ifLenAt);
        // ucp_worker_query packs no endpoint addresses (ucp_address_pack clears EP_ADDR for ep == NULL).
        if ((ifLenByte & IFACE_HAS_EP_ADDR) !== 0) c.fail(`${what} carries endpoint addresses, which worker addresses never do`, ifLenAt);
        const ifAddress = c.range(ifLength, `${what} address of ${ifLength} bytes`);

        const rule = TRANSPORTS.get(csum);
        if (rule !== undefined) {
          const devProblem = rule.device(bytes, devAddress);
          if (devProblem !== null) c.fail(`${dev} (${rule.name}) address ${devProblem}`, devAddress.offset);
          const ifProblem = rule.iface(bytes, ifAddress);
          if (ifProblem !== null) c.fail(`${what} (${rule.name}) address ${ifProblem}`, ifAddress.offset);
        }
        ifaces.push({ offset: at, tlNameCsum: csum, transport: rule?.name, attributes, address: ifAddress });
        entries++;
      }
      devices.push({ offset: devOffset, mdIndex, empty, numPaths, sysDev, address: devAddress, ifaces });
    }
  }
  // UCX stops at the last device without knowing the length; anything after it is not a genuine address.
  if (c.remaining !== 0) c.fail(`has ${c.remaining} byte${c.remaining === 1 ? '' : 's'} after its last device`);
  // 1.16+ ends a v1 address with an empty device without address whose md index is its release number.
  const tail = devices[devices.length - 1];
  const release = v2 ? b0 >> 4 : devices.length > 1 && tail !== undefined && tail.empty && tail.address.length === 0 ? tail.mdIndex : null;
  return { version: v2 ? 2 : 1, headerFlags: flags, uuid, name, devices, release };
}

/**
 * Throws WorkerAddressFormatError unless `bytes` is shaped exactly like a worker address the loaded UCX
 * (1.13.1 or 1.20.1) packs (non-unified mode, address version v1 or v2), so that ucp_ep_create can read it without going out of
 * bounds, aborting, or handing a transport a truncated or inconsistent address.
 */
export function validateWorkerAddress(bytes: Uint8Array, format?: UcxFormat): void {
  parseWorkerAddress(bytes, format);
}
