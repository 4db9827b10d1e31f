/**
 * A C struct held in a Buffer and written field by field through its layout. Parameter blocks are built
 * once and then updated in place, so that no JavaScript object is marshalled into C per operation.
 */
import type { Layout } from './layouts.js';
import { addressOf } from './memory.js';

/** Bytes handed to C by address: off V8's heap from the start (never moved), zeroed. */
function pinnedBytes(size: number): Buffer {
  return Buffer.allocUnsafeSlow(size).fill(0);
}

export class StructBuffer<F extends string> {
  /** The bytes handed to C (pass this Buffer, or `address`, as the struct pointer). */
  readonly buffer: Buffer;
  readonly layout: Layout<F>;
  #address: bigint | undefined;

  constructor(layout: Layout<F>) {
    this.layout = layout;
    this.buffer = pinnedBytes(layout.size);
  }

  /**
   * The struct's address, for hot paths: koffi converts a bigint to a pointer faster than it takes a
   * Buffer's data pointer. Valid while this StructBuffer is reachable; keep it, not just the address.
   */
  get address(): bigint {
    this.#address ??= addressOf(this.buffer);
    return this.#address;
  }

  /** The byte offset of a field (for hot paths that write through their own typed-array views). */
  offset(field: F): number {
    return this.layout.offsets[field];
  }

  setU64(field: F, value: bigint | number): this {
    this.buffer.writeBigUInt64LE(BigInt.asUintN(64, BigInt(value)), this.layout.offsets[field]);
    return this;
  }

  setU32(field: F, value: number): this {
    this.buffer.writeUInt32LE(value >>> 0, this.layout.offsets[field]);
    return this;
  }

  setI32(field: F, value: number): this {
    this.buffer.writeInt32LE(value | 0, this.layout.offsets[field]);
    return this;
  }

  /** Writes a pointer field; null is NULL. */
  setPtr(field: F, value: bigint | null): this {
    this.buffer.writeBigUInt64LE(value ?? 0n, this.layout.offsets[field]);
    return this;
  }

  getU64(field: F): bigint {
    return this.buffer.readBigUInt64LE(this.layout.offsets[field]);
  }

  getU32(field: F): number {
    return this.buffer.readUInt32LE(this.layout.offsets[field]);
  }

  /** Reads a pointer field; NULL is null. */
  getPtr(field: F): bigint | null {
    const value = this.buffer.readBigUInt64LE(this.layout.offsets[field]);
    return value === 0n ? null : value;
  }

  /** Zeroes the whole struct (every `field_mask` bit off). */
  clear(): this {
    this.buffer.fill(0);
    return this;
  }
}

/** A reusable 8-byte cell: an out-parameter (`T **` / `size_t *` / `int *`) or an operand C reads. */
export class OutCell {
  readonly buffer = pinnedBytes(8);
  #address: bigint | undefined;

  /** The cell's address (as StructBuffer's `address`: cheaper for koffi than the Buffer). */
  get address(): bigint {
    this.#address ??= addressOf(this.buffer);
    return this.#address;
  }

  ptr(): bigint | null {
    const value = this.buffer.readBigUInt64LE(0);
    return value === 0n ? null : value;
  }

  u64(): bigint {
    return this.buffer.readBigUInt64LE(0);
  }

  i32(): number {
    return this.buffer.readInt32LE(0);
  }

  reset(): Buffer {
    this.buffer.fill(0);
    return this.buffer;
  }
}
