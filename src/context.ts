/** The UCP context (`ucp_context_h`): its options, features and the teardown of what it made. */
import {
  kLiveHandle, kMdComponents, kMemoryHandleClosed, kPackedRkey, kPackedRkeyReference, kTeardownAtExit, kUnmap,
  kWorkerClosed,
} from './internal/symbols.js';
import { debug } from './internal/debug-log.js';
import {
  CONSTANTS, OutCell, StructBuffer, UCP_API_MAJOR, UCP_API_MINOR, UCS_ERR_INVALID_PARAM, UCS_ERR_NO_ELEM, addressOf, captureStream, ucxProfile,
  layouts, ucx,
} from './ffi/index.js';
import { ClosedError, ConfigError, check } from './errors/index.js';
import { Worker, type WorkerOptions } from './worker.js';
import { MemoryHandle, type MemoryHandleOptions } from './memory-handle.js';
import { parsePackedRkey } from './internal/packed-rkey.js';
import { parseContextResources, parseMdComponents, type TransportResource } from './internal/context-info.js';
import { describe, optionsObject, type BufferSource } from './internal/bytes.js';
import { ArgumentOutOfRangeError, InvalidArgumentError, INTERNAL } from './errors/misuse.js';

export type { TransportResource } from './internal/context-info.js';

/** UCP features a context can enable. */
export type Feature = 'tag' | 'stream' | 'am' | 'rma' | 'amo32' | 'amo64' | 'wakeup';

const K = CONSTANTS;
const FEATURE_BITS: Record<Feature, bigint> = {
  tag: K.UCP_FEATURE_TAG,
  stream: K.UCP_FEATURE_STREAM,
  am: K.UCP_FEATURE_AM,
  rma: K.UCP_FEATURE_RMA,
  amo32: K.UCP_FEATURE_AMO32,
  amo64: K.UCP_FEATURE_AMO64,
  wakeup: K.UCP_FEATURE_WAKEUP,
};

/**
 * Everything: tag, stream, active messages, RMA, 32/64-bit atomics and wakeup (event-driven progress).
 *
 * @example
 * ```ts
 * const context = new Context({ features: DEFAULT_FEATURES.filter((f) => f !== 'amo32' && f !== 'amo64') });
 * console.log(context.features); // ['tag', 'stream', 'am', 'rma', 'wakeup']
 * ```
 */
export const DEFAULT_FEATURES: readonly Feature[] = ['tag', 'stream', 'am', 'rma', 'amo32', 'amo64', 'wakeup'];

/**
 * Options of `new Context()`.
 *
 * @example
 * ```ts
 * const context = new Context({
 *   features: ['tag', 'rma', 'wakeup'],
 *   config: { TLS: 'tcp' },
 *   name: 'server',
 *   failureTimeout: 2000,
 * });
 * ```
 */
export interface ContextOptions {
  /** The UCP features to enable. Default: DEFAULT_FEATURES. */
  features?: readonly Feature[];
  /**
   * UCX options without the `UCX_` prefix (e.g. `{ TLS: 'tcp' }`), applied over the `UCX_*` environment
   * with `ucp_config_modify`. An option UCX does not know is a ConfigError.
   */
  config?: Readonly<Record<string, string | number | boolean>>;
  /** A name for UCX logs. */
  name?: string;
  /**
   * How long, in ms, a failed peer (killed, stopped, or cut off by the network) may go unnoticed before
   * its endpoints fail: their pending operations reject (EndpointTimeoutError or the error UCX
   * reported) and the endpoint emits 'error' then 'close'. Default 10_000; `Infinity` turns ucxx-ts's
   * own watchdog off and leaves UCX's timers at their defaults (minutes on a cut link). It sets the TCP
   * keepalive timers of this context's UCX sockets (docs/reliability.md says which and why), and
   * ucxx-ts's per-endpoint watchdog, for what those timers cannot see.
   */
  failureTimeout?: number;
  /**
   * Let a listener bind a port that a closed listener's connections still hold (UCX's CM
   * `REUSEADDR`, SO_REUSEADDR on the listening socket only), so a restarted server gets its port back
   * at once. Default true. Linux allows it only when the server that made those connections set it
   * too: after a ucxx C++ or Python server (or a UCX program with UCX's defaults) that closed its
   * connections first, the port stays held in TIME_WAIT for up to 60 s and listen() throws BusyError.
   */
  reuseAddress?: boolean;
}

