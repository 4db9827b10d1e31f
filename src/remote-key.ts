/**
 * A remote key: what a peer needs to reach a MemoryHandle's region with `memPut`/`memGet`.
 *
 * The owner of the memory packs it (`createRemoteKeyFromMemoryHandle`) and sends `serialize()`'s bytes;
 * the peer rebuilds it on its endpoint (`createRemoteKeyFromSerialized`). The serialized form is ucxx's
 * (byte-compatible with ucxx C++), plus an optional trailer carrying the access rights, which ucxx
 * ignores. Deserialization validates everything (length, checksum, packed-key structure, region bounds)
 * before UCX sees a byte. Holding a key means being able to read and write that region: send it only to
 * peers you trust, as with any UCX/MPI program.
 *
 * ```ts
 * // owner
 * const bytes = createRemoteKeyFromMemoryHandle(region).serialize();
 * // peer
 * const key = createRemoteKeyFromSerialized(endpoint, bytes);
 * await endpoint.memPut(data, key, 0);
 * ```
 */
import {
  kFromMemoryHandle, kFromSerialized, kHandleFor, kKeyClosed, kKeyUnpacked, kLive, kMdComponents,
  kPackedRkey, kPackedRkeyReference, kRemoteAddress, kUnpack,
} from './internal/symbols.js';
import { ucx } from './ffi/index.js';
import { ClosedError, RemoteAccessError } from './errors/index.js';
import { asBytes, toU64 } from './internal/bytes.js';
import {
  decodeSerializedRemoteKey, encodeSerializedRemoteKey, type RemoteKeyAccess,
} from './internal/serialized-remote-key.js';
import { checkPackedRkeyAgainstReference } from './internal/packed-rkey.js';
import { checkSharedMemoryRecords } from './internal/shm-rkey-check.js';
import { endpointUnpacksRecord } from './internal/rkey-reach.js';
import type { Endpoint } from './endpoint.js';
import type { MemoryHandle } from './memory-handle.js';
import {
  InvalidArgumentError, ArgumentOutOfRangeError, INTERNAL, checkConstructorToken,
} from './errors/misuse.js';
import { liveCounts } from './internal/live-counts.js';

// Keys of this module's own members (no other module uses them).
const kAddressOf: unique symbol = Symbol('ucxx-ts.addressOf');

export type { RemoteKeyAccess } from './internal/serialized-remote-key.js';

/**
 * The key to a remote region: packed by its owner, serialized to travel (ucxx's format), unpacked on
 * an endpoint here. RMA through it is checked against the region's bounds and access.
 *
 * @example
 * ```ts
 * const key = createRemoteKeyFromSerialized(ep, bytes);
 * await ep.memGet(buffer, key, 0);
 * ```
 */
export class RemoteKey {
  readonly #packed: Uint8Array;
  readonly #base: bigint;
  readonly #size: bigint;
  /** #base and #size as numbers when both are safe integers (addresses are below 2^48 in practice); -1 otherwise. */
  readonly #baseNumber: number;
  readonly #sizeNumber: number;
  readonly #access: RemoteKeyAccess;
  /** Whether the access rights are known (keys from ucxx C++ carry none and are treated as read-write). */
  readonly #accessKnown: boolean;
  readonly #endpoint: Endpoint | null;
  #rkey: bigint | null;
  #closed = false;

  private constructor(
    token: typeof INTERNAL, packed: Uint8Array, base: bigint, size: bigint, access: RemoteKeyAccess, accessKnown: boolean,
    endpoint: Endpoint | null, rkey: bigint | null,
  ) {
    checkConstructorToken(token, 'RemoteKey', 'memoryHandle.createRemoteKey() or createRemoteKeyFromSerialized()');
    this.#packed = packed;
    this.#base = base;
    this.#size = size;
    const safe = base + size <= BigInt(Number.MAX_SAFE_INTEGER);
    this.#baseNumber = safe ? Number(base) : -1;
    this.#sizeNumber = safe ? Number(size) : -1;
    this.#access = access;
    this.#accessKnown = accessKnown;
    this.#endpoint = endpoint;
    this.#rkey = rkey;
    if (rkey !== null) liveCounts.remoteKeys++;
  }

  /** @internal */
  static [kFromMemoryHandle](handle: MemoryHandle): RemoteKey {
    return new RemoteKey(
      INTERNAL, handle[kPackedRkey](), handle.getBaseAddress(), BigInt(handle.getSize()), handle.access, true, null, null,
    );
  }

  /** @internal */
  static [kFromSerialized](endpoint: Endpoint, serialized: unknown): RemoteKey {
    const bytes = asBytes(serialized, 'serialized remote key');
    endpoint[kLive]('createRemoteKeyFromSerialized');
    const decoded = decodeSerializedRemoteKey(bytes);
    const context = endpoint.worker.context;
    checkPackedRkeyAgainstReference(decoded.packedRkeyInfo, context[kPackedRkeyReference]());
    const ep = endpoint[kLive]('createRemoteKeyFromSerialized');
    checkSharedMemoryRecords(
      decoded.packedRkey, decoded.packedRkeyInfo, context[kMdComponents](), decoded.baseAddress, decoded.size,
      (index, component, size) => endpointUnpacksRecord(context, endpoint, ep, index, component, size),
    );
    const rkey = endpoint[kUnpack](decoded.packedRkey);
    const key = new RemoteKey(
      INTERNAL, decoded.packedRkey, decoded.baseAddress, decoded.size, decoded.access, decoded.hasAccessTrailer,
      endpoint, rkey,
    );
    endpoint[kKeyUnpacked](key, rkey);
    return key;
  }

