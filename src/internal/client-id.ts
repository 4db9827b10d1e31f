/**
 * The client id a ucxx-ts worker sends with its connection requests (UCP_WORKER_PARAM_FIELD_CLIENT_ID,
 * UCP_EP_PARAMS_FLAGS_SEND_CLIENT_ID, in UCX since 1.11): 'ucxt' in its high 32 bits, a random number
 * per worker below. A ucxx-ts listener reads it from the request (ucp_conn_request_query) and so knows
 * a ucxx-ts client from any other; ucxx and UCX's own servers never look at it.
 */
import { randomInt } from 'node:crypto';

const MARK = 0x75637874n; // 'ucxt'

/** A new worker's client id. */
export function newClientId(): bigint {
  return (MARK << 32n) | BigInt(randomInt(1, 2 ** 32 - 1));
}

/** Whether a client id (0 when the client sent none) is a ucxx-ts worker's. */
export function isUcxxTsClientId(id: bigint): boolean {
  return id >> 32n === MARK;
}
