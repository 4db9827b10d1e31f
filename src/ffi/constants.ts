/**
 * Flags and enum values of the UCP 1.13 API that ucxx-ts uses. Every value here is checked against the
 * installed headers by the layout probe test (test/layout-probe.test.ts), so a name must be the C name.
 */

/** The UCP API version passed to `ucp_init_version` (ucp_init is static inline and not exported). */
export const UCP_API_MAJOR = 1;
export const UCP_API_MINOR = 13;

const bit = (n: number): bigint => 1n << BigInt(n);

export const CONSTANTS = {
  // ucp_params_t.field_mask
  UCP_PARAM_FIELD_FEATURES: bit(0),
  UCP_PARAM_FIELD_REQUEST_SIZE: bit(1),
  UCP_PARAM_FIELD_TAG_SENDER_MASK: bit(4),
  UCP_PARAM_FIELD_MT_WORKERS_SHARED: bit(5),
  UCP_PARAM_FIELD_ESTIMATED_NUM_EPS: bit(6),
  UCP_PARAM_FIELD_NAME: bit(8),

  // ucp_feature
  UCP_FEATURE_TAG: bit(0),
  UCP_FEATURE_RMA: bit(1),
  UCP_FEATURE_AMO32: bit(2),
  UCP_FEATURE_AMO64: bit(3),
  UCP_FEATURE_WAKEUP: bit(4),
  UCP_FEATURE_STREAM: bit(5),
  UCP_FEATURE_AM: bit(6),

  // ucp_worker_params_t.field_mask
  UCP_WORKER_PARAM_FIELD_THREAD_MODE: bit(0),
  UCP_WORKER_PARAM_FIELD_EVENTS: bit(2),
  UCP_WORKER_PARAM_FIELD_USER_DATA: bit(3),
  UCP_WORKER_PARAM_FIELD_NAME: bit(6),
  UCP_WORKER_PARAM_FIELD_CLIENT_ID: bit(8),

  // ucs_thread_mode_t
  UCS_THREAD_MODE_SINGLE: 0n,
  UCS_THREAD_MODE_SERIALIZED: 1n,
  UCS_THREAD_MODE_MULTI: 2n,

  // ucp_worker_attr_t.field_mask
  UCP_WORKER_ATTR_FIELD_THREAD_MODE: bit(0),
  UCP_WORKER_ATTR_FIELD_ADDRESS: bit(1),
  UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER: bit(3),
  UCP_WORKER_ATTR_FIELD_NAME: bit(4),

  // ucp_listener_params_t.field_mask
  UCP_LISTENER_PARAM_FIELD_SOCK_ADDR: bit(0),
  UCP_LISTENER_PARAM_FIELD_CONN_HANDLER: bit(2),
  UCP_LISTENER_ATTR_FIELD_SOCKADDR: bit(0),
  UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR: bit(0),
  UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ID: bit(1),

  // ucp_ep_params_t.field_mask and flags
  UCP_EP_PARAM_FIELD_REMOTE_ADDRESS: bit(0),
  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE: bit(1),
  UCP_EP_PARAM_FIELD_ERR_HANDLER: bit(2),
  UCP_EP_PARAM_FIELD_USER_DATA: bit(3),
  UCP_EP_PARAM_FIELD_SOCK_ADDR: bit(4),
  UCP_EP_PARAM_FIELD_FLAGS: bit(5),
  UCP_EP_PARAM_FIELD_CONN_REQUEST: bit(6),
  UCP_EP_PARAM_FIELD_NAME: bit(7),
  UCP_EP_PARAMS_FLAGS_CLIENT_SERVER: bit(0),
  UCP_EP_PARAMS_FLAGS_SEND_CLIENT_ID: bit(2),
  UCP_ERR_HANDLING_MODE_NONE: 0n,
  UCP_ERR_HANDLING_MODE_PEER: 1n,
  UCP_EP_CLOSE_FLAG_FORCE: bit(0),
  UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR: bit(1),
  UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR: bit(2),

  // ucp_mem_map_params_t
  UCP_MEM_MAP_PARAM_FIELD_ADDRESS: bit(0),
  UCP_MEM_MAP_PARAM_FIELD_LENGTH: bit(1),
  UCP_MEM_MAP_PARAM_FIELD_FLAGS: bit(2),
  UCP_MEM_MAP_PARAM_FIELD_PROT: bit(3),
  UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE: bit(4),
  UCP_MEM_MAP_NONBLOCK: bit(0),
  UCP_MEM_MAP_ALLOCATE: bit(1),
  UCP_MEM_MAP_PROT_LOCAL_READ: bit(0),
  UCP_MEM_MAP_PROT_LOCAL_WRITE: bit(1),
  UCP_MEM_MAP_PROT_REMOTE_READ: bit(8),
  UCP_MEM_MAP_PROT_REMOTE_WRITE: bit(9),
  UCP_MEM_ATTR_FIELD_ADDRESS: bit(0),
  UCP_MEM_ATTR_FIELD_LENGTH: bit(1),
  UCP_MEM_ATTR_FIELD_MEM_TYPE: bit(2),
  UCS_MEMORY_TYPE_HOST: 0n,

  // ucp_context_attr_t.field_mask
  UCP_ATTR_FIELD_REQUEST_SIZE: bit(0),

  // ucp_request_param_t.op_attr_mask
  UCP_OP_ATTR_FIELD_REQUEST: bit(0),
  UCP_OP_ATTR_FIELD_CALLBACK: bit(1),
  UCP_OP_ATTR_FIELD_USER_DATA: bit(2),
  UCP_OP_ATTR_FIELD_DATATYPE: bit(3),
  UCP_OP_ATTR_FIELD_FLAGS: bit(4),
  UCP_OP_ATTR_FIELD_REPLY_BUFFER: bit(5),
  UCP_OP_ATTR_FIELD_MEMORY_TYPE: bit(6),
  UCP_OP_ATTR_FIELD_RECV_INFO: bit(7),
  UCP_OP_ATTR_FIELD_MEMH: bit(8),
  UCP_OP_ATTR_FLAG_NO_IMM_CMPL: bit(16),

  // ucp_datatype_t: ucp_dt_make_contig(1) and UCP_DATATYPE_IOV
  UCP_DATATYPE_CONTIG_1: 8n,
  UCP_DATATYPE_IOV: 2n,

  // active messages
  UCP_AM_FLAG_WHOLE_MSG: bit(0),
  UCP_AM_FLAG_PERSISTENT_DATA: bit(1),
  UCP_AM_SEND_FLAG_REPLY: bit(0),
  UCP_AM_SEND_FLAG_EAGER: bit(1),
  UCP_AM_SEND_FLAG_RNDV: bit(2),
  UCP_AM_RECV_ATTR_FIELD_REPLY_EP: bit(0),
  UCP_AM_RECV_ATTR_FLAG_DATA: bit(16),
  UCP_AM_RECV_ATTR_FLAG_RNDV: bit(17),
  UCP_AM_HANDLER_PARAM_FIELD_ID: bit(0),
  UCP_AM_HANDLER_PARAM_FIELD_FLAGS: bit(1),
  UCP_AM_HANDLER_PARAM_FIELD_CB: bit(2),
  UCP_AM_HANDLER_PARAM_FIELD_ARG: bit(3),

  // ucp_atomic_op_t
  UCP_ATOMIC_OP_ADD: 0n,
  UCP_ATOMIC_OP_SWAP: 1n,
  UCP_ATOMIC_OP_CSWAP: 2n,
  UCP_ATOMIC_OP_AND: 3n,
  UCP_ATOMIC_OP_OR: 4n,
  UCP_ATOMIC_OP_XOR: 5n,

  // stream
  UCP_STREAM_RECV_FLAG_WAITALL: bit(0),

  // ucs_config_print_flags_t
  UCS_CONFIG_PRINT_CONFIG: bit(0),
  UCS_CONFIG_PRINT_HIDDEN: bit(3),
} as const;

export type ConstantName = keyof typeof CONSTANTS;

/** A constant as a JS number (all of them fit in 2^53). */
export function c(name: ConstantName): number {
  return Number(CONSTANTS[name]);
}
