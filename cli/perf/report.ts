/** ucxx-perf's figures: percentiles from samples, and the table ucx_perftest's columns look like. */
import { performance } from 'node:perf_hooks';
import type { Endpoint } from 'ucxx-ts';
import type { Plan, Result } from './plan.js';

/**
 * The figures of one size: percentiles of per-operation `samples` (latency tests, microseconds), or of
 * a whole timed `run` (bandwidth and rate tests, where every figure is the mean).
 */
export function summarize(plan: Plan, size: number, measured: { samples: Float64Array } | { seconds: number; iterations: number }): Result {
  let avg: number;
  let iterations: number;
  let at: (q: number) => number;
  if ('samples' in measured) {
    const sorted = Float64Array.from(measured.samples).sort();
    iterations = sorted.length;
    at = (q) => sorted[Math.min(iterations - 1, Math.floor(iterations * q))] as number;
    avg = sorted.reduce((a, b) => a + b, 0) / iterations;
  } else {
    iterations = measured.iterations;
    avg = (measured.seconds * 1e6) / iterations;
    at = () => avg;
  }
  const perOpSeconds = avg / 1e6;
  return {
    tool: 'ucxx-perf',
    test: plan.test,
    size,
    iterations,
    latency_us: { p50: round(at(0.5)), p90: round(at(0.9)), avg: round(avg), p99: round(at(0.99)), p999: round(at(0.999)) },
    bandwidth_MBps: round(size / perOpSeconds / 1e6),
    message_rate: Math.round(1 / perOpSeconds),
    memory: plan.memory,
    progress: plan.progress,
    error_handling: plan.errorHandling,
    fast_lane: plan.fastLane,
    style: plan.style,
  };
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

const COLUMNS = [
  'size', 'iterations', '50.0%ile (us)', '90.0%ile (us)', 'average (us)', '99.0%ile (us)', '99.9%ile (us)', 'bandwidth (MB/s)',
  'msg rate (1/s)',
];

/** An endpoint's lanes as `transport/device (usage)`, one entry per transport and device, the cm lane left out. */
export function describeTransports(endpoint: Endpoint): string {
  const seen = new Map<string, Set<string>>();
  for (const lane of endpoint.getTransports()) {
    if (lane.usage.includes('cm')) continue;
    const name = `${lane.transport}/${lane.device}`;
    const usage = seen.get(name) ?? new Set<string>();
    for (const u of lane.usage) usage.add(u);
    seen.set(name, usage);
  }
  return [...seen].map(([name, usage]) => `${name} (${[...usage].join(', ')})`).join(', ') || 'none reported';
}

/** `transports`: the measured endpoint's lanes, as `transport/device`, e.g. 'posix/memory, cma/memory'. */
export function printHeader(plan: Plan, transports: string): void {
  console.log(`ucxx-perf ${plan.test}: memory ${plan.memory}, progress ${plan.progress}, outstanding ${plan.outstanding}, `
    + (plan.flushEvery > 0 ? `flush every ${plan.flushEvery}, ` : '')
    + `error handling ${plan.fastLane ? 'peer, fast lane (-L)' : plan.errorHandling ? 'peer (-e)' : 'none'}${plan.style === 'await' ? ', every request awaited' : ''}`);
  console.log(`transports: ${transports}`);
  console.log(COLUMNS.map((c) => c.padStart(16)).join(' '));
}

export function printRow(r: Result): void {
  const cells = [
    String(r.size), String(r.iterations), r.latency_us.p50.toFixed(3), r.latency_us.p90.toFixed(3), r.latency_us.avg.toFixed(3),
    r.latency_us.p99.toFixed(3), r.latency_us.p999.toFixed(3), r.bandwidth_MBps.toFixed(2), String(r.message_rate),
  ];
  console.log(cells.map((c) => c.padStart(16)).join(' '));
}

/** A progress bar on stderr, shown once a run has taken a second. */
export class ProgressBar {
  #done = 0;
  readonly #total: number;
  readonly #started = performance.now();
  constructor(total: number) {
    this.#total = total;
  }

  tick(): void {
    this.#done++;
    if (performance.now() - this.#started < 1000 && this.#done < this.#total) return;
    const width = 30;
    const filled = Math.round((this.#done / this.#total) * width);
    process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${this.#done}/${this.#total}`);
    if (this.#done === this.#total) process.stderr.write('\n');
  }
}
