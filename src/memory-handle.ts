/**
 * A region of memory registered with UCX for remote access (`ucp_mem_map`), created by
 * `context.createMemoryHandle()`.
 *
 * - Without a buffer, UCX allocates the region. On one host it lives in shared memory, so a peer's
 *   puts and gets reach it one-sided, without this process doing anything (the fast path).
 *   `view()` gives a Uint8Array over it.
 * - With a buffer (ArrayBuffer, SharedArrayBuffer, TypedArray, DataView, Buffer) the caller's memory is
 *   registered; the handle keeps the buffer alive. Peers reach it through UCX's emulation or CMA, so this
 *   process must keep progressing its worker (any progress mode but 'manual' does so by itself).
 *
 * ```ts
 * using region = context.createMemoryHandle(1 << 20);
 * region.view().fill(0);
 * const serialized = region.createRemoteKey().serialize(); // send to the peer
 * ```
 */
import { kFromMemoryHandle, kLiveHandle, kMemoryHandleClosed, kPackedRkey, kUnmap } from './internal/symbols.js';
import {
  CONSTANTS, OutCell, StructBuffer, addressOf, copyFromMemory, layouts, ucx, viewOfMemory,
} from './ffi/index.js';
import { ClosedError, check } from './errors/index.js';
import { asBytes, describe, optionsObject, show } from './internal/bytes.js';
import { checkAllocatable } from './internal/shm-capacity.js';
import { RemoteKey } from './remote-key.js';
import type { Context } from './context.js';
import {
  InvalidArgumentError, ArgumentOutOfRangeError, INTERNAL, checkConstructorToken,
} from './errors/misuse.js';
import { liveCounts } from './internal/live-counts.js';

/** What a remote key for the region allows its holder to do. */
export type MemoryAccess = 'read' | 'write' | 'read-write';

/** Options of `context.createMemoryHandle()`. */
export interface MemoryHandleOptions {
  /** Remote access rights, mapped to UCX protection flags. Default 'read-write'. */
  access?: MemoryAccess;
}

const K = CONSTANTS;

const PROT: Record<MemoryAccess, bigint> = {
  'read': K.UCP_MEM_MAP_PROT_LOCAL_READ | K.UCP_MEM_MAP_PROT_LOCAL_WRITE | K.UCP_MEM_MAP_PROT_REMOTE_READ,
  'write': K.UCP_MEM_MAP_PROT_LOCAL_READ | K.UCP_MEM_MAP_PROT_LOCAL_WRITE | K.UCP_MEM_MAP_PROT_REMOTE_WRITE,
  'read-write': K.UCP_MEM_MAP_PROT_LOCAL_READ | K.UCP_MEM_MAP_PROT_LOCAL_WRITE |
    K.UCP_MEM_MAP_PROT_REMOTE_READ | K.UCP_MEM_MAP_PROT_REMOTE_WRITE,
};

/**
 * The UCX mapping behind a handle, kept apart from the handle so that it can outlive it: a view over
 * UCX-allocated memory has no finalizer of its own, so the mapping is only released once the handle is
 * closed AND every view of it has been garbage-collected. A stale view therefore never points at
 * unmapped memory.
 */
class Mapping {
  liveViews = 0;
  closed = false;
  unmapped = false;
  constructor(readonly context: Context, readonly memh: bigint) {
    liveCounts.mappings++;
  }

  release(): void {
    if (!this.closed || this.liveViews > 0 || this.unmapped) return;
    this.unmapped = true;
    liveCounts.mappings--;
    this.context[kUnmap](this.memh);
  }
}

const viewRegistry = new FinalizationRegistry<Mapping>((mapping) => {
  mapping.liveViews--;
  mapping.release();
});

/**
 * Memory that peers can reach with RMA: allocated by UCX or registered from your buffer. Made by the
 * Context; `createRemoteKey()` makes the key a peer needs.
 *
 * @example
 * ```ts
 * const region = context.createMemoryHandle(1 << 20);
 * await ep.tagSend(region.createRemoteKey().serialize(), 1n);
 * ```
 */