/**
 * The default of `ContextOptions.failureTimeout`, in ms.
 *
 * @example
 * ```ts
 * // notice a dead peer within 2 s instead of DEFAULT_FAILURE_TIMEOUT (10 s)
 * const context = new Context({ failureTimeout: DEFAULT_FAILURE_TIMEOUT / 5 });
 * ```
 */
export const DEFAULT_FAILURE_TIMEOUT = 10_000;

/**
 * The UCX settings that `failureTimeout` (ms) drives. Names without their table prefix; the TCP ones
 * are handed to ucp_config_modify as the loaded version spells them (UcxProfile.tcpOptionName: bare on
 * 1.13, `TCP_KEEPIDLE` from 1.14 on). None of them changes lane selection or anything on the wire: timers only.
 * - KEEPIDLE/KEEPINTVL/KEEPCNT: the kernel's keepalive on UCX's TCP sockets (whole seconds, at least 1).
 * UCP's own keepalive round (KEEPALIVE_INTERVAL) stays at UCX's default, as in ucxx: it puts a message
 * on the wire, and a short round made replies from a peer that force-closes right after sending them
 * (ucxx's close in PEER mode) get lost (docs/reliability.md).
 */
export function failureTimeoutSettings(timeoutMs: number): Record<string, string> {
  const seconds = Math.max(2, Math.floor(timeoutMs / 1000));
  const idle = Math.max(1, Math.floor(seconds / 2));
  const count = Math.max(1, seconds - idle);
  return {
    KEEPIDLE: `${idle}s`,
    KEEPINTVL: '1s',
    KEEPCNT: String(count),
  };
}

/**
 * A UCP context: the UCX library instance, its features and configuration; the factory of workers and
 * memory handles. Closing it closes everything it made, in UCX's order.
 *
 * @example
 * ```ts
 * await using context = new Context({ config: { TLS: 'tcp,sm,self' } });
 * const worker = context.createWorker();
 * const region = context.createMemoryHandle(1 << 20);
 * ```
 */
export class Context {
  #handle: bigint | null;
  #config: bigint | null;
  readonly #features: readonly Feature[];
  readonly #workers = new Set<Worker>();
  readonly #memoryHandles = new Set<MemoryHandle>();
  /** Mappings kept alive by views after their handle closed. */
  #pendingUnmaps = 0;
  #closing: Promise<void> | undefined;
  #rkeyReference: Map<number, number> | undefined;
  #mdComponents: Map<number, string> | undefined;
  /** Transport-level options given in `config` (ucp_config_print shows only UCP's own). */
  readonly #transportConfig: Record<string, string> = {};
  /** See ContextOptions.failureTimeout (ms; Infinity when off). */
  readonly #failureTimeout: number;
  /** What failureTimeout and reuseAddress set, under the names `ucx_info -c` shows. */
  readonly #derivedConfig: Record<string, string> = {};

