/**
 * FFI declarations of the libucp/libucs functions ucxx-ts calls, and the prototypes of the C callbacks it
 * registers. Every pointer is declared `void *` (koffi passes a Buffer/TypedArray as its data pointer and a
 * bigint as an address) and every `ucs_status_t` as `int8_t` (a packed one-byte enum).
 */
import koffi from 'koffi';
import { loadLibraries } from './library.js';
import { selectProfile } from './ucx-versions.js';

/** An address as koffi returns it: a bigint, or null for NULL. */
export type Ptr = bigint | null;
/** What a `void *` argument accepts: an address, NULL, or JS memory (passed as its data pointer). */
export type PtrArg = bigint | null | ArrayBufferView | ArrayBuffer | SharedArrayBuffer;
/**
 * An address as a callback receives it: a `uintptr_t`, so a number (0 for NULL), which costs no BigInt
 * allocation per pointer. User-space addresses on x86-64 stay below 2^47, exact in a double; koffi would
 * hand a larger one over as a bigint, which every `uintptr_t` argument below accepts too.
 */
export type Address = number | bigint;

/** The typed surface of the loaded libraries. */
export interface UcxFunctions {
  ucp_get_version(major: Buffer, minor: Buffer, release: Buffer): void;
  ucs_status_string(status: number): string;
  ucs_global_opts_get_value(name: string, value: Buffer, max: number): number;
  ucs_global_opts_set_value(name: string, value: string): number;

  ucp_config_read(envPrefix: string | null, filename: string | null, configOut: Buffer): number;
  ucp_config_release(config: Ptr): void;
  ucp_config_modify(config: Ptr, name: string, value: string): number;
  ucp_config_print(config: Ptr, stream: Ptr, title: string | null, flags: number): void;
  ucp_init_version(major: number, minor: number, params: Buffer, config: Ptr, contextOut: Buffer): number;
  ucp_cleanup(context: Ptr): void;
  ucp_context_query(context: Ptr, attr: Buffer): number;

  ucp_worker_create(context: Ptr, params: Buffer, workerOut: Buffer): number;
  ucp_worker_destroy(worker: Ptr): void;
  ucp_worker_query(worker: Ptr, attr: Buffer): number;
  ucp_worker_print_info(worker: Ptr, stream: Ptr): void;
  ucp_worker_release_address(worker: Ptr, address: Ptr): void;
  ucp_worker_progress(worker: Ptr): number;
  ucp_worker_get_efd(worker: Ptr, fdOut: Buffer): number;
  ucp_worker_arm(worker: Ptr): number;
  ucp_worker_signal(worker: Ptr): number;
  ucp_worker_flush_nbx(worker: Ptr, param: PtrArg): Ptr;
  ucp_worker_fence(worker: Ptr): number;

  ucp_listener_create(worker: Ptr, params: Buffer, listenerOut: Buffer): number;
  ucp_listener_destroy(listener: Ptr): void;
  ucp_listener_query(listener: Ptr, attr: Buffer): number;
  ucp_listener_reject(listener: Ptr, connRequest: Ptr): number;
  ucp_conn_request_query(connRequest: Ptr, attr: Buffer): number;

  ucp_ep_create(worker: Ptr, params: Buffer, epOut: Buffer): number;
  ucp_ep_close_nbx(ep: Ptr, param: PtrArg): Ptr;
  ucp_ep_flush_nbx(ep: Ptr, param: PtrArg): Ptr;
  ucp_ep_print_info(ep: Ptr, stream: Ptr): void;
  ucp_ep_query(ep: Ptr, attr: Buffer): number;

  ucp_mem_map(context: Ptr, params: Buffer, memhOut: Buffer): number;
  ucp_mem_unmap(context: Ptr, memh: Ptr): number;
  ucp_mem_query(memh: Ptr, attr: Buffer): number;
  ucp_rkey_pack(context: Ptr, memh: Ptr, bufferOut: Buffer, sizeOut: Buffer): number;
  ucp_rkey_buffer_release(buffer: Ptr): void;
  ucp_ep_rkey_unpack(ep: Ptr, packed: PtrArg, rkeyOut: Buffer): number;
  ucp_rkey_destroy(rkey: Ptr): void;
  ucp_rkey_ptr(rkey: Ptr, remoteAddr: bigint, addressOut: Buffer): number;

