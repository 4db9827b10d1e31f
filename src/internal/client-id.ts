/**
 * The client id a ucxx-ts worker sends with its connection requests (UCP_WORKER_PARAM_FIELD_CLIENT_ID,
 * UCP_EP_PARAMS_FLAGS_SEND_CLIENT_ID, in UCX since 1.11): 'ucxt' in its high 32 bits, then the major and
 * minor version of the client's UCX (8 bits each), then one bit that says whether the worker
 * answers fast-lane offers (its context has the 'am' feature: endpoint/fast-lane.ts), then one bit
 * that says it is a failure-detector worker (worker/detector.ts: its connection takes a lane or
 * closes), then a random number per worker (14 bits, never 0).
 * A ucxx-ts listener reads it from the request (ucp_conn_request_query) and so knows a ucxx-ts client
 * from any other, and a ucxx-ts client on another UCX release before UCX tries to read its request; ucxx
 * and UCX's own servers never look at it. UCX carries the id unchanged between 1.13 and 1.20, whose
 * request formats otherwise differ.
 */
import { randomInt } from 'node:crypto';

const MARK = 0x75637874n; // 'ucxt'

const ANSWERS_OFFERS = 0x8000n;
const DETECTOR = 0x4000n;

/**
 * A new worker's client id, for a worker on UCX [major, minor] that answers lane offers or not, and is
 * a failure detector or not.
 */
export function newClientId(release: readonly [number, number, ...number[]], answersOffers: boolean, detector = false): bigint {
  const [major, minor] = release;
  return (MARK << 32n) | (BigInt(major & 0xff) << 24n) | (BigInt(minor & 0xff) << 16n) |
    (answersOffers ? ANSWERS_OFFERS : 0n) | (detector ? DETECTOR : 0n) | BigInt(randomInt(1, 0x4000));
}

/**
 * Whether a ucxx-ts client id is a failure detector's: its connection exists only to carry a fast
 * lane's failure detection, so the listener accepts it on its own detector and never hands it out
 * without a lane.
 */
export function isDetectorClientId(id: bigint): boolean {
  return (id & DETECTOR) !== 0n;
}

/**
 * Whether a ucxx-ts client id says that its worker answers fast-lane offers: one without the 'am'
 * feature has no handler for them, and UCX would print a warning and a backtrace for each.
 */
export function answersLaneOffers(id: bigint): boolean {
  return (id & ANSWERS_OFFERS) !== 0n;
}

/** Whether a client id (0 when the client sent none) is a ucxx-ts worker's. */
export function isUcxxTsClientId(id: bigint): boolean {
  return id >> 32n === MARK;
}

/** The [major, minor] UCX release a ucxx-ts client id names. */
export function clientIdRelease(id: bigint): [number, number] {
  return [Number((id >> 24n) & 0xffn), Number((id >> 16n) & 0xffn)];
}
