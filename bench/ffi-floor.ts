/**
 * The FFI floor: what one koffi crossing costs on this machine, and how close ucxx-ts's small
 * operations come to the raw libucp calls they make. One process, a worker in 'manual' mode, an
 * endpoint to itself, 8 B into UCX-allocated memory (one-sided on this host) or 8 B messages; each
 * figure is the best of five timed runs of 200,000 calls, in ns per call. The raw message figures use
 * callbacks that do nothing but free the request or count: what any koffi program pays for the same
 * calls. Run by bench/run.ts (its "FFI floor" table), or alone: node build/bench/ffi-floor.js [--json].
 */
import koffi from 'koffi';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { Context, createRemoteKeyFromSerialized, type Endpoint, type Worker } from 'ucxx-ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The raw calls, from the FFI layer itself (dist/ffi: the library's own declarations). */
interface RawUcx {
  ucp_worker_progress(worker: bigint): number;
  ucp_put_nbx(ep: bigint, buffer: Uint8Array, count: number, remoteAddr: bigint | number, rkey: bigint, param: bigint): bigint | null;
  ucp_atomic_op_nbx(
    ep: bigint, opcode: number, buffer: bigint, count: number, remoteAddr: bigint | number, rkey: bigint, param: bigint,
  ): bigint | null;
  ucp_tag_send_nbx(ep: bigint, buffer: Uint8Array, count: number, tag: bigint, param: bigint): bigint | null;
  ucp_tag_recv_nbx(worker: bigint, buffer: Uint8Array, count: number, tag: bigint, mask: bigint, param: bigint): bigint | null;
  ucp_am_send_nbx(ep: bigint, id: number, header: null, headerLength: number, buffer: Uint8Array, count: number, param: bigint): bigint | null;
  ucp_worker_set_am_recv_handler(worker: bigint, param: Buffer): number;
  ucp_request_free(request: number | bigint): void;
}

/** The FFI layer's pieces that the raw message figures build their own parameter blocks with. */
interface RawFfi {
  ucx(): RawUcx;
  CONSTANTS: Record<string, bigint>;
  registerCallback(kind: string, fn: (...args: never[]) => unknown): bigint;
  StructBuffer: new (layout: unknown) => RawStruct;
  layouts: Record<string, unknown>;
}

interface RawStruct {
  readonly buffer: Buffer;
  readonly address: bigint;
  setU32(field: string, value: number): RawStruct;
  setU64(field: string, value: bigint): RawStruct;
  setPtr(field: string, value: bigint | null): RawStruct;
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

/** The best ns per call of a loop of `n` calls, timed whole. */
function best(fn: (n: number) => void): number {
  return bestTimed((n) => {
    const t0 = performance.now();
    fn(n);
    return performance.now() - t0;
  });
}

/** The best ns per call of a loop that returns the milliseconds it spent in what it times. */
function bestTimed(fn: (n: number) => number): number {
  fn(CALLS); // warm-up: V8 compiles the loop
  let min = Infinity;
  for (let r = 0; r < RUNS; r++) min = Math.min(min, (fn(CALLS) * 1e6) / CALLS);
  return Math.round(min * 10) / 10;
}

export async function measureFloor(): Promise<FloorFigure[]> {
  const ffi = await import(pathToFileURL(path.join(ROOT, 'dist', 'ffi', 'index.js')).href) as RawFfi;
  const { ucx, CONSTANTS } = ffi;
  const symbols = await import(pathToFileURL(path.join(ROOT, 'dist', 'internal', 'symbols.js')).href) as Record<string, symbol>;
  const libc = koffi.load('libc.so.6');
  const abs = libc.func('int abs(int)') as (x: number) => number;
  const context = new Context({ features: ['tag', 'am', 'rma', 'amo32', 'amo64'] });
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
    measureMessages(ffi, worker, endpoint, requests?.params ?? {}, data, push);
    key.close();
    return figures;
  } finally {
    await context.close();
  }
}

/**
 * 8 B messages to the worker itself. Tag: a send and the receive of the message that arrived (its
 * callback runs inside the receive call); the receive alone (of messages sent beforehand) is what a
 * receiving process pays per message at least. Active messages: a send, whose handler runs inside the
 * next progress call.
 */
