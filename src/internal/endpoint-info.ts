/**
 * Parser of `ucp_ep_print_info` output: the lanes of an endpoint (which transport on which device, to
 * which remote memory domain, used for what).
 *
 * Format (UCX 1.13.1, src/ucp/core/ucp_ep.c: ucp_ep_config_lane_info_str, ucp_ep_config_cm_lane_info_str,
 * ucp_ep_config_print), one line per lane, each prefixed with `#` and spaces:
 *
 *     lane[1]:  3:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255] amo#0 am am_bw#0 keepalive
 *     lane[3]:  2:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] rma_bw#0 wireup
 *     lane[0]: cm rdmacm
 *
 * that is `lane[N]: RSC:TL/DEV.PATH md[LOCAL_MD] -> [addr[I].]md[REMOTE_MD]/REMOTE_COMPONENT/sysdev[S]`
 * followed by the lane's roles: `rma_bw#P`, `amo#P`, `am`, `rkey_ptr`, `am_bw#P`, `tag_offload`,
 * `keepalive`, `wireup` (optionally `wireup{TL/DEV}` while a wireup stub is in place). Lanes used for
 * plain RMA are listed below as `put[N]: ...` / `get[N]: ...` protocol lines. Device names may contain
 * dots (VLAN devices) and colons (`mlx5_0:1`): the path index is the number after the last dot.
 *
 * Pure: no FFI, so it can be tested against captured outputs.
 */

/**
 * What a lane is used for, with UCX's own names:
 * - `am`: active messages, and so the eager part of tag, stream and AM sends, and wireup messages;
 * - `am_bw`: bulk active messages (large eager and AM-based rendezvous fragments);
 * - `rma`: put/get (and the RMA-emulation of this endpoint's remote keys);
 * - `rma_bw`: bulk RMA, which the rendezvous protocol uses to move large tag/AM messages zero-copy;
 * - `amo`: atomic operations;
 * - `rkey_ptr`: reaches remote memory through a local pointer (shared memory);
 * - `tag_offload`: hardware tag matching;
 * - `keepalive`: peer failure detection;
 * - `wireup`: connection establishment messages;
 * - `cm`: the connection manager lane of a client-server endpoint (no data).
 */
export type LaneUsage =
  | 'am' | 'am_bw' | 'rma' | 'rma_bw' | 'amo' | 'rkey_ptr' | 'tag_offload' | 'keepalive' | 'wireup' | 'cm';

/** One lane of an endpoint. */
export interface EndpointTransport {
  /** Lane index in the endpoint's configuration. */
  readonly lane: number;
  /** UCT transport name: 'tcp', 'sysv', 'posix', 'cma', 'self', 'rc_mlx5', ...; for a `cm` lane, the CM's name. */
  readonly transport: string;
  /** Device: 'eth0', 'lo', 'memory' (shared memory), 'mlx5_0:1', ...; '' for a `cm` lane. */
  readonly device: string;
  /** The local memory domain index (`md[N]` in `ucx_info -d` order), null for a `cm` lane. */
  readonly memoryDomain: number | null;
  /** The peer's memory domain index this lane reaches, null for a `cm` lane. */
  readonly remoteMemoryDomain: number | null;
  /** The component that unpacks the peer's keys of that domain ('tcp', 'sysv', ...), null for a `cm` lane. */
  readonly remoteComponent: string | null;
  /** What the lane carries (see LaneUsage). */
  readonly usage: readonly LaneUsage[];
  /** Local resource index, path index, remote system device (255 = unknown): UCX's numbers, verbatim. */
  readonly resourceIndex: number | null;
  /** The network path index UCX chose for the lane (null where it prints none). */
  readonly pathIndex: number | null;
  /** The remote system-device index UCX reports for the lane (null where it prints none). */
  readonly remoteSystemDevice: number | null;
}