  /**
   * Creates a context. Throws UcxLibraryNotFoundError when libucp is not installed, ConfigError for an
   * option UCX refuses, UcxError when UCX cannot start.
   */
  constructor(options: ContextOptions = {}) {
    options = optionsObject(options, 'Context options');
    const features = options.features ?? DEFAULT_FEATURES;
    if (!Array.isArray(features) || features.length === 0) {
      throw new InvalidArgumentError(`features must be a non-empty array of ${Object.keys(FEATURE_BITS).join(', ')}`);
    }
    let bits = 0n;
    for (const feature of features) {
      const b = typeof feature === 'string' && Object.hasOwn(FEATURE_BITS, feature) ? FEATURE_BITS[feature as Feature] : undefined;
      if (b === undefined) throw new InvalidArgumentError(`unknown feature ${typeof feature === 'string' ? JSON.stringify(feature) : describe(feature)}`);
      bits |= b;
    }
    if (options.config !== undefined) optionsObject(options.config, 'Context config');
    if (options.name !== undefined && typeof options.name !== 'string') {
      throw new InvalidArgumentError(`the context name must be a string, got ${typeof options.name}`);
    }
    this.#features = Object.freeze([...features]);
    const failureTimeout = options.failureTimeout ?? DEFAULT_FAILURE_TIMEOUT;
    if (typeof failureTimeout !== 'number' || !(failureTimeout >= 100)) {
      throw new ArgumentOutOfRangeError(`failureTimeout must be a number of ms >= 100 (or Infinity), got ${String(failureTimeout)}`);
    }
    this.#failureTimeout = failureTimeout;
    const reuseAddress = options.reuseAddress ?? true;
    if (typeof reuseAddress !== 'boolean') throw new InvalidArgumentError('reuseAddress must be a boolean');
    const api = ucx();
    const configOut = new OutCell();
    check(api.ucp_config_read(null, null, configOut.reset()), 'ucp_config_read');
    const config = configOut.ptr() as bigint;
    const requested = new Map<string, string>();
    try {
      for (const [rawName, rawValue] of Object.entries(options.config ?? {})) {
        const name = rawName.startsWith('UCX_') ? rawName.slice(4) : rawName;
        if (typeof rawValue !== 'string' && typeof rawValue !== 'number' && typeof rawValue !== 'boolean') {
          throw new InvalidArgumentError(`UCX option ${rawName} must be a string, number or boolean, got ${typeof rawValue}`);
        }
        const value = typeof rawValue === 'boolean' ? (rawValue ? 'y' : 'n') : String(rawValue);
        const status = api.ucp_config_modify(config, name, value);
        // From UCX 1.14 on, ucp_config_modify refuses a name no table has with INVALID_PARAM, which also
        // means a bad value; an unknown name is NO_ELEM on every version, as the check after ucp_init
        // says it on 1.13.
        if (status !== 0) {
          const unknown = status === UCS_ERR_INVALID_PARAM && !isKnownOption(printedOptions(), name);
          throw new ConfigError(unknown ? UCS_ERR_NO_ELEM : status, name, value);
        }
        requested.set(name, value);
      }
      // Our own defaults: never over what the user set, here or in the environment (UCX_*), under
      // either spelling. Not checked against the option list: these spellings are known to match.
      const derived: Record<string, string> = Number.isFinite(failureTimeout) ? failureTimeoutSettings(failureTimeout) : {};
      // A name no table uses draws UCX's "invalid configuration" warning: leave the TCP ones out when
      // the transports chosen leave TCP out.
      if (!usesTcp(requested.get('TLS') ?? process.env['UCX_TLS'])) {
        for (const name of ['KEEPIDLE', 'KEEPINTVL', 'KEEPCNT', 'CM_REUSEADDR']) delete derived[name];
      }
      if (reuseAddress) derived['CM_REUSEADDR'] = 'y';
      const { tcpOptionName, contextDefaults } = ucxProfile();
      Object.assign(derived, contextDefaults);
      for (const [name, value] of Object.entries(derived)) {
        const spellings = name in contextDefaults ? [name] : name === 'CM_REUSEADDR'
          ? [name, 'TCP_CM_REUSEADDR', 'RDMA_CM_REUSEADDR'] : [name, `TCP_${name}`];
        if (spellings.some((n) => requested.has(n) || process.env[`UCX_${n}`] !== undefined)) continue;
        const plain = name in contextDefaults;
        const modified = plain ? name : tcpOptionName(name);
        const status = api.ucp_config_modify(config, modified, value);
        if (status !== 0) throw new ConfigError(status, modified, value);
        this.#derivedConfig[plain ? name : spellings[1] as string] = value;
      }
      const params = new StructBuffer(layouts.ucp_params_t);
      let mask = K.UCP_PARAM_FIELD_FEATURES;
      params.setU64('features', bits);
      let name: Buffer | undefined;
      if (options.name !== undefined) {
        name = Buffer.from(`${options.name}\0`);
        mask |= K.UCP_PARAM_FIELD_NAME;
        params.setPtr('name', addressOf(name));
      }
      params.setU64('field_mask', mask);
      const contextOut = new OutCell();
      check(
        api.ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, params.buffer, config, contextOut.reset()),
        'ucp_init',
      );
      this.#handle = contextOut.ptr();
      this.#config = config;
      trackForExit(this);
      debug('context created (features %s; failureTimeout %d ms)', features.join(', '), failureTimeout);
      // ucp_config_modify keeps names it does not know for the transports, which silently ignore the
      // unknown ones: check every name against all the tables UCX registered (loaded with the context).
      const known = knownOptions();
      const ucpOptions = parseConfigLines(captureStream((stream) =>
        api.ucp_config_print(config, stream, null, Number(K.UCS_CONFIG_PRINT_CONFIG))));
      for (const [name, value] of requested) {
        if (!isKnownOption(known, name)) {
          api.ucp_cleanup(this.#handle);
          this.#handle = null;
          liveContexts.delete(this); // a context that failed to construct was never the caller's
          throw new ConfigError(UCS_ERR_NO_ELEM, name, value);
        }
        if (!(name in ucpOptions)) this.#transportConfig[name] = value;
      }
    } catch (err) {
      api.ucp_config_release(config);
      throw err;
    }
  }

