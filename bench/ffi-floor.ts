/**
 * The FFI floor: what one koffi crossing costs on this machine, and how close ucxx-ts's small
 * operations come to the raw libucp calls they make. One process, a worker in 'manual' mode, an
 * endpoint to itself, 8 B into UCX-allocated memory (one-sided on this host); each figure is the best
 * of five timed runs of 200,000 calls, in ns per call. Run by bench/run.ts (its "FFI floor" table), or
 * alone: node build/bench/ffi-floor.js [--json].
 */
import koffi from 'koffi';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { Context, createRemoteKeyFromSerialized } from 'ucxx-ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The raw calls, from the FFI layer itself (dist/ffi: the library's own declarations). */
interface RawUcx {
  ucp_worker_progress(worker: bigint): number;
  ucp_put_nbx(ep: bigint, buffer: Uint8Array, count: number, remoteAddr: bigint | number, rkey: bigint, param: bigint): bigint | null;
  ucp_atomic_op_nbx(
    ep: bigint, opcode: number, buffer: bigint, count: number, remoteAddr: bigint | number, rkey: bigint, param: bigint,
  ): bigint | null;
}

/** One figure of the floor table. */
export interface FloorFigure {
  name: string;
  ns: number;
  /** For a library operation: the raw call it makes, and the ratio to it. */
  raw?: string;
  ratio?: number;
}

const CALLS = 200_000;
const RUNS = 5;

function best(fn: (n: number) => void): number {
  fn(CALLS); // warm-up: V8 compiles the loop
  let min = Infinity;
  for (let r = 0; r < RUNS; r++) {
    const t0 = performance.now();
    fn(CALLS);
    min = Math.min(min, ((performance.now() - t0) * 1e6) / CALLS);
  }
  return Math.round(min * 10) / 10;
}

export async function measureFloor(): Promise<FloorFigure[]> {
  const { ucx, CONSTANTS } = await import(pathToFileURL(path.join(ROOT, 'dist', 'ffi', 'index.js')).href) as {
    ucx(): RawUcx; CONSTANTS: Record<string, bigint>;
  };
  const symbols = await import(pathToFileURL(path.join(ROOT, 'dist', 'internal', 'symbols.js')).href) as Record<string, symbol>;
  const libc = koffi.load('libc.so.6');
  const abs = libc.func('int abs(int)') as (x: number) => number;
  const context = new Context({ features: ['tag', 'rma', 'amo32', 'amo64'] });
  try {
    const worker = context.createWorker({ progressMode: 'manual' });
    const endpoint = worker.connectToAddress(worker.getAddress(), { errorHandling: false });
    worker.progressUntil(endpoint.flush());
    const region = context.createMemoryHandle(1 << 20);
    const key = createRemoteKeyFromSerialized(endpoint, region.createRemoteKey().serialize());
    const local = context.createMemoryHandle(4096);
    const data = local.view().subarray(0, 8);
    // The handles and the parameter block the library itself would pass (reached through its symbols).
    const internal = key as unknown as Record<symbol, (...args: unknown[]) => unknown>;
    const rkey = internal[symbols['kHandleFor'] as symbol]?.(endpoint, 'write') as bigint;
    const remote = internal[symbols['kRemoteAddress'] as symbol]?.(0, 8) as bigint | number;
    const requests = (worker as unknown as Record<symbol, { params: Record<string, { address: bigint }> }>)[symbols['kRequests'] as symbol];
    const sendBlock = requests?.params['send']?.address as bigint;
    const atomicBlock = requests?.params['atomic']?.address as bigint;
    const operand = (requests?.params['atomicOperand'] as { address: bigint } | undefined)?.address as bigint;
    const raw = ucx();
    const ep = endpoint.getHandle();
    const w = worker.getHandle();
    const add = Number(CONSTANTS['UCP_ATOMIC_OP_ADD']);
    // Puts and atomics become visible only with a flush: one per 1,024 operations, raw or not.
    const flushEvery = (i: number): void => {
      if ((i & 1023) === 1023) worker.progressUntil(endpoint.flush());
    };
    const figures: FloorFigure[] = [];
    const push = (name: string, ns: number, rawName?: string): void => {
      const base = figures.find((f) => f.name === rawName);
      figures.push({ name, ns, ...(base === undefined ? {} : { raw: rawName, ratio: Math.round((ns / base.ns) * 100) / 100 }) });
    };
    push('koffi call: abs(int) from libc', best((n) => { let s = 0; for (let i = 0; i < n; i++) s += abs(-i); if (s < 0) throw new Error(); }));
    push('raw ucp_worker_progress (idle)', best((n) => { for (let i = 0; i < n; i++) raw.ucp_worker_progress(w); }));
    push('worker.progress() (idle)', best((n) => { for (let i = 0; i < n; i++) worker.progress(); }), 'raw ucp_worker_progress (idle)');
    push('raw ucp_put_nbx 8 B', best((n) => {
      for (let i = 0; i < n; i++) {
        raw.ucp_put_nbx(ep, data, 8, remote, rkey, sendBlock);
        flushEvery(i);
      }
    }));
    push('endpoint.memPut 8 B', best((n) => {
      for (let i = 0; i < n; i++) {
        const r = endpoint.memPut(data, key, 0);
        if (!r.completed) worker.progressUntil(r);
        flushEvery(i);
      }
    }), 'raw ucp_put_nbx 8 B');
    // The library writes the atomic block's per-call fields (datatype, mask): one atomic sets them for
    // the raw calls below.
    worker.progressUntil(endpoint.atomic('add', key, 0, 1n));
    push('raw ucp_atomic_op_nbx add 64', best((n) => {
      for (let i = 0; i < n; i++) {
        raw.ucp_atomic_op_nbx(ep, add, operand, 1, remote, rkey, atomicBlock);
        flushEvery(i);
      }
    }));
    push("endpoint.atomic('add') 64", best((n) => {
      for (let i = 0; i < n; i++) {
        const r = endpoint.atomic('add', key, 0, 1n);
        if (!r.completed) worker.progressUntil(r);
        flushEvery(i);
      }
    }), 'raw ucp_atomic_op_nbx add 64');
    worker.progressUntil(endpoint.flush());
    key.close();
    return figures;
  } finally {
    await context.close();
  }
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const figures = await measureFloor();
  if (process.argv.includes('--json')) console.log(JSON.stringify({ tool: 'ffi-floor', figures }));
  else for (const f of figures) console.log(`${f.name.padEnd(34)} ${f.ns.toFixed(1).padStart(7)} ns${f.ratio === undefined ? '' : `  (${f.ratio}x ${f.raw})`}`);
}
