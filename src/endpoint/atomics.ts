/**
 * Remote atomics on an endpoint: the op table, operand words, the `ucp_atomic_op_nbx` post, and the
 * compare-and-swap form of fetching and/or/xor that UCX 1.13 gets wrong on shared memory.
 */
import { CONSTANTS, addressOf, layouts, ucxProfile, ucx } from '../ffi/index.js';
import { Request, ResultKind } from '../request.js';
import { ArgumentOutOfRangeError, INTERNAL, InvalidArgumentError } from '../errors/misuse.js';
import { show } from '../internal/bytes.js';
import type { RequestEngine } from '../engine/request-engine.js';
import type { AtomicOp, Endpoint } from '../endpoint.js';
import type { RemoteKey } from '../remote-key.js';
import { kComplete, kFail, kReleased, kReply, kUcxDone } from '../internal/symbols.js';
import type { OwnRequests } from '../engine/own-request.js';

const K = CONSTANTS;
const REQ = layouts.ucp_request_param_t.offsets;

/** Request labels per op (constant strings: none is built per operation). */
export const ATOMIC_LABEL: Readonly<Record<AtomicOp, string>> = {
  add: 'atomic add', and: 'atomic and', or: 'atomic or', xor: 'atomic xor', swap: 'atomic swap', cswap: 'atomic cswap',
};

export const ATOMIC_OPS: Record<AtomicOp, number> = {
  add: Number(K.UCP_ATOMIC_OP_ADD),
  and: Number(K.UCP_ATOMIC_OP_AND),
  or: Number(K.UCP_ATOMIC_OP_OR),
  xor: Number(K.UCP_ATOMIC_OP_XOR),
  swap: Number(K.UCP_ATOMIC_OP_SWAP),
  cswap: Number(K.UCP_ATOMIC_OP_CSWAP),
};
const ATOMIC_POST_MASK = Number(K.UCP_OP_ATTR_FIELD_CALLBACK | K.UCP_OP_ATTR_FIELD_USER_DATA | K.UCP_OP_ATTR_FIELD_DATATYPE);
const ATOMIC_FETCH_MASK = ATOMIC_POST_MASK | Number(K.UCP_OP_ATTR_FIELD_REPLY_BUFFER);
const ATOMIC_FETCH_OWN_MASK = ATOMIC_FETCH_MASK | Number(K.UCP_OP_ATTR_FIELD_REQUEST);

const MIN_64 = -(1n << 63n);
const MAX_64 = (1n << 64n) - 1n;
const MIN_32 = -(1n << 31n);
const MAX_32 = (1n << 32n) - 1n;

/** A value as an unsigned word of `width` bits (negative numbers wrap, as in C). */
export function toWord(value: number | bigint, width: 32 | 64, what: string): bigint {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new ArgumentOutOfRangeError(`${what} must be an integer, got ${show(value)}`);
    value = BigInt(value);
  } else if (typeof value !== 'bigint') {
    throw new InvalidArgumentError(`${what} must be a number or a bigint`);
  }
  if (value < (width === 64 ? MIN_64 : MIN_32) || value > (width === 64 ? MAX_64 : MAX_32)) {
    throw new ArgumentOutOfRangeError(`${what} ${value} does not fit in ${width} bits`);
  }
  // Already a word (the common case): asUintN would allocate a new bigint.
  return value >= 0n ? value : BigInt.asUintN(width, value);
}

/**
 * The word width of an atomic: the value's type (bigint: 64 bits, number: 32). A `width` or a compare
 * value of the other type is refused: converting silently is how a 64-bit counter got a 32-bit add.
 */
export function atomicWidth(value: unknown, width: unknown, compare: unknown): 32 | 64 {
  if (typeof value !== 'number' && typeof value !== 'bigint') {
    throw new InvalidArgumentError(`atomic value must be a number (32-bit word) or a bigint (64-bit word), got ${show(value)}`);
  }
  const own = typeof value === 'bigint' ? 64 : 32;
  if (width !== undefined && width !== 32 && width !== 64) {
    throw new ArgumentOutOfRangeError(`atomic width must be 32 or 64, got ${show(width)}`);
  }
  if (width !== undefined && width !== own) {
    throw new InvalidArgumentError(own === 64
      ? `atomic: a bigint value is a 64-bit word, but width is ${width}: pass a number for a 32-bit word`
      : `atomic: a number value is a 32-bit word, but width is ${width}: pass a bigint (e.g. 1n) for a 64-bit word`);
  }
  if (compare !== undefined && typeof compare !== typeof value) {
    throw new InvalidArgumentError(
      `atomic cswap: the compare value is a ${typeof compare} and the value a ${typeof value}: both must be bigints (64-bit word) or both numbers (32-bit)`,
    );
  }
  return own;
}

/**
 * Whether the loaded UCX computes fetching and/or/xor wrongly over shared memory (UCX 1.13, see
 * fetchBitwiseByCompareAndSwap): the version's profile says.
 */
export function isFetchBitwiseBroken(): boolean {
  return ucxProfile().workarounds.fetchBitwiseByCompareAndSwap;
}

