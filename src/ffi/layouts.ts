/**
 * Struct layouts of the UCP 1.13 parameter and attribute structs that ucxx-ts fills in or reads.
 *
 * Declared with koffi (which applies the C alignment rules) and flattened into offset tables, so that the
 * object model can write a parameter block once into a Buffer and update single fields in place on the hot
 * path. The layout probe test compiles a C program against the installed headers and checks every size
 * and offset here. Every `*_params_t` only grows at its end and is gated by `field_mask`: a zeroed block
 * with only the bits we fill stays valid on newer libucp.
 */
import koffi from 'koffi';

/** A flattened struct layout: total size and the byte offset of every (possibly nested, dotted) field. */
export interface Layout<F extends string = string> {
  readonly name: string;
  readonly size: number;
  readonly offsets: Readonly<Record<F, number>>;
}

type KoffiType = ReturnType<typeof koffi.struct>;

function flatten(type: KoffiType, prefix: string, base: number, out: Record<string, number>): void {
  for (const [name, member] of Object.entries(type.members ?? {})) {
    const path = prefix + name;
    out[path] = base + member.offset;
    if (member.type.primitive === 'Record' || member.type.primitive === 'Union') {
      flatten(member.type, path + '.', base + member.offset, out);
    }
  }
}

function layout<F extends string>(cName: string, type: KoffiType): Layout<F> {
  const offsets: Record<string, number> = {};
  flatten(type, '', 0, offsets);
  return Object.freeze({ name: cName, size: koffi.sizeof(type), offsets: Object.freeze(offsets) }) as Layout<F>;
}

// ucs_status_t and the C enums used as struct fields. ucs_status_t is a packed 1-byte enum; the others
// are plain (4-byte) enums.
const status = 'int8_t';
const cenum = 'uint32_t';
const ptr = 'void *';

const sockAddr = koffi.struct('ucs_sock_addr_t', { addr: ptr, addrlen: 'uint32_t' });
const errHandler = koffi.struct('ucp_err_handler_t', { cb: ptr, arg: ptr });
const connHandler = koffi.struct('ucp_listener_conn_handler_t', { cb: ptr, arg: ptr });
const acceptHandler = koffi.struct('ucp_listener_accept_handler_t', { cb: ptr, arg: ptr });
const sockaddrStorage = koffi.struct('ucxx_sockaddr_storage', {
  ss_family: 'uint16_t',
  __ss_padding: koffi.array('uint8_t', 118),
  __ss_align: 'uint64_t',
});

export const ucp_params_t = layout<
  'field_mask' | 'features' | 'request_size' | 'request_init' | 'request_cleanup' | 'tag_sender_mask' |
  'mt_workers_shared' | 'estimated_num_eps' | 'estimated_num_ppn' | 'name'
>('ucp_params_t', koffi.struct('ucp_params_t', {
  field_mask: 'uint64_t',
  features: 'uint64_t',
  request_size: 'size_t',
  request_init: ptr,
  request_cleanup: ptr,
  tag_sender_mask: 'uint64_t',
  mt_workers_shared: 'int',
  estimated_num_eps: 'size_t',
  estimated_num_ppn: 'size_t',
  name: ptr,
}));

export const ucp_worker_params_t = layout<
  'field_mask' | 'thread_mode' | 'cpu_mask' | 'events' | 'user_data' | 'event_fd' | 'flags' | 'name' |
  'am_alignment' | 'client_id'
>('ucp_worker_params_t', koffi.struct('ucp_worker_params_t', {
  field_mask: 'uint64_t',
  thread_mode: cenum,
  cpu_mask: koffi.array('uint64_t', 16),
  events: 'unsigned int',
  user_data: ptr,
  event_fd: 'int',
  flags: 'uint64_t',
  name: ptr,
  am_alignment: 'size_t',
  client_id: 'uint64_t',
}));

export const ucp_context_attr_t = layout<'field_mask' | 'request_size' | 'thread_mode' | 'memory_types' | 'name'>(
  'ucp_context_attr_t', koffi.struct('ucp_context_attr_t', {
    field_mask: 'uint64_t',
    request_size: 'size_t',
    thread_mode: cenum,
    memory_types: 'uint64_t',
    name: koffi.array('char', 32),
  }),
);

export const ucp_worker_attr_t = layout<
  'field_mask' | 'thread_mode' | 'address_flags' | 'address' | 'address_length' | 'max_am_header' | 'name' |
  'max_debug_string'
>('ucp_worker_attr_t', koffi.struct('ucp_worker_attr_t', {
  field_mask: 'uint64_t',
  thread_mode: cenum,
  address_flags: 'uint32_t',
  address: ptr,
  address_length: 'size_t',
  max_am_header: 'size_t',
  name: koffi.array('char', 32),
  max_debug_string: 'size_t',
}));

export const ucp_ep_params_t = layout<
  'field_mask' | 'address' | 'err_mode' | 'err_handler' | 'err_handler.cb' | 'err_handler.arg' | 'user_data' |
  'flags' | 'sockaddr' | 'sockaddr.addr' | 'sockaddr.addrlen' | 'conn_request' | 'name' | 'local_sockaddr' |
  'local_sockaddr.addr' | 'local_sockaddr.addrlen'
>('ucp_ep_params_t', koffi.struct('ucp_ep_params_t', {
  field_mask: 'uint64_t',
  address: ptr,
  err_mode: cenum,
  err_handler: errHandler,
  user_data: ptr,
  flags: 'unsigned int',
  sockaddr: sockAddr,
  conn_request: ptr,
  name: ptr,
  local_sockaddr: sockAddr,
}));

