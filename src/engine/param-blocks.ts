/**
 * The `ucp_request_param_t` blocks a worker reuses for every operation. Each is written once, at worker
 * creation; per operation only `user_data` (the slot id) changes, plus the few fields a kind needs
 * (flags, an atomic's reply buffer). Each block carries its own completion rule: `bracketed` blocks
 * are posted between beginPost/endPost, since UCX may run their callback inside the nbx call.
 */
import { CONSTANTS, OutCell, StructBuffer, layouts } from '../ffi/index.js';
import { completionCallbacks } from './completions.js';

const K = CONSTANTS;
const USER_DATA = layouts.ucp_request_param_t.offsets.user_data;
const FLAGS = layouts.ucp_request_param_t.offsets.flags;
const MEMH = layouts.ucp_request_param_t.offsets.memh;

/** One reusable parameter block: the struct, its address for nbx calls, and its completion rule. */
export class ParamBlock {
  readonly struct = new StructBuffer(layouts.ucp_request_param_t);
  readonly buffer = this.struct.buffer;
  readonly address: bigint;
  /**
   * The operation's callback may run inside the nbx call (UCP_OP_ATTR_FLAG_NO_IMM_CMPL, or a kind whose
   * UCX path completes inline), so the request it frees must outlive the call: see beginPost.
   */
  readonly bracketed: boolean;
  /** Per-operation fields go through a DataView: Buffer.writeUInt32LE checks its arguments each call. */
  readonly #view: DataView;

  constructor(opAttrMask: number, bracketed: boolean, fill: (struct: StructBuffer<keyof typeof layouts.ucp_request_param_t.offsets>) => void) {
    this.struct.setU32('op_attr_mask', opAttrMask);
    fill(this.struct);
    this.address = this.struct.address;
    this.bracketed = bracketed;
    this.#view = new DataView(this.buffer.buffer, this.buffer.byteOffset, this.buffer.byteLength);
  }

  /** Writes the operation's slot id into `user_data` (its low half: ids are small). */
  setId(id: number): void {
    this.#view.setUint32(USER_DATA, id, true);
  }

  /** Writes the per-call `flags` (blocks whose mask has UCP_OP_ATTR_FIELD_FLAGS). */
  setFlags(flags: number): void {
    this.#view.setUint32(FLAGS, flags, true);
  }

  /** Writes the per-call memory handle (blocks whose mask has UCP_OP_ATTR_FIELD_MEMH). */
  setMemh(memh: bigint): void {
    this.#view.setBigUint64(MEMH, memh, true);
  }

  /** Writes a 32-bit field at a byte offset (the per-call fields of an atomic). */
  setU32At(offset: number, value: number): void {
    this.#view.setUint32(offset, value, true);
  }

  /** Writes a 64-bit field at a byte offset. */
  setU64At(offset: number, value: bigint): void {
    this.#view.setBigUint64(offset, value, true);
  }
}

