/**
 * Everything of ucxx-ts that depends on the version of the libucp it loaded, in one table: one profile
 * per tested range of UCX minor versions, chosen once at load from `ucp_get_version`. Other modules ask
 * `ucxProfile()` (src/ffi/index.ts) and never compare version numbers themselves.
 *
 * What is the same on every supported version stays where it is: the struct layouts of src/ffi/layouts.ts
 * (every `*_params_t` only grows at its end behind `field_mask`; the layout probe compiles against each
 * version's headers and checks them) and the constants of src/ffi/constants.ts (checked the same way).
 */
import { UCXX_TS_ERROR } from '../errors/brand.js';

/** Which parser of UCX's own byte formats applies (src/internal/worker-address.ts, packed-rkey.ts, ...). */
export type UcxFormat = '1.13' | '1.20' | 'unvalidated';

/** A tested range of UCX versions and what ucxx-ts does differently on it. */
export interface UcxProfile {
  /** The range, as error messages and `ucxx-info` name it, e.g. '1.13.x'. */
  readonly range: string;
  /** The lowest and highest minor version of UCX 1 this profile was tested on. */
  readonly minors: readonly [number, number];
  /**
   * Whether `ucs_config_parser_print_all_opts` takes a trailing `filter` argument (added in 1.14; NULL
   * prints everything). Called without it, the filter is whatever the register holds: nothing printed.
   */
  readonly printAllOptsHasFilter: boolean;
  /**
   * How a TCP transport option (KEEPIDLE, KEEPINTVL, KEEPCNT, CM_REUSEADDR) is named for
   * `ucp_config_modify`. 1.13 hands an unknown name to every transport table as is, and its tables
   * match the bare name (with the `TCP_` prefix it only warns "invalid configuration"); from 1.14 on,
   * `ucp_config_modify` refuses a name no registered table has under its full (prefixed) name.
   */
  readonly tcpOptionName: (name: string) => string;
  /** The parser of packed worker addresses (`ucp_worker_query(ADDRESS)`, `ucp_ep_create`'s input). */
  readonly workerAddressFormat: UcxFormat;
  /** The parser of packed remote keys (`ucp_rkey_pack`, `ucp_ep_rkey_unpack`'s input). */
  readonly packedRkeyFormat: UcxFormat;
  /** The layout of the sysv/posix records inside a packed rkey that shm-rkey-check.ts verifies. */
  readonly shmRecordFormat: UcxFormat;
  /**
   * Workarounds of UCX bugs, each true where the bug exists (its plain-C reproduction named).
   * - fetchBitwiseByCompareAndSwap: fetching and/or/xor over shared memory return wrong values
   *   (docs/ucx-1.13-bugs/); ucxx-ts computes them with a compare-and-swap loop instead.
   * - peerRendezvousOwnMemh: a PEER-mode endpoint purged (failed, or closed) with a rendezvous send in
   *   flight dies by SIGSEGV when UCX registered the send's buffer itself and the context has no
   *   registration cache (memory events off, as ucxx-ts sets them): ucp_request_memh_invalidate ->
   *   ucs_rcache_region_invalidate(NULL) (docs/ucx-1.20-bugs/force_close_unmatched_rndv.c). It skips
   *   a handle the caller passed, so ucxx-ts maps such sends' buffers itself (src/engine/own-memh.ts).
   *   A rendezvous receive being fetched from such an endpoint dies the same way (ucp_proto_rndv_rtr_abort:
   *   a ucxx peer killed while sending 16 MiB messages), so tag receives and AM data get one too.
   * - zeroedFetchAtomicRequests: with the v1 protocols, an endpoint purged while a software-emulated
   *   fetching atomic waits for its reply dies by SIGSEGV (1.20.1) or an assertion (1.13.1): the purge
   *   deregisters the request's memory handle, which the atomic never initialised (stale from UCX's
   *   request pool; docs/ucx-1.20-bugs/purge_fetch_atomic.c). ucxx-ts passes fetching atomics zeroed
   *   request memory of its own (src/engine/own-request.ts).
   */
  /**
   * Parameter structs that grew at their end in this version (C sizeof): ucxx-ts fills the 1.13 prefix
   * of src/ffi/layouts.ts and never sets the field_mask bits of the new tail, so UCX never reads it.
   * The layout probe checks these sizes against the version's headers.
   */
  readonly grownStructs: Readonly<Record<string, number>>;
  readonly workarounds: {
    readonly fetchBitwiseByCompareAndSwap: boolean;
    readonly peerRendezvousOwnMemh: boolean;
    readonly zeroedFetchAtomicRequests: boolean;
  };
  /**
   * The error-handling mode of an endpoint created with errorHandling 'auto' (the default), chosen by
   * measurement (docs/interoperability.md):
   * - 'none-on-this-host' (1.13, where no ucxx release runs): NONE for a peer on this host, PEER for
   *   the others. Shared memory refuses PEER mode, so PEER on one host is TCP: RMA is then software RMA
   *   that the owner's progress serves (not one-sided), 4x the latency and under 1/80 of the get
   *   bandwidth.
   * - 'peer' (1.19 and newer, what ucxx 0.52 runs on): PEER for every peer, as every ucxx C++ endpoint
   *   builder and ucxx Python's create_endpoint/create_listener default to. Their servers refuse a NONE
   *   client, and a NONE attempt can kill such a server (libucxx throws in its listener callback), so
   *   no mode is tried first. On one host this is TCP, as between ucxx peers.
   */
  readonly defaultErrorMode: 'peer' | 'none-on-this-host';
  /**
   * UCP options every Context sets on this version unless the user set them (in `config` or as UCX_*
   * in the environment), each for a bug of this version:
   * - PROTO_ENABLE=n (1.20): fetching atomics never complete on a PEER-mode endpoint with the v2
   *   protocols (amo_sw.c's fetch probe lacks UCP_PROTO_COMMON_INIT_FLAG_ERR_HANDLING, so PEER mode
   *   drops the only protocol and the placeholder never finishes; stock ucx_perftest `ucp_fadd -e`
   *   hangs, docs/ucx-1.20-bugs/peer_mode_atomics.sh). The v1 protocols complete them, and a v1
   *   initiator interoperates with a v2 peer (the selection is local: ucx_perftest with either side
   *   on v1 completes tag, stream, AM, put, get and fadd).
   * Never POSIX_ERROR_HANDLING or SYSV_ERROR_HANDLING: set on one side only, 1.20.1 cannot wire a
   *   rendezvous-capable lane to a peer that does not set them (1 MiB tag_bw: "no active messages
   *   transport", the client hangs), and ucxx sets neither.
   */
  readonly contextDefaults: Readonly<Record<string, string>>;
  /**
   * UCX bugs that ucxx-ts cannot avoid (each reproduced with a stock UCX program, see
   * docs/ucx-versions.md); they surface as typed errors, and tests that would meet them ask this.
   * - tcpLoopbackUnreachable: a tcp interface on `lo` cannot reach another one on `lo` (UCX_TLS=tcp
   *   UCX_NET_DEVICES=lo: "no route to" an address read from the loopback device address's namespace
   *   bytes), so such a worker connects to nobody, itself included: ucp_ep_create says UNREACHABLE.
   */
  readonly unavoidableBugs: {
    readonly tcpLoopbackUnreachable: boolean;
    /**
     * UCX cannot wire up an endpoint between contexts whose features differ when their lanes differ
     * (a stream-only peer in PEER mode, or over two links: "no remote ep address for lane", then
     * UNREACHABLE; plain C too): ucxx-ts's UnreachableError then names the fix (the peer's features).
     */
    readonly featureMismatchUnreachable: boolean;
    /**
     * A peer on this version with its default (v2) protocols never completes a fetching atomic it
     * initiates on a PEER-mode endpoint (see `contextDefaults`): ucxx-ts avoids it for its own
     * atomics, and such a peer needs UCX_PROTO_ENABLE=n to fetch from ucxx-ts's memory.
     */
    readonly peerModeFetchAtomicsHang: boolean;
  };
}