  ucp_put_nbx(ep: Ptr, buffer: PtrArg, count: number, remoteAddr: bigint | number, rkey: Ptr, param: PtrArg): Ptr;
  ucp_get_nbx(ep: Ptr, buffer: PtrArg, count: number, remoteAddr: bigint | number, rkey: Ptr, param: PtrArg): Ptr;

  ucp_tag_send_nbx(ep: Ptr, buffer: PtrArg, count: number, tag: bigint, param: PtrArg): Ptr;
  ucp_tag_send_sync_nbx(ep: Ptr, buffer: PtrArg, count: number, tag: bigint, param: PtrArg): Ptr;
  ucp_tag_recv_nbx(worker: Ptr, buffer: PtrArg, count: number, tag: bigint, mask: bigint, param: PtrArg): Ptr;

  ucp_tag_probe_nb(worker: Ptr, tag: bigint, mask: bigint, remove: number, info: Buffer): Ptr;
  ucp_tag_msg_recv_nbx(worker: Ptr, buffer: PtrArg, count: number, message: Ptr, param: PtrArg): Ptr;

  ucp_stream_send_nbx(ep: Ptr, buffer: PtrArg, count: number, param: PtrArg): Ptr;
  ucp_stream_recv_nbx(ep: Ptr, buffer: PtrArg, count: number, lengthOut: PtrArg, param: PtrArg): Ptr;
  ucp_stream_recv_data_nb(ep: Ptr, lengthOut: PtrArg): Ptr;
  ucp_stream_data_release(ep: Ptr, data: Ptr): void;
  ucp_stream_worker_poll(worker: Ptr, pollEps: Buffer, maxEps: number, flags: number): number;

  ucp_worker_set_am_recv_handler(worker: Ptr, param: Buffer): number;
  ucp_am_send_nbx(ep: Ptr, id: number, header: PtrArg, headerLength: number, buffer: PtrArg, count: number, param: PtrArg): Ptr;
  ucp_am_recv_data_nbx(worker: Ptr, dataDesc: Ptr, buffer: PtrArg, count: number, param: PtrArg): Ptr;
  ucp_am_data_release(worker: Ptr, data: Ptr): void;

  ucp_atomic_op_nbx(ep: Ptr, opcode: number, buffer: PtrArg, count: number, remoteAddr: bigint | number, rkey: Ptr, param: PtrArg): Ptr;

  ucp_request_cancel(worker: Ptr, request: Ptr): void;
  ucp_request_free(request: Address): void;
  ucp_request_check_status(request: Ptr): number;

  /** Declared per version (UcxProfile.printAllOptsHasFilter); called with a NULL filter where it has one. */
  ucs_config_parser_print_all_opts(stream: Ptr, prefix: string, flags: number, list: Ptr): void;
  /** The address of libucs's `ucs_config_global_list` (every registered configuration table). */
  ucs_config_global_list: bigint;

  ucp_context_print_info(context: Ptr, stream: Ptr): void;

  shmat(shmid: number, address: Ptr, flags: number): Ptr;
  shmdt(address: Ptr): number;
  open_memstream(bufferOut: Buffer, sizeOut: Buffer): Ptr;
  fclose(stream: Ptr): number;
  free(pointer: Ptr): void;
  malloc(size: number): Ptr;
  shutdown(fd: number, how: number): number;
  /** Copies between addresses (a JS buffer's from `addressOf`): cheaper than a koffi view plus a copy. */
  memcpy(destination: Address, source: Address, length: number): void;
}

/**
 * The C callback prototypes ucxx-ts registers (once each, dispatching on `user_data`/`arg`). Their
 * pointers are `uintptr_t` (see Address): a `void *` argument arrives as a BigInt, one allocation and
 * conversion per pointer, per completion or message.
 */
export const callbackTypes = {
  send: koffi.pointer(koffi.proto('void ucxx_send_cb(uintptr_t request, int8_t status, uintptr_t user_data)')),
  tagRecv: koffi.pointer(
    koffi.proto('void ucxx_tag_recv_cb(uintptr_t request, int8_t status, uintptr_t info, uintptr_t user_data)'),
  ),
  streamRecv: koffi.pointer(
    koffi.proto('void ucxx_stream_recv_cb(uintptr_t request, int8_t status, size_t length, uintptr_t user_data)'),
  ),
  epError: koffi.pointer(koffi.proto('void ucxx_ep_err_cb(uintptr_t arg, void *ep, int8_t status)')),
  connRequest: koffi.pointer(koffi.proto('void ucxx_conn_cb(void *conn_request, uintptr_t arg)')),
  amRecv: koffi.pointer(koffi.proto(
    'int8_t ucxx_am_recv_cb(uintptr_t arg, uintptr_t header, size_t header_length, uintptr_t data, size_t length, uintptr_t param)',
  )),
} as const;

