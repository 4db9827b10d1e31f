/**
 * The Duplex's end-of-stream marker. UCP streams have no one-direction close, and stream bytes and
 * active messages are not ordered with each other, so `end()` of a Duplex sends an active message on
 * the reserved id (AM_ID_STREAM_END) whose 8-byte header is the number of stream bytes that Duplex
 * wrote (u64, little-endian), sent with `reply: true` so that the receiver knows its endpoint. The
 * receiving Duplex ends its readable once it has read that many bytes, whichever came first.
 *
 * Every worker of a context with 'am' handles the id from its creation (see AmDispatcher); markers
 * wait per endpoint until a Duplex of that endpoint takes them, so one that arrives before the Duplex
 * exists is not lost.
 */
import type { AmMessage } from '../active-message.js';
import { AM_ID_STREAM_END } from '../am-ids.js';
import type { Endpoint } from '../endpoint.js';
import type { Request } from '../request.js';
import { kReservedAmId } from '../internal/symbols.js';

const HEADER_BYTES = 8;
/** Markers an endpoint keeps for Duplexes to come; a peer that sends more gets the extra dropped. */
const KEPT_MAX = 16;

interface EndState {
  /** Markers not yet taken by a Duplex: byte totals, oldest first. */
  readonly totals: number[];
  /** The Duplex waiting for the next marker. */
  watcher: ((total: number) => void) | null;
}

const states = new WeakMap<Endpoint, EndState>();

function stateOf(endpoint: Endpoint): EndState {
  let state = states.get(endpoint);
  if (state === undefined) states.set(endpoint, state = { totals: [], watcher: null });
  return state;
}

/**
 * @internal The reserved id's handler (inside worker progress). A marker without its endpoint (sent
 * without `reply`, or by a peer that is no ucxx-ts) or with another header is not ours: dropped.
 */
export function onStreamEndMessage(message: AmMessage): void {
  const endpoint = message.replyEndpoint;
  if (message.rendezvous) {
    message.reject();
    return;
  }
  if (endpoint === null || message.header.byteLength !== HEADER_BYTES) return;
  const view = new DataView(message.header.buffer, message.header.byteOffset, HEADER_BYTES);
  const total = Number(view.getBigUint64(0, true));
  const state = stateOf(endpoint);
  if (state.totals.length >= KEPT_MAX) return;
  state.totals.push(total);
  // Handed over after progress returns: the Duplex may post receives and push.
  queueMicrotask(() => deliver(state));
}

function deliver(state: EndState): void {
  const watcher = state.watcher;
  if (watcher === null || state.totals.length === 0) return;
  state.watcher = null;
  watcher(state.totals.shift() as number);
}

/**
 * @internal Calls `watcher` once with the byte total of the endpoint's next marker (at once, from a
 * microtask, when one is waiting). Returns a function that stops watching.
 */
export function watchStreamEnd(endpoint: Endpoint, watcher: (total: number) => void): () => void {
  const state = stateOf(endpoint);
  state.watcher = watcher;
  if (state.totals.length > 0) queueMicrotask(() => deliver(state));
  return () => {
    if (state.watcher === watcher) state.watcher = null;
  };
}

/** @internal Sends the marker: `total` stream bytes were written before it. */
export function sendStreamEnd(endpoint: Endpoint, total: number): Request<void> {
  const header = new Uint8Array(HEADER_BYTES);
  new DataView(header.buffer).setBigUint64(0, BigInt(total), true);
  const options = { protocol: 'eager' as const, reply: true, [kReservedAmId]: true };
  return endpoint.amSend(AM_ID_STREAM_END, header, null, options);
}