/** The tested ranges, oldest first. */
export const UCX_PROFILES: readonly UcxProfile[] = Object.freeze([
  Object.freeze<UcxProfile>({
    range: '1.13.x',
    minors: [13, 13],
    printAllOptsHasFilter: false,
    tcpOptionName: (name) => name,
    workerAddressFormat: '1.13',
    packedRkeyFormat: '1.13',
    shmRecordFormat: '1.13',
    grownStructs: Object.freeze({}),
    workarounds: Object.freeze({ fetchBitwiseByCompareAndSwap: true, peerRendezvousOwnMemh: false, zeroedFetchAtomicRequests: true }),
    defaultErrorMode: 'none-on-this-host',
    contextDefaults: Object.freeze({}),
    unavoidableBugs: Object.freeze({ tcpLoopbackUnreachable: false, featureMismatchUnreachable: true, peerModeFetchAtomicsHang: false }),
  }),
  Object.freeze<UcxProfile>({
    range: '1.19.x-1.20.x',
    minors: [19, 20],
    printAllOptsHasFilter: true,
    tcpOptionName: (name) => `TCP_${name}`,
    workerAddressFormat: '1.20',
    packedRkeyFormat: '1.20',
    shmRecordFormat: '1.13', // uct_sysv_packed_rkey_t and uct_posix_packed_rkey_t are unchanged in 1.20
    grownStructs: Object.freeze({ ucp_params_t: 88, ucp_context_attr_t: 72, ucp_mem_map_params_t: 48, ucp_ep_attr_t: 328 }),
    workarounds: Object.freeze({ fetchBitwiseByCompareAndSwap: false, peerRendezvousOwnMemh: true, zeroedFetchAtomicRequests: true }),
    defaultErrorMode: 'peer',
    contextDefaults: Object.freeze({ PROTO_ENABLE: 'n' }),
    unavoidableBugs: Object.freeze({ tcpLoopbackUnreachable: true, featureMismatchUnreachable: false, peerModeFetchAtomicsHang: true }),
  }),
]);