export type CallbackKind = keyof typeof callbackTypes;

const SIGNATURES: Record<'ucp' | 'ucs' | 'libc', readonly string[]> = {
  ucs: [
    'const char *ucs_status_string(int8_t status)',
    'int8_t ucs_global_opts_get_value(const char *name, void *value, size_t max)',
    'int8_t ucs_global_opts_set_value(const char *name, const char *value)',
  ],
  ucp: [
    'void ucp_get_version(void *major, void *minor, void *release)',
    'int8_t ucp_config_read(const char *env_prefix, const char *filename, void *config_p)',
    'void ucp_config_release(void *config)',
    'int8_t ucp_config_modify(void *config, const char *name, const char *value)',
    'void ucp_config_print(void *config, void *stream, const char *title, uint32_t print_flags)',
    'int8_t ucp_init_version(uint32_t api_major, uint32_t api_minor, void *params, void *config, void *context_p)',
    'void ucp_cleanup(void *context)',
    'int8_t ucp_context_query(void *context, void *attr)',
    'void ucp_context_print_info(void *context, void *stream)',
    'int8_t ucp_worker_create(void *context, void *params, void *worker_p)',
    'void ucp_worker_destroy(void *worker)',
    'int8_t ucp_worker_query(void *worker, void *attr)',
    'void ucp_worker_print_info(void *worker, void *stream)',
    'void ucp_worker_release_address(void *worker, void *address)',
    'uint32_t ucp_worker_progress(void *worker)',
    'int8_t ucp_worker_get_efd(void *worker, void *fd)',
    'int8_t ucp_worker_arm(void *worker)',
    'int8_t ucp_worker_signal(void *worker)',
    'void *ucp_worker_flush_nbx(void *worker, void *param)',
    'int8_t ucp_worker_fence(void *worker)',
    'int8_t ucp_listener_create(void *worker, void *params, void *listener_p)',
    'void ucp_listener_destroy(void *listener)',
    'int8_t ucp_listener_query(void *listener, void *attr)',
    'int8_t ucp_listener_reject(void *listener, void *conn_request)',
    'int8_t ucp_conn_request_query(void *conn_request, void *attr)',
    'int8_t ucp_ep_create(void *worker, void *params, void *ep_p)',
    'void *ucp_ep_close_nbx(void *ep, void *param)',
    'void *ucp_ep_flush_nbx(void *ep, void *param)',
    'void ucp_ep_print_info(void *ep, void *stream)',
    'int8_t ucp_ep_query(void *ep, void *attr)',
    'int8_t ucp_mem_map(void *context, void *params, void *memh_p)',
    'int8_t ucp_mem_unmap(void *context, void *memh)',
    'int8_t ucp_mem_query(void *memh, void *attr)',
    'int8_t ucp_rkey_pack(void *context, void *memh, void *rkey_buffer_p, void *size_p)',
    'void ucp_rkey_buffer_release(void *rkey_buffer)',
    'int8_t ucp_ep_rkey_unpack(void *ep, void *rkey_buffer, void *rkey_p)',
    'void ucp_rkey_destroy(void *rkey)',
    'int8_t ucp_rkey_ptr(void *rkey, uint64_t raddr, void *addr_p)',
    'void *ucp_put_nbx(void *ep, void *buffer, size_t count, uint64_t remote_addr, void *rkey, void *param)',
    'void *ucp_get_nbx(void *ep, void *buffer, size_t count, uint64_t remote_addr, void *rkey, void *param)',
    'void *ucp_tag_send_nbx(void *ep, void *buffer, size_t count, uint64_t tag, void *param)',
    'void *ucp_tag_send_sync_nbx(void *ep, void *buffer, size_t count, uint64_t tag, void *param)',
    'void *ucp_tag_recv_nbx(void *worker, void *buffer, size_t count, uint64_t tag, uint64_t tag_mask, void *param)',
    'void *ucp_tag_probe_nb(void *worker, uint64_t tag, uint64_t tag_mask, int remove, void *info)',
    'void *ucp_tag_msg_recv_nbx(void *worker, void *buffer, size_t count, void *message, void *param)',
    'void *ucp_stream_send_nbx(void *ep, void *buffer, size_t count, void *param)',
    'void *ucp_stream_recv_nbx(void *ep, void *buffer, size_t count, void *length, void *param)',
    'void *ucp_stream_recv_data_nb(void *ep, void *length)',
    'void ucp_stream_data_release(void *ep, void *data)',
    'int64_t ucp_stream_worker_poll(void *worker, void *poll_eps, size_t max_eps, unsigned int flags)',
    'int8_t ucp_worker_set_am_recv_handler(void *worker, void *param)',
    'void *ucp_am_send_nbx(void *ep, uint32_t id, void *header, size_t header_length, void *buffer, size_t count, void *param)',
    'void *ucp_am_recv_data_nbx(void *worker, void *data_desc, void *buffer, size_t count, void *param)',
    'void ucp_am_data_release(void *worker, void *data)',
    'void *ucp_atomic_op_nbx(void *ep, uint32_t opcode, void *buffer, size_t count, uint64_t remote_addr, void *rkey, void *param)',
    'void ucp_request_cancel(void *worker, void *request)',
    // uintptr_t: called with the addresses completion callbacks receive as numbers.
    'void ucp_request_free(uintptr_t request)',
    'int8_t ucp_request_check_status(void *request)',
  ],
  libc: [
    'void *open_memstream(void *ptr, void *sizeloc)',
    'void *shmat(int shmid, void *shmaddr, int shmflg)',
    'int shmdt(void *shmaddr)',
    'int fclose(void *stream)',
    'void free(void *ptr)',
    'void *malloc(size_t size)',
    'int shutdown(int fd, int how)',
    // Declared returning void: the returned pointer would cost a BigInt per call.
    // Addresses as numbers: koffi unwraps a TypedArray argument through several V8 calls.
    'void memcpy(uintptr_t dest, uintptr_t src, size_t n)',
  ],
};

