/**
 * Two "hosts" on one machine, for tests: two network namespaces joined by a veth pair, and each host has
 * its own UTS namespace (its hostname) and IPC namespace, so UCX sees two machines: no shared memory, no
 * CMA, TCP over the veth pair only.
 *
 *     host A: netns ucxxA<pid>, veth uxA<pid>, 10.77.X.1/24      host B: ucxxB<pid>, uxB<pid>, 10.77.X.2/24
 *
 * A host's UTS and IPC namespaces are held by one `sleep` process started as
 * `ip netns exec NS unshare --uts --ipc sh -c 'hostname H && exec sleep infinity'`; every process run in
 * the host is `ip netns exec NS nsenter -t HOLDER --uts --ipc -- PROGRAM`. So processes of one host
 * share its IPC namespace and are on the same host for UCX (shared memory between them), which a plain
 * `unshare --ipc` per process would not give: each process would be a host of its own.
 *
 * Names carry this process's pid, so concurrent runs do not collide; the namespaces (and with them the
 * veth pair and every address) are deleted by `close()`, and on process exit if a test forgot.
 * Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), `ip` (iproute2), `unshare` and `nsenter` (util-linux):
 * `twoHostsUnavailable()` says why not when they are missing, for `t.skip()`. Setting
 * UCXX_TS_REQUIRE_TWO_HOSTS=1 makes that a failure instead (for CI, which runs as root).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { Peer, type PeerLaunch } from './peer.js';
import { sleep } from './deadline.js';

export interface Host {
  readonly label: 'A' | 'B';
  /** Network namespace name. */
  readonly netns: string;
  /** The hostname processes in this host see. */
  readonly hostname: string;
  /** The veth device in this host and its IPv4 address. */
  readonly device: string;
  readonly address: string;
}


function readLink(file: string): string | undefined {
  try {
    return readlinkSync(file);
  } catch {
    return undefined;
  }
}

/** A command started in a host (not a peer script): its output is collected. */
export interface HostCommand {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** stdout and stderr so far. */
  output(): { stdout: string; stderr: string };
}

function run(argv: readonly string[]): void {
  execFileSync(argv[0] as string, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000 });
}