  /**
   * The unpacked `ucp_rkey_h` (null for a key packed locally from a MemoryHandle, as in ucxx).
   *
   * @example
   * ```ts
   * const key = createRemoteKeyFromSerialized(ep, bytes);
   * // ucxx's raw form: address and handle, no bounds or access check
   * await ep.memPut(data, key.getBaseAddress() + 64n, key.getHandle()!);
   * ```
   */
  getHandle(): bigint | null {
    this.#live();
    return this.#rkey;
  }

  /**
   * The size of the remote region in bytes.
   *
   * @example
   * ```ts
   * const whole = new Uint8Array(key.getSize());
   * await ep.memGet(whole, key); // the whole remote region
   * ```
   */
  getSize(): number {
    return Number(this.#size);
  }

  /**
   * The remote region's base address (in the owner's address space).
   *
   * @example
   * ```ts
   * const address = key.getBaseAddress() + 128n; // offset 128, in the owner's address space
   * await ep.memGet(buffer, address, key.getHandle()!);
   * ```
   */
  getBaseAddress(): bigint {
    return this.#base;
  }

  /** The access rights the owner gave ('read-write' for keys serialized by ucxx C++). */
  get access(): RemoteKeyAccess {
    return this.#access;
  }

  /** The endpoint the key was unpacked on, or null for a locally packed key. */
  get endpoint(): Endpoint | null {
    return this.#endpoint;
  }

  /** True once closed (or once its endpoint closed). */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * The key in ucxx's serialized format (checksum, packed rkey, base address, size) followed by an
   * ucxx-ts access trailer that ucxx ignores.
   *
   * @example
   * ```ts
   * const bytes = region.createRemoteKey().serialize();
   * await ep.tagSend(bytes, 1n); // ucxx C++ peers read it too
   * ```
   */
  serialize(): Uint8Array {
    this.#live();
    return encodeSerializedRemoteKey({
      packedRkey: this.#packed, baseAddress: this.#base, size: this.#size, access: this.#access,
    });
  }

  /**
   * Releases the unpacked key (`ucp_rkey_destroy`). Idempotent; done automatically when its endpoint closes.
   *
   * @example
   * ```ts
   * const key = createRemoteKeyFromSerialized(ep, bytes);
   * try {
   *   await ep.memGet(buffer, key, 0);
   * } finally {
   *   key.close(); // or `using key = ...`
   * }
   * ```
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const rkey = this.#rkey;
    this.#rkey = null;
    // Off the endpoint's list of live handles before UCX frees it.
    this.#endpoint?.[kKeyClosed](this, rkey);
    if (rkey !== null) {
      ucx().ucp_rkey_destroy(rkey);
      liveCounts.remoteKeys--;
    }
  }

  /** The same as `close()`, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  /** @internal The rkey handle for an RMA on `endpoint`, after the access check. */
  [kHandleFor](endpoint: Endpoint, operation: 'read' | 'write'): bigint {
    this.#live();
    if (this.#rkey === null || this.#endpoint !== endpoint) {
      throw new InvalidArgumentError(
        this.#rkey === null
          ? 'this RemoteKey was packed locally: serialize it and unpack it on the endpoint with createRemoteKeyFromSerialized'
          : 'this RemoteKey was unpacked on another endpoint',
      );
    }
    if (this.#accessKnown && this.#access !== 'read-write' && this.#access !== operation) {
      throw new RemoteAccessError(
        `the remote region was exported ${this.#access}-only: ${operation === 'write' ? 'memPut' : 'memGet'} is not allowed`,
      );
    }
    return this.#rkey;
  }

  /** @internal The remote address of [offset, offset + length), or RangeError outside the region. */
  [kAddressOf](offset: bigint, length: number): bigint {
    const end = offset + BigInt(length);
    if (end > this.#size) {
      throw new ArgumentOutOfRangeError(
        `remote access [${offset}, ${end}) is outside the ${this.#size}-byte region of this RemoteKey`,
      );
    }
    return this.#base + offset;
  }

  /**
   * @internal The remote address of [offset, offset + length) for an RMA or atomic call: a plain number
   * when the key's base and size and the offset are safe integers (BigInt arithmetic allocates), else a
   * bigint from `[kAddressOf]`, which also validates the offset and throws outside the region.
   */
  [kRemoteAddress](offset: unknown, length: number): number | bigint {
    if (typeof offset === 'number' && this.#baseNumber >= 0 && Number.isSafeInteger(offset) && offset >= 0 &&
      offset + length <= this.#sizeNumber) {
      return this.#baseNumber + offset;
    }
    return this[kAddressOf](toU64(offset, 'offset'), length);
  }

  #live(): void {
    if (this.#closed) throw new ClosedError('the RemoteKey');
  }
}