/** The versions ucxx-ts is tested against, as error messages name them. */
export const SUPPORTED_UCX = {
  major: 1,
  ranges: UCX_PROFILES.map((p) => p.range),
  text: UCX_PROFILES.map((p) => p.range).join(' and '),
} as const;

/**
 * Raised at load when libucp is of a version ucxx-ts does not support. Older than 1.13 lacks the API;
 * versions between or beyond the tested ranges are untested: their packed worker addresses and remote
 * keys may differ from what ucxx-ts validates, so they are refused unless UCXX_TS_UCX_VERSION_CHECK=off
 * (which applies the profile of the newest range older than the version found).
 *
 * @example
 * ```ts
 * try {
 *   getUcxVersion(); // loads libucp
 * } catch (err) {
 *   if (err instanceof UnsupportedUcxVersionError) console.error(`UCX ${err.found} found, ${err.supported} needed`);
 * }
 * ```
 */
export class UnsupportedUcxVersionError extends Error {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'UnsupportedUcxVersionError'. */
  override readonly name = 'UnsupportedUcxVersionError';
  /** Always 'UCXX_ERR_UCX_VERSION'. */
  readonly code = 'UCXX_ERR_UCX_VERSION';
  /** The version of the library that was found, e.g. '1.16.0'. */
  readonly found: string;
  /** The versions ucxx-ts supports, e.g. '1.13.x and 1.19.x-1.20.x'. */
  readonly supported = SUPPORTED_UCX.text;
  constructor(found: string, library: string) {
    super(
      `ucxx-ts supports UCX ${SUPPORTED_UCX.text}, but ${library} is UCX ${found}. Install a supported UCX ` +
        '(Debian 12: apt-get install libucx0; or the wheel: pip install libucx-cu12==1.20.1 and set ' +
        'UCXX_TS_UCX_LIBDIR to its libucx/lib), or, for an untested version at your own risk, set ' +
        'UCXX_TS_UCX_VERSION_CHECK=off.',
    );
    this.found = found;
  }
}