/**
 * Posts `ucp_atomic_op_nbx` on `ep` for a checked request: the operand (and for cswap the compare
 * value) in the worker's operand cell, the reply buffer for fetching ops. The caller owns what follows
 * (the endpoint's in-flight bookkeeping).
 */
export function postAtomic(
  requests: RequestEngine, ep: bigint, op: AtomicOp, width: 32 | 64, fetch: boolean, address: bigint | number,
  rkey: bigint, operand: bigint, compare: number | bigint | undefined,
): Request<number | bigint | undefined> {
  const opcode = ATOMIC_OPS[op];
  const params = requests.params;
  if (width === 64) params.atomicOperandView.setBigUint64(0, operand, true);
  else params.atomicOperandView.setUint32(0, Number(operand), true);
  let reply: Uint8Array | null = null;
  if (fetch) {
    // From Node's pooled slab, already off V8's heap: C writes into it without moving it first.
    reply = Buffer.allocUnsafe(8).fill(0);
    if (op === 'cswap') {
      if (compare === undefined) throw new InvalidArgumentError("atomic 'cswap' needs options.compare");
      // UCX: the operand buffer holds the value to compare with; the reply buffer the value to store.
      const expected = toWord(compare, width, 'compare');
      const view = new DataView(reply.buffer, reply.byteOffset, 8);
      if (width === 64) {
        params.atomicOperandView.setBigUint64(0, expected, true);
        view.setBigUint64(0, operand, true);
      } else {
        params.atomicOperandView.setUint32(0, Number(expected), true);
        view.setUint32(0, Number(operand), true);
      }
    }
  }
  const block = params.atomic;
  block.setU32At(REQ.datatype, width); // ucp_dt_make_contig(n) = n << 3: 32 for 4 bytes, 64 for 8
  block.setU32At(REQ.op_attr_mask, fetch ? ATOMIC_FETCH_MASK : ATOMIC_POST_MASK);
  const operandAddress = params.atomicOperand.address;
  if (reply === null) {
    return requests.void(
      requests.slot(block), ucx().ucp_atomic_op_nbx(ep, opcode, operandAddress, 1, address, rkey, block.address), ATOMIC_LABEL[op], null,
    ) as Request<unknown> as Request<number | bigint | undefined>;
  }
  const kind = width === 64 ? ResultKind.Reply64 : ResultKind.Reply32;
  block.setU64At(REQ.reply_buffer, addressOf(reply));
  const own = requests.ownRequests?.take() ?? null;
  if (own !== null) {
    block.setU32At(REQ.op_attr_mask, ATOMIC_FETCH_OWN_MASK);
    block.setU64At(REQ.request, (requests.ownRequests as OwnRequests).pointer(own));
  }
  const request = requests.open<number | bigint | undefined>(block, kind, ATOMIC_LABEL[op], reply);
  request[kReply] = reply;
  if (own !== null) {
    // UCX's from here until its completion, and never ucp_request_free'd (src/engine/own-request.ts).
    request[kReleased] = true;
    request[kUcxDone] = (requests.ownRequests as OwnRequests).giver(own);
  }
  requests.track(request, block, ucx().ucp_atomic_op_nbx(ep, opcode, operandAddress, 1, address, rkey, block.address));
  return request;
}

/**
 * Fetching and/or/xor as a compare-and-swap loop. UCX 1.13 computes them with the wrong operand on its
 * shared-memory transports (the C program in docs/ucx-1.13-bugs/amo_fetch_bitwise.c shows it: fetch-and of 12
 * with 10 leaves 12), so ucxx-ts builds them from fetch-add(0) and cswap, which are correct everywhere.
 */
export function fetchBitwiseByCompareAndSwap(
  endpoint: Endpoint, op: 'and' | 'or' | 'xor', key: RemoteKey, offset: number | bigint, operand: bigint, width: 32 | 64,
  signal: AbortSignal | undefined,
): Request<number | bigint | undefined> {
  const request = new Request<number | bigint | undefined>(
    INTERNAL, null, width === 64 ? ResultKind.Reply64 : ResultKind.Reply32, `atomic ${op}`, null,
  );
  const apply = (v: bigint): bigint => BigInt.asUintN(width, op === 'and' ? v & operand : op === 'or' ? v | operand : v ^ operand);
  const read = (v: number | bigint | undefined): bigint => BigInt(v ?? 0);
  const word = (v: bigint): number | bigint => (width === 64 ? v : Number(v));
  void (async () => {
    let current = read(await endpoint.atomic('add', key, offset, word(0n), { fetch: true, width, signal }));
    for (;;) {
      const seen = read(await endpoint.atomic('cswap', key, offset, word(apply(current)), { compare: word(current), width, signal }));
      if (seen === current) break;
      current = seen;
    }
    const reply = new Uint8Array(8);
    new DataView(reply.buffer).setBigUint64(0, current, true);
    request[kReply] = reply;
    request[kComplete](0, 0, 0n);
  })().catch((err: Error) => request[kFail](err));
  return request;
}