export class MemoryHandle {
  readonly #context: Context;
  readonly #mapping: Mapping;
  readonly #size: number;
  readonly #base: bigint;
  readonly #memoryType: number;
  readonly #access: MemoryAccess;
  readonly #allocated: boolean;
  /** The caller's memory for a registered region (kept reachable while mapped). */
  #buffer: Uint8Array | undefined;
  #view: Uint8Array | undefined;
  #closed = false;
  #packed: Uint8Array | undefined;

  /** @internal Use `context.createMemoryHandle()` (IllegalConstructorError otherwise). */
  constructor(
    token: typeof INTERNAL, context: Context, contextHandle: bigint, size: number, buffer: unknown, options: MemoryHandleOptions,
  ) {
    checkConstructorToken(token, 'MemoryHandle', 'context.createMemoryHandle()');
    if (!Number.isSafeInteger(size) || size < 1) {
      throw new ArgumentOutOfRangeError(`size must be a positive integer number of bytes, got ${show(size)}`);
    }
    options = optionsObject(options, 'createMemoryHandle options');
    const access = options.access ?? 'read-write';
    if (typeof access !== 'string' || !Object.hasOwn(PROT, access)) throw new InvalidArgumentError(`access must be 'read', 'write' or 'read-write', got ${show(access)}`);
    const params = new StructBuffer(layouts.ucp_mem_map_params_t);
    let mask = K.UCP_MEM_MAP_PARAM_FIELD_LENGTH | K.UCP_MEM_MAP_PARAM_FIELD_PROT | K.UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    params.setU64('length', size).setU32('prot', Number(PROT[access]));
    if (buffer === undefined || buffer === null) {
      checkAllocatable(size);
      params.setU32('flags', Number(K.UCP_MEM_MAP_ALLOCATE));
    } else {
      const bytes = asBytes(buffer, 'createMemoryHandle buffer');
      if (bytes.byteLength < size) {
        throw new ArgumentOutOfRangeError(`size ${size} exceeds the buffer's ${bytes.byteLength} bytes (${describe(buffer)})`);
      }
      this.#buffer = bytes.subarray(0, size);
      mask |= K.UCP_MEM_MAP_PARAM_FIELD_ADDRESS | K.UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
      params.setPtr('address', addressOf(this.#buffer)).setU32('memory_type', Number(K.UCS_MEMORY_TYPE_HOST));
    }
    params.setU64('field_mask', mask);
    const out = new OutCell();
    check(ucx().ucp_mem_map(contextHandle, params.buffer, out.reset()), `ucp_mem_map (${size} bytes)`);
    const memh = out.ptr() as bigint;
    const attr = new StructBuffer(layouts.ucp_mem_attr_t);
    attr.setU64('field_mask', K.UCP_MEM_ATTR_FIELD_ADDRESS | K.UCP_MEM_ATTR_FIELD_LENGTH | K.UCP_MEM_ATTR_FIELD_MEM_TYPE);
    const status = ucx().ucp_mem_query(memh, attr.buffer);
    if (status !== 0) {
      ucx().ucp_mem_unmap(contextHandle, memh);
      check(status, 'ucp_mem_query');
    }
    this.#context = context;
    this.#mapping = new Mapping(context, memh);
    this.#base = attr.getU64('address');
    this.#size = size;
    this.#memoryType = attr.getU32('mem_type');
    this.#access = access;
    this.#allocated = buffer === undefined || buffer === null;
  }

  /**
   * The `ucp_mem_h` handle.
   *
   * @example
   * ```ts
   * const memh = region.getHandle(); // a ucp_mem_h, for code that calls libucp itself
   * ```
   */
  getHandle(): bigint {
    this.#live();
    return this.#mapping.memh;
  }

  /**
   * The region's size in bytes.
   *
   * @example
   * ```ts
   * const region = context.createMemoryHandle(4096, Buffer.alloc(8192));
   * region.getSize(); // 4096: the first 4096 bytes of the buffer are registered
   * ```
   */
  getSize(): number {
    return this.#size;
  }

  /**
   * The region's first byte's address in this process.
   *
   * @example
   * ```ts
   * const region = context.createMemoryHandle(1 << 20);
   * console.log(`0x${region.getBaseAddress().toString(16)}`); // where the region starts in this process
   * ```
   */
  getBaseAddress(): bigint {
    return this.#base;
  }

  /**
   * The region's `ucs_memory_type_t` (0 = host).
   *
   * @example
   * ```ts
   * const kind = region.getMemoryType() === 0 ? 'host' : `memory type ${region.getMemoryType()}`;
   * ```
   */
  getMemoryType(): number {
    return this.#memoryType;
  }

  /** The remote access rights given at creation. */
  get access(): MemoryAccess {
    return this.#access;
  }

  /** True when UCX allocated the region (no buffer was given). */
  get allocated(): boolean {
    return this.#allocated;
  }

  /** True once closed. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * A Uint8Array over the region. For UCX-allocated memory the region stays mapped until the handle is
   * closed and this view is garbage-collected, so touching a view after `close()` never crashes.
   *
   * @example
   * ```ts
   * const region = context.createMemoryHandle(1 << 20);
   * const memory = region.view();
   * memory.fill(0);
   * // ... once a peer has put and flushed:
   * console.log(Buffer.from(memory.subarray(4096, 4116)).toString());
   * ```
   */
  view(): Uint8Array {
    this.#live();
    if (this.#buffer !== undefined) return this.#buffer;
    if (this.#view === undefined) {
      const arrayBuffer = viewOfMemory(this.#base, this.#size);
      this.#mapping.liveViews++;
      viewRegistry.register(arrayBuffer, this.#mapping);
      this.#view = new Uint8Array(arrayBuffer);
    }
    return this.#view;
  }

  /**
   * Packs a remote key for this region (the same as `createRemoteKeyFromMemoryHandle(this)`); its
   * `serialize()` gives the bytes to send to a peer.
   *
   * @example
   * ```ts
   * const key = region.createRemoteKey();
   * await ep.tagSend(key.serialize(), 1n); // the peer unpacks it with createRemoteKeyFromSerialized
   * ```
   */
  createRemoteKey(): RemoteKey {
    this.#live();
    return RemoteKey[kFromMemoryHandle](this);
  }

  /** @internal The packed rkey bytes (`ucp_rkey_pack`), computed once. */
  [kPackedRkey](): Uint8Array {
    this.#live();
    if (this.#packed === undefined) {
      const bufferOut = new OutCell();
      const sizeOut = new OutCell();
      check(
        ucx().ucp_rkey_pack(this.#context[kLiveHandle](), this.#mapping.memh, bufferOut.reset(), sizeOut.reset()),
        'ucp_rkey_pack',
      );
      const address = bufferOut.ptr() as bigint;
      this.#packed = new Uint8Array(copyFromMemory(address, Number(sizeOut.u64())));
      ucx().ucp_rkey_buffer_release(address);
    }
    return this.#packed;
  }

  /**
   * Unregisters the region (deferred while a view of UCX-allocated memory is still reachable). Remote
   * keys already sent stay usable by peers until then, as in UCX. Idempotent.
   *
   * @example
   * ```ts
   * const region = context.createMemoryHandle(1 << 20);
   * // ... peers done
   * region.close(); // to cut off peers that still hold its key, close their endpoints too
   * ```
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#view = undefined;
    this.#mapping.closed = true;
    this.#context[kMemoryHandleClosed](this);
    this.#mapping.release();
    this.#buffer = undefined;
  }

  /** The same as `close()`, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  #live(): void {
    if (this.#closed) throw new ClosedError('the MemoryHandle');
  }
}