/**
 * The profile for [major, minor, release]; throws UnsupportedUcxVersionError for a version outside every
 * tested range, unless UCXX_TS_UCX_VERSION_CHECK=off lets one newer than 1.13 through (with the profile
 * of the newest range that starts at or below it).
 */
export function profileFor(version: readonly [number, number, number]): UcxProfile {
  const [major, minor, release] = version;
  if (major === SUPPORTED_UCX.major) {
    const exact = UCX_PROFILES.find((p) => minor >= p.minors[0] && minor <= p.minors[1]);
    if (exact !== undefined) return exact;
  }
  const oldest = UCX_PROFILES[0] as UcxProfile;
  const newer = major > SUPPORTED_UCX.major || (major === SUPPORTED_UCX.major && minor > oldest.minors[0]);
  if (newer && process.env['UCXX_TS_UCX_VERSION_CHECK'] === 'off') {
    const below = UCX_PROFILES.filter((p) => major > SUPPORTED_UCX.major || p.minors[0] <= minor);
    return below[below.length - 1] as UcxProfile;
  }
  const dir = process.env['UCXX_TS_UCX_LIBDIR'];
  throw new UnsupportedUcxVersionError(`${major}.${minor}.${release}`, dir ? `${dir}/libucp.so.0` : 'libucp.so.0');
}

/**
 * Whether UCX releases a and b ([major, minor]) can connect: the same minor version, or minors of one
 * tested range (UCX promises no wire format across minor versions; within a range ucxx-ts tested it).
 */
export function sameWireRange(a: readonly [number, number, ...number[]], b: readonly [number, number, ...number[]]): boolean {
  if (a[0] === b[0] && a[1] === b[1]) return true;
  if (a[0] !== SUPPORTED_UCX.major || b[0] !== SUPPORTED_UCX.major) return false;
  return UCX_PROFILES.some((p) => a[1] >= p.minors[0] && a[1] <= p.minors[1] && b[1] >= p.minors[0] && b[1] <= p.minors[1]);
}

/** Throws UnsupportedUcxVersionError unless [major, minor, release] is supported (or the check is off). */
export function checkUcxVersion(version: readonly [number, number, number]): void {
  profileFor(version);
}

/**
 * The profile chosen at load, kept per process (a process maps one libucp): a second copy of these
 * modules in the same process (tests load src/internal beside the package) sees the same one.
 */
const LOADED = Symbol.for('ucxx-ts.loadedUcxProfile');
type Loaded = { profile: UcxProfile; version: [number, number, number] };
const registry = globalThis as { [LOADED]?: Loaded };

/** Called once by declareFunctions with the version of the libucp it loaded (and by the format tests). */
export function selectProfile(version: [number, number, number]): UcxProfile {
  const profile = profileFor(version);
  registry[LOADED] = { profile, version };
  return profile;
}

/** @internal The version of the libucp loaded (undefined before it is loaded). */
export function loadedVersion(): readonly [number, number, number] | undefined {
  return registry[LOADED]?.version;
}

/** @internal The profile chosen at load (undefined before libucp is loaded). */
export function loadedProfile(): UcxProfile | undefined {
  return registry[LOADED]?.profile;
}

/**
 * The loaded profile, for the parsers of UCX's formats (which import this module alone, so that they
 * load no library): throws when libucp is not loaded yet.
 */
export function requireLoadedProfile(): UcxProfile {
  const profile = loadedProfile();
  if (profile === undefined) throw new Error('ucxx-ts: UCX is not loaded yet, so the format of its addresses and keys is unknown');
  return profile;
}