export const ucp_listener_params_t = layout<
  'field_mask' | 'sockaddr' | 'sockaddr.addr' | 'sockaddr.addrlen' | 'accept_handler' | 'accept_handler.cb' |
  'accept_handler.arg' | 'conn_handler' | 'conn_handler.cb' | 'conn_handler.arg'
>('ucp_listener_params_t', koffi.struct('ucp_listener_params_t', {
  field_mask: 'uint64_t',
  sockaddr: sockAddr,
  accept_handler: acceptHandler,
  conn_handler: connHandler,
}));

export const ucp_listener_attr_t = layout<'field_mask' | 'sockaddr'>(
  'ucp_listener_attr_t',
  koffi.struct('ucp_listener_attr_t', { field_mask: 'uint64_t', sockaddr: sockaddrStorage }),
);

export const ucp_conn_request_attr_t = layout<'field_mask' | 'client_address' | 'client_id'>(
  'ucp_conn_request_attr_t',
  koffi.struct('ucp_conn_request_attr_t', {
    field_mask: 'uint64_t',
    client_address: sockaddrStorage,
    client_id: 'uint64_t',
  }),
);

export const ucp_ep_attr_t = layout<'field_mask' | 'name' | 'local_sockaddr' | 'remote_sockaddr'>(
  'ucp_ep_attr_t',
  koffi.struct('ucp_ep_attr_t', {
    field_mask: 'uint64_t',
    name: koffi.array('char', 32), // UCP_ENTITY_NAME_MAX
    local_sockaddr: sockaddrStorage,
    remote_sockaddr: sockaddrStorage,
  }),
);

export const ucp_mem_map_params_t = layout<
  'field_mask' | 'address' | 'length' | 'flags' | 'prot' | 'memory_type'
>('ucp_mem_map_params_t', koffi.struct('ucp_mem_map_params_t', {
  field_mask: 'uint64_t',
  address: ptr,
  length: 'size_t',
  flags: 'unsigned int',
  prot: 'unsigned int',
  memory_type: cenum,
}));

export const ucp_mem_attr_t = layout<'field_mask' | 'address' | 'length' | 'mem_type'>(
  'ucp_mem_attr_t',
  koffi.struct('ucp_mem_attr_t', { field_mask: 'uint64_t', address: ptr, length: 'size_t', mem_type: cenum }),
);

export const ucp_request_param_t = layout<
  'op_attr_mask' | 'flags' | 'request' | 'cb' | 'cb.send' | 'cb.recv' | 'cb.recv_stream' | 'cb.recv_am' |
  'datatype' | 'user_data' | 'reply_buffer' | 'memory_type' | 'recv_info' | 'recv_info.length' |
  'recv_info.tag_info' | 'memh'
>('ucp_request_param_t', koffi.struct('ucp_request_param_t', {
  op_attr_mask: 'uint32_t',
  flags: 'uint32_t',
  request: ptr,
  cb: koffi.union('ucxx_request_param_cb', { send: ptr, recv: ptr, recv_stream: ptr, recv_am: ptr }),
  datatype: 'uint64_t',
  user_data: ptr,
  reply_buffer: ptr,
  memory_type: cenum,
  recv_info: koffi.union('ucxx_request_param_recv_info', { length: ptr, tag_info: ptr }),
  memh: ptr,
}));

export const ucp_tag_recv_info_t = layout<'sender_tag' | 'length'>(
  'ucp_tag_recv_info_t',
  koffi.struct('ucp_tag_recv_info_t', { sender_tag: 'uint64_t', length: 'size_t' }),
);

export const ucp_am_handler_param_t = layout<'field_mask' | 'id' | 'flags' | 'cb' | 'arg'>(
  'ucp_am_handler_param_t',
  koffi.struct('ucp_am_handler_param_t', {
    field_mask: 'uint64_t',
    id: 'unsigned int',
    flags: 'uint32_t',
    cb: ptr,
    arg: ptr,
  }),
);

export const ucp_am_recv_param_t = layout<'recv_attr' | 'reply_ep'>(
  'ucp_am_recv_param_t',
  koffi.struct('ucp_am_recv_param_t', { recv_attr: 'uint64_t', reply_ep: ptr }),
);

export const ucp_dt_iov_t = layout<'buffer' | 'length'>(
  'ucp_dt_iov_t',
  koffi.struct('ucp_dt_iov_t', { buffer: ptr, length: 'size_t' }),
);

export const ucp_stream_poll_ep_t = layout<'ep' | 'user_data' | 'flags'>(
  'ucp_stream_poll_ep_t',
  koffi.struct('ucp_stream_poll_ep_t', {
    ep: ptr, user_data: ptr, flags: 'unsigned int', reserved: koffi.array('uint8_t', 16),
  }),
);

/** Every layout, for the probe test. */
export const LAYOUTS: readonly Layout[] = [
  ucp_params_t, ucp_context_attr_t, ucp_worker_params_t, ucp_worker_attr_t, ucp_ep_params_t, ucp_listener_params_t,
  ucp_listener_attr_t, ucp_conn_request_attr_t, ucp_ep_attr_t, ucp_mem_map_params_t, ucp_mem_attr_t, ucp_request_param_t,
  ucp_tag_recv_info_t, ucp_am_handler_param_t, ucp_am_recv_param_t, ucp_dt_iov_t, ucp_stream_poll_ep_t,
];

/** The size of `ucs_status_t` as declared in every signature and field. */
export const STATUS_TYPE = status;