  /** The features this context was created with. */
  get features(): readonly Feature[] {
    return this.#features;
  }

  /** The bound on failure detection, in ms (Infinity when off): see ContextOptions.failureTimeout. */
  get failureTimeout(): number {
    return this.#failureTimeout;
  }

  /** True once `close()` was called. */
  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /**
   * The `ucp_context_h` handle.
   *
   * @example
   * ```ts
   * const handle = context.getHandle(); // a ucp_context_h, for code that calls libucp itself
   * ```
   */
  getHandle(): bigint {
    return this[kLiveHandle]();
  }

  /**
   * The effective UCX configuration (environment and `config` applied), as option name (without the
   * `UCX_` prefix) to value.
   *
   * @example
   * ```ts
   * const context = new Context({ config: { TLS: 'tcp' } });
   * console.log(context.getConfig()['TLS']); // 'tcp'
   * ```
   */
  getConfig(): Record<string, string> {
    this[kLiveHandle]();
    const text = captureStream((stream) =>
      ucx().ucp_config_print(this.#config, stream, null, Number(K.UCS_CONFIG_PRINT_CONFIG)));
    return { ...parseConfigLines(text), ...this.#derivedConfig, ...this.#transportConfig };
  }

  /**
   * UCX's own description of this context (`ucp_context_print_info`: its memory domains and transport
   * resources), as ucxx's `Context::getInfo`.
   *
   * @example
   * ```ts
   * console.log(context.getInfo()); // '#\n# UCP context\n# ...'
   * ```
   */
  getInfo(): string {
    const handle = this[kLiveHandle]();
    return captureStream((stream) => ucx().ucp_context_print_info(handle, stream));
  }

  /**
   * The transport resources UCX opened for this context (after `UCX_TLS`, `UCX_NET_DEVICES` and the
   * features), as `ucx_info -d` lists them for a C program.
   *
   * @example
   * ```ts
   * for (const { transport, device } of context.getResources()) console.log(`${transport}/${device}`);
   * ```
   */
  getResources(): TransportResource[] {
    const handle = this[kLiveHandle]();
    return parseContextResources(captureStream((stream) => ucx().ucp_context_print_info(handle, stream)));
  }

  /**
   * Creates a worker. Default progress mode 'event' (no CPU when idle); 'polling' for the lowest
   * latency; 'manual' to call `worker.progress()` yourself.
   *
   * @example
   * ```ts
   * const worker = context.createWorker();                                // 'event': no CPU when idle
   * const fast = context.createWorker({ progressMode: 'polling', busyPollUs: 200 });
   * const manual = context.createWorker({ progressMode: 'manual' });     // call manual.progress() yourself
   * ```
   */
  createWorker(options: WorkerOptions = {}): Worker {
    options = optionsObject(options, 'createWorker options');
    const handle = this[kLiveHandle]();
    const worker = new Worker(INTERNAL, this, handle, options, this.#features.includes('wakeup'));
    this.#workers.add(worker);
    return worker;
  }

  /**
   * Maps `size` bytes for remote access: UCX-allocated when `buffer` is omitted, else the first `size`
   * bytes of `buffer` (which the handle keeps alive).
   *
   * @example
   * ```ts
   * const allocated = context.createMemoryHandle(64 << 20);
   * const registered = context.createMemoryHandle(4096, new Uint8Array(4096), { access: 'read' });
   * ```
   */
  createMemoryHandle(size: number, buffer?: BufferSource | null, options: MemoryHandleOptions = {}): MemoryHandle {
    const handle = this[kLiveHandle]();
    const memoryHandle = new MemoryHandle(INTERNAL, this, handle, size, buffer, options);
    this.#memoryHandles.add(memoryHandle);
    return memoryHandle;
  }

  /**
   * Closes the context and everything it owns, in UCX's order: workers (their requests, remote keys,
   * endpoints and listeners), memory handles, then the context itself. Idempotent.
   *
   * @example
   * ```ts
   * const context = new Context();
   * try {
   *   const worker = context.createWorker();
   *   // ... connect, send, receive
   * } finally {
   *   await context.close(); // workers (their endpoints, listeners, requests), memory handles, then UCX
   * }
   * ```
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  /** The same as `close()`, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #close(): Promise<void> {
    await Promise.all([...this.#workers].map((worker) => worker.close()));
    for (const handle of [...this.#memoryHandles]) handle.close();
    this.#cleanupIfDone();
  }

  /**
   * @internal At process exit: stop everything that could call into JavaScript from UCX's threads
   * (listeners, workers) synchronously. Memory stays mapped: later exit handlers may still read views.
   */
  [kTeardownAtExit](): void {
    for (const worker of [...this.#workers]) worker[kTeardownAtExit]();
  }

  #cleanupIfDone(): void {
    if (this.#closing === undefined || this.#pendingUnmaps > 0 || this.#handle === null) return;
    if (this.#workers.size > 0 || this.#memoryHandles.size > 0) return;
    const handle = this.#handle;
    this.#handle = null;
    ucx().ucp_cleanup(handle);
    debug('context closed');
    if (this.#config !== null) ucx().ucp_config_release(this.#config);
    this.#config = null;
    liveContexts.delete(this);
  }

  /** @internal */
  [kLiveHandle](): bigint {
    if (this.#handle === null || this.#closing !== undefined) throw new ClosedError('the Context');
    return this.#handle;
  }

  /** @internal */
  [kWorkerClosed](worker: Worker): void {
    this.#workers.delete(worker);
  }

  /** @internal A handle closed: its mapping is released now or once its views are collected. */
  [kMemoryHandleClosed](handle: MemoryHandle): void {
    this.#memoryHandles.delete(handle);
    this.#pendingUnmaps++;
  }

  /** @internal */
  [kUnmap](memh: bigint): void {
    this.#pendingUnmaps--;
    if (this.#handle !== null) ucx().ucp_mem_unmap(this.#handle, memh);
    this.#cleanupIfDone();
  }

  /** @internal This context's md index -> transport component name (from ucp_context_print_info). */
  [kMdComponents](): Map<number, string> {
    if (this.#mdComponents === undefined) {
      const handle = this[kLiveHandle]();
      this.#mdComponents = parseMdComponents(captureStream((stream) => ucx().ucp_context_print_info(handle, stream)));
    }
    return this.#mdComponents;
  }

  /**
   * @internal The size of the packed key record of each memory domain, as this context packs them, for
   * validating keys from peers before `ucp_ep_rkey_unpack` reads them.
   */
  [kPackedRkeyReference](): Map<number, number> {
    if (this.#rkeyReference === undefined) {
      const reference = new Map<number, number>();
      const probes = [this.createMemoryHandle(4096), this.createMemoryHandle(4096, new Uint8Array(4096))];
      try {
        for (const probe of probes) {
          for (const md of parsePackedRkey(probe[kPackedRkey]()).mds) reference.set(md.index, md.size);
        }
      } finally {
        for (const probe of probes) probe.close();
      }
      this.#rkeyReference = reference;
    }
    return this.#rkeyReference;
  }
}

/** Whether a UCX_TLS value lets UCX use TCP (its transport or its connection manager). */
function usesTcp(tls: string | undefined): boolean {
  if (tls === undefined || tls.trim() === '') return true;
  const names = tls.split(',').map((n) => n.trim().toLowerCase());
  if (names[0]?.startsWith('^') === true) return !names.some((n) => n.replace(/^\^/, '') === 'tcp');
  return names.some((n) => n === 'all' || n === 'tcp');
}

function parseConfigLines(text: string): Record<string, string> {
  const result: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const match = /^UCX_([A-Za-z0-9_]+)=(.*)$/.exec(line);
    if (match?.[1] !== undefined) result[match[1]] = match[2] ?? '';
  }
  return result;
}

let knownOptionNames: Set<string> | undefined;

/**
 * True for a listed name, or for a name with a parent-table prefix that UCX resolves through a
 * sub-table (UCX_MM_ERROR_HANDLING reaches UCX_SYSV_/UCX_POSIX_ERROR_HANDLING).
 */
function isKnownOption(known: Set<string>, name: string): boolean {
  if (known.has(name)) return true;
  const cut = name.indexOf('_');
  if (cut <= 0) return false;
  const suffix = name.slice(cut);
  for (const option of known) if (option.endsWith(suffix) && option.indexOf('_') === option.length - suffix.length) return true;
  return false;
}

/** Every option name of every configuration table UCX has registered (as `ucx_info -c` lists them). */
function knownOptions(): Set<string> {
  knownOptionNames ??= printedOptions();
  return knownOptionNames;
}

/** The options of every table UCX has registered so far (not cached: more register at ucp_init). */
function printedOptions(): Set<string> {
  const api = ucx();
  const text = captureStream((stream) => api.ucs_config_parser_print_all_opts(
    stream, 'UCX_', Number(K.UCS_CONFIG_PRINT_CONFIG | K.UCS_CONFIG_PRINT_HIDDEN), api.ucs_config_global_list));
  return new Set(Object.keys(parseConfigLines(text)));
}

/**
 * Contexts not yet cleaned up. A process that exits with UCX objects still open (forgotten, or
 * process.exit() called) must not let UCX's async thread call a JavaScript callback while Node tears the
 * isolate down: that crashed the process at exit. The 'exit' hook stops listeners and workers first.
 */
const liveContexts = new Set<Context>();
let exitHookInstalled = false;

/** @internal For getDiagnostics(): contexts of this thread not yet cleaned up. */
export function liveContextCount(): number {
  return liveContexts.size;
}

function trackForExit(context: Context): void {
  liveContexts.add(context);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const live of liveContexts) live[kTeardownAtExit]();
  });
}