export class ParamBlocks {
  /** Sends, RMA, flush (contiguous data, send callback). */
  readonly send: ParamBlock;
  /** Sends of a list of buffers (UCP_DATATYPE_IOV). */
  readonly sendIov: ParamBlock;
  /**
   * Receives are posted with NO_IMM_CMPL: UCX 1.13 does not fill recv_info when a receive completes at
   * once, so the callback (run from inside the call if need be) is the one place that reports tag and
   * length.
   */
  readonly tagRecv: ParamBlock;
  readonly tagRecvIov: ParamBlock;
  /** Stream receives (flags per call); the length of one that completes at once lands in `streamLength`. */
  readonly streamRecv: ParamBlock;
  readonly streamLength = new OutCell();
  /** Active-message sends (flags per call). */
  readonly amSend: ParamBlock;
  /** Active-message sends of a list of buffers (UCP_DATATYPE_IOV; flags per call). */
  readonly amSendIov: ParamBlock;
  /**
   * `send` and `amSend` with a memory handle per call, for the sends that the profile's
   * `peerRendezvousOwnMemh` gives one of ucxx-ts's own (src/engine/own-memh.ts).
   */
  readonly sendOwnMemh: ParamBlock;
  readonly amSendOwnMemh: ParamBlock;
  /** `tagRecv` and `amRecvData` with a memory handle per call (the same workaround, receiving). */
  readonly tagRecvOwnMemh: ParamBlock;
  readonly amRecvDataOwnMemh: ParamBlock;
  /** Receiving rendezvous active-message data. */
  readonly amRecvData: ParamBlock;
  /** Atomics (datatype and reply buffer per call); UCX reads the operand when the operation is posted. */
  readonly atomic: ParamBlock;
  readonly atomicOperand = new OutCell();
  readonly atomicOperandView = new DataView(this.atomicOperand.buffer.buffer, this.atomicOperand.buffer.byteOffset, 8);
  /** ucp_ep_close_nbx (flags per call). */
  readonly close: ParamBlock;
  readonly amHandler = new StructBuffer(layouts.ucp_am_handler_param_t);
  /** Filled by ucp_tag_probe_nb. */
  readonly probeInfo = new StructBuffer(layouts.ucp_tag_recv_info_t);

  constructor() {
    const cbs = completionCallbacks();
    const base = Number(K.UCP_OP_ATTR_FIELD_CALLBACK | K.UCP_OP_ATTR_FIELD_USER_DATA);
    const iov = Number(K.UCP_OP_ATTR_FIELD_DATATYPE);
    const flags = Number(K.UCP_OP_ATTR_FIELD_FLAGS);
    const noImmediate = Number(K.UCP_OP_ATTR_FLAG_NO_IMM_CMPL);
    this.send = new ParamBlock(base, false, (s) => s.setPtr('cb.send', cbs.send));
    this.sendIov = new ParamBlock(base | iov, false, (s) => s.setPtr('cb.send', cbs.send).setU64('datatype', K.UCP_DATATYPE_IOV));
    this.tagRecv = new ParamBlock(base | noImmediate, true, (s) => s.setPtr('cb.recv', cbs.tagRecv));
    this.tagRecvIov = new ParamBlock(base | noImmediate | iov, true,
      (s) => s.setPtr('cb.recv', cbs.tagRecv).setU64('datatype', K.UCP_DATATYPE_IOV));
    this.streamRecv = new ParamBlock(base | flags, true, (s) => s.setPtr('cb.recv_stream', cbs.streamRecv));
    this.amSend = new ParamBlock(base | flags, false, (s) => s.setPtr('cb.send', cbs.send));
    this.amSendIov = new ParamBlock(base | flags | iov, false,
      (s) => s.setPtr('cb.send', cbs.send).setU64('datatype', K.UCP_DATATYPE_IOV));
    const memh = Number(K.UCP_OP_ATTR_FIELD_MEMH);
    this.sendOwnMemh = new ParamBlock(base | memh, false, (s) => s.setPtr('cb.send', cbs.send));
    this.amSendOwnMemh = new ParamBlock(base | flags | memh, false, (s) => s.setPtr('cb.send', cbs.send));
    this.amRecvData = new ParamBlock(base, true, (s) => s.setPtr('cb.recv_am', cbs.streamRecv));
    this.tagRecvOwnMemh = new ParamBlock(base | noImmediate | memh, true, (s) => s.setPtr('cb.recv', cbs.tagRecv));
    this.amRecvDataOwnMemh = new ParamBlock(base | memh, true, (s) => s.setPtr('cb.recv_am', cbs.streamRecv));
    this.atomic = new ParamBlock(base | iov, false, (s) => s.setPtr('cb.send', cbs.send));
    this.close = new ParamBlock(base | flags, false, (s) => s.setPtr('cb.send', cbs.send));
  }
}