function commandExists(name: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

/** Why two hosts cannot be set up here, or null when they can (a namespace is created and deleted to know). */
export function twoHostsUnavailable(): string | null {
  if (process.platform !== 'linux') return `two-host tests need Linux network namespaces (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'two-host tests need root (ip netns, veth, unshare): run the suite as root';
  for (const tool of ['ip', 'unshare', 'nsenter']) {
    if (!commandExists(tool)) return `two-host tests need '${tool}' (apt-get install iproute2 util-linux, or bash scripts/ensure-deps.sh)`;
  }
  const probe = `ucxxprobe${process.pid}`;
  try {
    run(['ip', 'netns', 'add', probe]);
  } catch (err) {
    const stderr = String((err as { stderr?: Buffer }).stderr ?? err).trim();
    return `'ip netns add' is not permitted here (${stderr}): two-host tests need a kernel and container that allow network namespaces`;
  }
  try {
    run(['ip', 'netns', 'del', probe]);
  } catch {
    // gone with the process's namespaces at worst
  }
  return null;
}

/** For `t.skip()`: the reason, unless UCXX_TS_REQUIRE_TWO_HOSTS=1 asks for a failure. */
export function skipReasonOrThrow(): string | null {
  const reason = twoHostsUnavailable();
  if (reason !== null && process.env['UCXX_TS_REQUIRE_TWO_HOSTS'] === '1') {
    throw new Error(`UCXX_TS_REQUIRE_TWO_HOSTS=1 but ${reason}`);
  }
  return reason;
}

/** Deletes the namespaces of earlier runs whose process is gone (killed before it could clean up). */
function removeStaleNamespaces(): void {
  let list = '';
  try {
    list = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8', timeout: 5000 });
  } catch {
    return;
  }
  for (const match of list.matchAll(/^(ucxx[AB](\d+))\b/gm)) {
    const owner = Number(match[2]);
    let alive = true;
    try {
      process.kill(owner, 0);
    } catch (err) {
      alive = (err as NodeJS.ErrnoException).code === 'EPERM';
    }
    if (!alive) {
      try {
        run(['ip', 'netns', 'del', match[1] as string]);
      } catch {
        // deleted concurrently
      }
    }
  }
}

const live = new Set<TwoHosts>();
let exitHookInstalled = false;

export class TwoHosts {
  readonly a: Host;
  readonly b: Host;
  readonly #children = new Set<ChildProcess>();
  /** The process holding each host's UTS and IPC namespaces. */
  readonly #holders = new Map<Host, number>();
  #closed = false;

  private constructor(a: Host, b: Host) {
    this.a = a;
    this.b = b;
  }

  /** Creates both hosts and the veth pair. Throws (after undoing what it did) when that fails. */
  static async create(): Promise<TwoHosts> {
    removeStaleNamespaces();
    const pid = process.pid;
    const subnet = `10.77.${pid % 256}`;
    const host = (label: 'A' | 'B', last: number): Host => ({
      label,
      netns: `ucxx${label}${pid}`,
      hostname: `host${label.toLowerCase()}-${pid}`,
      device: `ux${label}${pid}`,
      address: `${subnet}.${last}`,
    });
    const hosts = new TwoHosts(host('A', 1), host('B', 2));
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.on('exit', () => {
        for (const h of live) h.close();
      });
      // Killed by a signal (the test runner's timeout, ^C): clean up, then die of the same signal.
      for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
        process.once(signal, () => {
          for (const h of live) h.close();
          process.kill(process.pid, signal);
        });
      }
    }
    live.add(hosts);
    try {
      const { a, b } = hosts;
      run(['ip', 'netns', 'add', a.netns]);
      run(['ip', 'netns', 'add', b.netns]);
      run(['ip', 'link', 'add', a.device, 'type', 'veth', 'peer', 'name', b.device]);
      for (const h of [a, b]) {
        run(['ip', 'link', 'set', h.device, 'netns', h.netns]);
        run(['ip', '-n', h.netns, 'addr', 'add', `${h.address}/24`, 'dev', h.device]);
        run(['ip', '-n', h.netns, 'link', 'set', 'lo', 'up']);
        run(['ip', '-n', h.netns, 'link', 'set', h.device, 'up']);
      }
      for (const h of [a, b]) await hosts.#startHolder(h);
    } catch (err) {
      hosts.close();
      const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
      throw new Error(`setting up two hosts failed${stderr ? `: ${stderr}` : ''}`, { cause: err });
    }
    return hosts;
  }

  /** Starts the process that holds `host`'s UTS and IPC namespaces, and waits until it does. */
  async #startHolder(host: Host): Promise<void> {
    const holder = spawn('ip', [
      'netns', 'exec', host.netns, 'unshare', '--uts', '--ipc',
      'sh', '-c', 'hostname "$0" && exec sleep infinity', host.hostname,
    ], { env: this.environment(), stdio: ['ignore', 'ignore', 'pipe'] });
    this.#track(holder);
    let stderr = '';
    holder.stderr?.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    const pid = holder.pid;
    if (pid === undefined) throw new Error(`cannot start the namespace holder of host ${host.label}`);
    this.#holders.set(host, pid);
    // ip, unshare and sh exec in turn (same pid): done once it is `sleep`, in namespaces of its own.
    const ours = readLink('/proc/self/ns/ipc');
    const deadline = Date.now() + 5000;
    for (;;) {
      let comm = '';
      try {
        comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      } catch {
        // not there yet, or exited (checked below)
      }
      const ipc = readLink(`/proc/${pid}/ns/ipc`);
      if (comm === 'sleep' && ipc !== undefined && ipc !== ours) return;
      if (holder.exitCode !== null || Date.now() > deadline) {
        throw new Error(`the namespace holder of host ${host.label} did not start (exit ${holder.exitCode}): ${stderr}`);
      }
      await sleep(10);
    }
  }

  /** The argv prefix that runs a program in `host`: its netns (and its /sys), its UTS and IPC namespaces. */
  wrapper(host: Host): string[] {
    const holder = this.#holders.get(host);
    if (holder === undefined) throw new Error(`host ${host.label} has no namespace holder`);
    return ['ip', 'netns', 'exec', host.netns, 'nsenter', '-t', String(holder), '--uts', '--ipc', '--'];
  }

  /**
   * The environment of every process started in a host: explicit, nothing inherited but PATH and
   * the UCX library location; tests add what they mean to set.
   */
  environment(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { PATH: process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C' };
    for (const name of ['UCXX_TS_UCX_LIBDIR', 'LD_LIBRARY_PATH']) {
      const value = process.env[name];
      if (value !== undefined) env[name] = value;
    }
    return { ...env, ...extra };
  }

  /** Starts a test peer script (build/test/peers) in `host`, with the IPC channel as its control channel. */
  startPeer(host: Host, script: string, config: unknown = {}, env: NodeJS.ProcessEnv = {}): Peer {
    this.#live();
    const launch: PeerLaunch = { wrapper: this.wrapper(host), env: this.environment() };
    const peer = Peer.launch(launch, script, config, env);
    this.#track(peer.child);
    return peer;
  }

  /** Runs `argv` (e.g. node and a CLI) in `host` and collects its output. */
  spawn(host: Host, argv: readonly string[], env: NodeJS.ProcessEnv = {}): HostCommand {
    this.#live();
    const child = spawn(this.wrapper(host)[0] as string, [...this.wrapper(host).slice(1), ...argv], {
      env: this.environment(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#track(child);
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    child.stderr?.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      child.on('exit', (code, signal) => resolve({ code, signal }));
    });
    return { child, exited, output: () => ({ stdout, stderr }) };
  }

  /**
   * Cuts (`up = false`) or restores `host`'s side of the veth pair: `ip -n NS link set DEV down|up`.
   * The other end loses its carrier too; nothing is sent or answered on the link until it is back.
   */
  setLink(host: Host, up: boolean): void {
    this.#live();
    run(['ip', '-n', host.netns, 'link', 'set', host.device, up ? 'up' : 'down']);
  }

  /**
   * Joins the hosts by a second veth pair ("a second NIC" in each host: uy{A,B}<pid>, 10.77.X.{3,4}/24,
   * the first pair's subnet: with a subnet of its own, UCX 1.13 failed even between two stock C programs),
   * for what depends on how many devices a host has. `remove()` takes it away again; `close()` does too.
   */
  addSecondLink(): { readonly a: Host; readonly b: Host; remove(): void } {
    this.#live();
    const pid = process.pid;
    const end = (h: Host, last: number): Host => ({
      ...h, device: `uy${h.label}${pid}`, address: `10.77.${pid % 256}.${last + 2}`,
    });
    const a = end(this.a, 1);
    const b = end(this.b, 2);
    run(['ip', 'link', 'add', a.device, 'type', 'veth', 'peer', 'name', b.device]);
    try {
      for (const h of [a, b]) {
        run(['ip', 'link', 'set', h.device, 'netns', h.netns]);
        run(['ip', '-n', h.netns, 'addr', 'add', `${h.address}/24`, 'dev', h.device]);
        run(['ip', '-n', h.netns, 'link', 'set', h.device, 'up']);
      }
    } catch (err) {
      this.#removeLink(a);
      throw err;
    }
    return { a, b, remove: () => this.#removeLink(a) };
  }

  #removeLink(a: Host): void {
    for (const argv of [['ip', '-n', a.netns, 'link', 'del', a.device], ['ip', 'link', 'del', a.device]]) {
      try {
        run(argv);
        return;
      } catch {
        // not in that namespace (or gone with it)
      }
    }
  }

  /** Kills what is still running in the hosts and deletes both namespaces (the veth pair goes with them). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    live.delete(this);
    for (const child of this.#children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    for (const h of [this.a, this.b]) {
      try {
        run(['ip', 'netns', 'del', h.netns]);
      } catch {
        // never created, or already gone
      }
    }
    // A veth end that never moved into a namespace stays in this one.
    try {
      run(['ip', 'link', 'del', this.a.device]);
    } catch {
      // moved (and deleted with its namespace) or never created
    }
  }

  #track(child: ChildProcess): void {
    this.#children.add(child);
    child.on('exit', () => this.#children.delete(child));
  }

  #live(): void {
    if (this.#closed) throw new Error('the two hosts were closed');
  }
}
