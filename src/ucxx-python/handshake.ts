/**
 * ucxx Python's peer-information exchange (python/ucxx/ucxx/_lib_async/exchange_peer_info.py), run on
 * a connected ucxx-ts Endpoint over its UCP stream:
 *
 * - each side makes a tag `hash64bits("msg_tag", 16 random bytes, ucp_ep_h)` and sends the 16-byte
 *   peer information (tag, hash64bits(tag));
 * - the listener side sends first, then receives; the client side receives first, then sends;
 * - each of the two steps must finish within the connect timeout (ucxx: 5 s, UCXPY_CONNECT_TIMEOUT);
 * - afterwards a side sends tag messages with the peer's tag and receives with its own.
 */
import { randomBytes } from 'node:crypto';
import type { Endpoint } from '../endpoint.js';
import { HandshakeError, type HandshakeFailure } from './errors.js';
import { PEER_INFO_BYTES, decodePeerInfo, encodePeerInfo, makeMsgTag } from './peer-info.js';
import { ArgumentOutOfRangeError } from '../errors/misuse.js';
import { show } from '../internal/bytes.js';

/**
 * The UCP features ucxx Python's UCXContext enables by default (python/ucxx/ucxx/_lib/libucxx.pyx).
 *
 * @example
 * ```ts
 * await using context = new Context({ features: UCXX_PYTHON_FEATURES }); // as ucxx Python's UCXContext
 * const worker = context.createWorker();
 * const ep = await worker.connect('10.0.0.2', 13337, { handshake: 'ucxx-python' });
 * ```
 */
export const UCXX_PYTHON_FEATURES = Object.freeze(['tag', 'wakeup', 'stream', 'am', 'rma'] as const);

/** ucxx Python's default connect_timeout, in ms. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5000;

export interface PeerTags {
  /** The tag this side sends with: the peer's own tag. */
  msgTagSend: bigint;
  /** The tag this side receives with: the one it made and sent. */
  msgTagRecv: bigint;
}

export function checkTimeout(value: unknown): number {
  const ms = value ?? DEFAULT_CONNECT_TIMEOUT_MS;
  if (typeof ms !== 'number' || !(ms > 0)) {
    throw new ArgumentOutOfRangeError(`connectTimeout must be a positive number of ms, got ${show(value)}`);
  }
  return ms;
}

/** A hint for a failure that mismatched UCP features explain (UCX 1.13 cannot wire up the stream). */
function featureHint(endpoint: Endpoint): string {
  const features = endpoint.worker.context.features;
  const same = features.length === UCXX_PYTHON_FEATURES.length &&
    UCXX_PYTHON_FEATURES.every((f) => features.includes(f));
  return same ? '' : ` (this Context's features [${features.join(', ')}] differ from ucxx Python's ` +
    `[${UCXX_PYTHON_FEATURES.join(', ')}]; UCX 1.13 can fail to connect streams between different feature sets)`;
}

async function sendStep(endpoint: Endpoint, bytes: Uint8Array, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new HandshakeError('timeout',
      `sending the ucxx peer information did not complete within ${timeoutMs} ms`, 0)), timeoutMs);
  });
  try {
    await Promise.race([endpoint.streamSend(bytes).promise, timeout]);
  } catch (err) {
    if (err instanceof HandshakeError) throw err;
    throw new HandshakeError('failed', `sending the ucxx peer information failed: ${(err as Error).message}` +
      featureHint(endpoint), 0, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}

/** Receives the 16 bytes piece by piece, so that a failure can say how many arrived. */
async function recvStep(endpoint: Endpoint, timeoutMs: number): Promise<Uint8Array> {
  const buffer = new Uint8Array(PEER_INFO_BYTES);
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  let received = 0;
  try {
    while (received < PEER_INFO_BYTES) {
      received += await endpoint.streamRecv(buffer.subarray(received), { signal: abort.signal }).promise;
    }
    return buffer;
  } catch (err) {
    const reason: HandshakeFailure = received > 0 ? 'truncated' : abort.signal.aborted ? 'timeout' : 'failed';
    const what = abort.signal.aborted ? `within ${timeoutMs} ms` : `before the endpoint failed (${(err as Error).message})`;
    throw new HandshakeError(reason,
      `received ${received} of the ${PEER_INFO_BYTES} bytes of the ucxx peer information ${what}` +
      (reason === 'failed' ? featureHint(endpoint) : ''), received, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs the exchange as the listener or the client side. On failure the endpoint is closed and the
 * HandshakeError thrown.
 */
export async function exchangePeerInfo(endpoint: Endpoint, role: 'listener' | 'client', timeoutMs: number): Promise<PeerTags> {
  try {
    // The handle only seeds the tag (as in ucxx); a peer that already went away still gets its
    // read-ahead bytes examined, so the failure says how much of the information arrived.
    const msgTagRecv = makeMsgTag(randomBytes(16), endpoint.closed ? 0n : endpoint.getHandle());
    const mine = encodePeerInfo(msgTagRecv);
    let theirs: Uint8Array;
    if (role === 'listener') {
      await sendStep(endpoint, mine, timeoutMs);
      theirs = await recvStep(endpoint, timeoutMs);
    } else {
      theirs = await recvStep(endpoint, timeoutMs);
      await sendStep(endpoint, mine, timeoutMs);
    }
    return { msgTagSend: decodePeerInfo(theirs).msgTag, msgTagRecv };
  } catch (err) {
    await endpoint.close();
    if (err instanceof HandshakeError) throw err;
    throw new HandshakeError('failed', `ucxx peer-information exchange failed: ${(err as Error).message}`, 0, { cause: err });
  }
}