function measureMessages(
  ffi: RawFfi, worker: Worker, endpoint: Endpoint, params: Record<string, { address: bigint }>, data: Uint8Array,
  push: (name: string, ns: number, raw?: string) => void,
): void {
  const raw = ffi.ucx();
  const K = ffi.CONSTANTS;
  const w = worker.getHandle();
  const ep = endpoint.getHandle();
  const sendBlock = params['send']?.address as bigint;
  const amBlock = params['amSend']?.address as bigint;
  const tag = 0x464c4f4fn; // 'FLOO'
  const mask = 0xffff_ffff_ffff_ffffn;
  const buffer = new Uint8Array(8);
  // The bare callbacks: free the request (the library defers that past the call; here it is nested).
  const bareRecv = ffi.registerCallback('tagRecv', (handle: number) => raw.ucp_request_free(handle));
  const recvParam = new ffi.StructBuffer(ffi.layouts['ucp_request_param_t'])
    .setU32('op_attr_mask', Number((K['UCP_OP_ATTR_FIELD_CALLBACK'] as bigint) | (K['UCP_OP_ATTR_FLAG_NO_IMM_CMPL'] as bigint)))
    .setPtr('cb.recv', bareRecv);
  const recvBlock = recvParam.address;
  push('raw tag send + receive 8 B', best((n) => {
    for (let i = 0; i < n; i++) {
      raw.ucp_tag_send_nbx(ep, data, 8, tag, sendBlock);
      raw.ucp_tag_recv_nbx(w, buffer, 8, tag, mask, recvBlock);
    }
  }));
  push('tagSend + tagRecv 8 B', best((n) => {
    for (let i = 0; i < n; i++) {
      const sent = endpoint.tagSend(data, tag);
      const received = worker.tagRecv(buffer, tag);
      if (!received.completed || !sent.completed) worker.progressUntil(received);
    }
  }), 'raw tag send + receive 8 B');
  // The receive alone: 1,000 messages sent untimed, then received timed.
  const receiveOnly = (receive: () => void) => (n: number): number => {
    let spent = 0;
    for (let done = 0; done < n; done += 1000) {
      for (let i = 0; i < 1000; i++) raw.ucp_tag_send_nbx(ep, data, 8, tag, sendBlock);
      const t0 = performance.now();
      for (let i = 0; i < 1000; i++) receive();
      spent += performance.now() - t0;
    }
    return spent;
  };
  push('raw ucp_tag_recv_nbx 8 B (arrived)', bestTimed(receiveOnly(() => raw.ucp_tag_recv_nbx(w, buffer, 8, tag, mask, recvBlock))));
  push('worker.tagRecv 8 B (arrived)', bestTimed(receiveOnly(() => {
    const received = worker.tagRecv(buffer, tag);
    if (!received.completed) worker.progressUntil(received);
  })), 'raw ucp_tag_recv_nbx 8 B (arrived)');
  // Active messages: a bare handler on one id, the library's on another.
  const AM_RAW = 0x7f01;
  const AM_LIB = 0x7f02;
  let counted = 0;
  const bareHandler = ffi.registerCallback('amRecv', () => {
    counted++;
    return 0;
  });
  const handlerParam = new ffi.StructBuffer(ffi.layouts['ucp_am_handler_param_t'])
    .setU64('field_mask', (K['UCP_AM_HANDLER_PARAM_FIELD_ID'] as bigint) | (K['UCP_AM_HANDLER_PARAM_FIELD_FLAGS'] as bigint) |
      (K['UCP_AM_HANDLER_PARAM_FIELD_CB'] as bigint))
    .setU32('id', AM_RAW)
    .setU32('flags', Number(K['UCP_AM_FLAG_WHOLE_MSG']))
    .setPtr('cb', bareHandler);
  if (raw.ucp_worker_set_am_recv_handler(w, handlerParam.buffer) !== 0) throw new Error('ucp_worker_set_am_recv_handler failed');
  worker.setAmHandler(AM_LIB, () => {
    counted++;
  });
  // The library writes the block's flags per call: one send sets them for the raw calls.
  worker.progressUntil(endpoint.amSend(AM_LIB, null, data));
  push('raw am send + handler 8 B', best((n) => {
    for (let i = 0; i < n; i++) {
      raw.ucp_am_send_nbx(ep, AM_RAW, null, 0, data, 8, amBlock);
      raw.ucp_worker_progress(w);
    }
  }));
  push('amSend + handler 8 B', best((n) => {
    for (let i = 0; i < n; i++) {
      const sent = endpoint.amSend(AM_LIB, null, data);
      if (!sent.completed) worker.progressUntil(sent);
      worker.progress();
    }
  }), 'raw am send + handler 8 B');
  worker.setAmHandler(AM_LIB, null);
  if (counted === 0) throw new Error('no active message arrived');
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const figures = await measureFloor();
  if (process.argv.includes('--json')) console.log(JSON.stringify({ tool: 'ffi-floor', figures }));
  else for (const f of figures) console.log(`${f.name.padEnd(34)} ${f.ns.toFixed(1).padStart(7)} ns${f.ratio === undefined ? '' : `  (${f.ratio}x ${f.raw})`}`);
}