export interface ParsedEndpointInfo {
  readonly lanes: readonly EndpointTransport[];
  /** Local memory domains whose keys this endpoint sends for rendezvous (`rma_bw: mds [...]`), when printed. */
  readonly rmaBwMemoryDomains: readonly number[];
}

const LANE_RE =
  /^#\s*lane\[(\d+)\]:\s*(\d+):([^/\s]+)\/(\S+)\.(\d+)\s+md\[(\d+)\]\s*->\s*(?:addr\[\d+\]\.)?md\[(\d+)\]\/([^/\s]+)\/sysdev\[(\d+)\](.*)$/;
const CM_LANE_RE = /^#\s*lane\[(\d+)\]:\s*cm\s+(\S+)\s*$/;
const RMA_RE = /^#\s*(?:put|get)\[(\d+)\]:/;
const RMA_BW_MDS_RE = /^#\s*rma_bw:\s*mds((?:\s*\[\d+\])*)/;

function flagUsage(flag: string): LaneUsage | undefined {
  const name = flag.replace(/#\d+$/, '').replace(/\{.*\}$/, '');
  switch (name) {
    case 'am': case 'am_bw': case 'rma_bw': case 'amo': case 'rkey_ptr': case 'tag_offload': case 'keepalive':
    case 'wireup':
      return name;
    default:
      return undefined;
  }
}

/**
 * Parses `ucp_ep_print_info` output. Lines that are not lanes (peer name, protocol thresholds) are read
 * only for RMA lanes; an unknown role word is ignored, so later UCX releases that add roles still parse.
 * Throws when a line that starts like a lane does not parse, so that a format change is noticed.
 */
export function parseEndpointInfo(text: string): ParsedEndpointInfo {
  const lanes = new Map<number, { lane: EndpointTransport; usage: LaneUsage[] }>();
  const rmaLanes = new Set<number>();
  let rmaBwMemoryDomains: number[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    let m = LANE_RE.exec(line);
    if (m !== null) {
      const usage: LaneUsage[] = [];
      for (const flag of (m[10] ?? '').trim().split(/\s+/)) {
        const u = flag === '' ? undefined : flagUsage(flag);
        if (u !== undefined && !usage.includes(u)) usage.push(u);
      }
      const lane: EndpointTransport = {
        lane: Number(m[1]),
        transport: m[3] as string,
        device: m[4] as string,
        memoryDomain: Number(m[6]),
        remoteMemoryDomain: Number(m[7]),
        remoteComponent: m[8] as string,
        usage,
        resourceIndex: Number(m[2]),
        pathIndex: Number(m[5]),
        remoteSystemDevice: Number(m[9]),
      };
      lanes.set(lane.lane, { lane, usage });
      continue;
    }
    m = CM_LANE_RE.exec(line);
    if (m !== null) {
      const usage: LaneUsage[] = ['cm'];
      lanes.set(Number(m[1]), {
        lane: {
          lane: Number(m[1]), transport: m[2] as string, device: '', memoryDomain: null, remoteMemoryDomain: null,
          remoteComponent: null, usage, resourceIndex: null, pathIndex: null, remoteSystemDevice: null,
        },
        usage,
      });
      continue;
    }
    if (/^#\s*lane\[/.test(line)) throw new Error(`ucp_ep_print_info: cannot parse the lane line '${line}'`);
    m = RMA_RE.exec(line);
    if (m !== null) {
      rmaLanes.add(Number(m[1]));
      continue;
    }
    m = RMA_BW_MDS_RE.exec(line);
    if (m !== null) rmaBwMemoryDomains = [...(m[1] ?? '').matchAll(/\[(\d+)\]/g)].map((x) => Number(x[1]));
  }
  for (const index of rmaLanes) {
    const entry = lanes.get(index);
    if (entry !== undefined && !entry.usage.includes('rma')) entry.usage.unshift('rma');
  }
  return {
    lanes: [...lanes.values()].map((e) => e.lane).sort((a, b) => a.lane - b.lane),
    rmaBwMemoryDomains,
  };
}
