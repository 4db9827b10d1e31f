/** What a ucxx-perf run is asked to do, and what it reports: shared by the CLI, its two sides and the bench. */

/** How both sides progress: a synchronous busy-poll ('spin'), or the library's 'polling' or 'event' mode. */
export type Mode = 'spin' | 'polling' | 'event';

/** Which figure a test is judged by: per-operation latency, bandwidth, or operations per second. */
export type Kind = 'latency' | 'bandwidth' | 'rate';

export interface Plan {
  test: string;
  sizes: number[];
  iterations: number;
  warmup: number;
  outstanding: number;
  /** put_bw/atomic_rate: a flush after every this many operations (0: only at the end, as ucx_perftest). */
  flushEvery: number;
  memory: 'allocated' | 'registered';
  progress: Mode;
  /** Peer failure detection on the measured endpoints (ucx_perftest's -e). */
  errorHandling: boolean;
  /**
   * The measured endpoint is a PEER-mode connection through a listener of the server's measurement
   * worker, with the fast lane (what two ucxx-ts processes on one host get by default on UCX 1.19+).
   */
  fastLane: boolean;
  /** 'event'/'polling': the worker's busyPollUs (undefined: its default). */
  busyPollUs?: number;
  /**
   * How the loops wait: 'tuned' awaits only what is still pending, through the request's native
   * Promise ('spin': progressUntil); 'await' awaits every request itself, as the README writes it.
   */
  style: 'tuned' | 'await';
}

/** One size's figures, as `--json` prints them. */
export interface Result {
  tool: 'ucxx-perf';
  test: string;
  size: number;
  iterations: number;
  latency_us: { p50: number; p90: number; avg: number; p99: number; p999: number };
  bandwidth_MBps: number;
  message_rate: number;
  memory: string;
  progress: Mode;
  error_handling: boolean;
  /** The measured endpoint had the fast lane (-L). */
  fast_lane: boolean;
  style: 'tuned' | 'await';
}
