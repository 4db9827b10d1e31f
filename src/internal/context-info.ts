/** Parsing of `ucp_context_print_info` output: the memory domains and transport resources UCX opened. */

/** A transport resource of a context: one transport on one device. */
export interface TransportResource {
  /** The transport (`tcp`, `sysv`, `posix`, `cma`, `self`, `rc_mlx5`, ...). */
  readonly transport: string;
  /** The device (`eth0`, `lo`, `memory`, `mlx5_0:1`, ...). */
  readonly device: string;
  /** The memory domain's index in this context. */
  readonly md: number;
  /** The memory domain's component (`tcp`, `sysv`, `posix`, `cma`, `ib`, ...). */
  readonly component: string;
}

/** md index -> component name, from the `md N : component C name` lines. */
export function parseMdComponents(info: string): Map<number, string> {
  const components = new Map<number, string>();
  for (const match of info.matchAll(/^#\s+md (\d+)\s*:\s*component \d+\s+(\S+)/gm)) {
    components.set(Number(match[1]), match[2] as string);
  }
  return components;
}

/** Every `resource N : md M dev D flags F tl/dev` line, with its md's component. */
export function parseContextResources(info: string): TransportResource[] {
  const components = parseMdComponents(info);
  const resources: TransportResource[] = [];
  for (const match of info.matchAll(/^#\s+resource \d+\s*:\s*md (\d+)\s+dev \d+\s+flags \S+\s+([^/\s]+)\/(\S+)/gm)) {
    const md = Number(match[1]);
    resources.push({ transport: match[2] as string, device: match[3] as string, md, component: components.get(md) ?? '' });
  }
  return resources;
}