function nameOf(signature: string): string {
  const match = /([A-Za-z_][A-Za-z0-9_]*)\s*\(/.exec(signature);
  if (match?.[1] === undefined) throw new Error(`bad FFI signature: ${signature}`);
  return match[1];
}

/** Loads the libraries and declares every function. Throws UcxLibraryNotFoundError when UCX is missing. */
export function declareFunctions(): UcxFunctions {
  const libs = loadLibraries();
  // The version first, through a call that takes no struct: nothing else is declared or called on a
  // libucp whose layouts may differ.
  const getVersion = libs.ucp.func('void ucp_get_version(_Out_ uint32_t *major, _Out_ uint32_t *minor, _Out_ uint32_t *release)');
  const cells = [[0], [0], [0]] as [number[], number[], number[]];
  getVersion(cells[0], cells[1], cells[2]);
  const profile = selectProfile([cells[0][0] ?? 0, cells[1][0] ?? 0, cells[2][0] ?? 0]);
  const out: Record<string, unknown> = {};
  const printAll = libs.ucs.func('void ucs_config_parser_print_all_opts(void *stream, const char *prefix, ' +
    `uint32_t flags, void *list${profile.printAllOptsHasFilter ? ', const char *filter' : ''})`);
  out['ucs_config_parser_print_all_opts'] = profile.printAllOptsHasFilter
    ? (stream: Ptr, prefix: string, flags: number, list: Ptr) => printAll(stream, prefix, flags, list, null)
    : printAll;
  for (const [lib, signatures] of Object.entries(SIGNATURES) as ['ucp' | 'ucs' | 'libc', readonly string[]][]) {
    for (const signature of signatures) out[nameOf(signature)] = libs[lib].func(signature);
  }
  out['ucs_config_global_list'] = libs.ucs.symbol('ucs_config_global_list');
  // Built by keyed stores, `out` is a dictionary-mode object, so every `ucx().fn` on the hot path would be
  // a hash lookup (a generic LoadIC, ~5% of a tag send + receive). A spread copy has fast properties.
  return Object.freeze({ ...out }) as unknown as UcxFunctions;
}
