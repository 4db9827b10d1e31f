/**
 * The fast lane between two ucxx-ts processes on one host. A PEER-mode connection (what ucxx and UCX
 * 1.19+ use by default) cannot use shared memory, which detects no peer failure, so it moves its data
 * over TCP. Between two ucxx-ts processes the connection keeps its PEER-mode endpoint as the failure
 * detector and moves every operation over a second, NONE-mode endpoint to the peer's worker address:
 * shared memory and CMA on one host.
 *
 * Nobody else ever sees it. A ucxx-ts listener that offers lanes (`fastLane: true`) publishes a hint
 * on this host: an abstract Unix socket named after its port, which disappears with the process
 * (`@ucxx-ts.fast-lane.PORT.` in /proc/net/unix). Only a ucxx-ts client (its client id says so:
 * internal/client-id.ts) on this host gets an offer, on the reserved AM id AM_ID_FAST_LANE; only a
 * client that found the hint waits for one before its connect resolves, so a ucxx server costs it
 * nothing. The exchange, all before either side hands its Endpoint to the application (so no
 * operation is ever posted on the PEER endpoint and then on the lane):
 *
 *   server -> client, PEER endpoint: OFFER  token, the server's worker address (as AM data)
 *   client -> server, its new lane:  HELLO  token   (UCX names the server's side of the lane as its reply endpoint)
 *   server -> client, the lane:      WELCOME token  (the server hands out its Endpoint, with the lane)
 *   or, on the PEER endpoint:        DECLINE token  (client: no lane), NOPE token (server: offer expired)
 *
 * A lane is never closed in UCX after a clean close (UCX would keep it until the worker goes:
 * endpoint/lane-pool.ts); both sides release it to their pools, and the next connection between the
 * same two workers takes it again (HELLO on an idle lane). The side that closes first:
 *
 *   closing side -> peer, the lane:  BYE token      (after a flush: nothing of it is still in flight)
 *   peer -> closing side, the lane:  BYE_ACK token  (the peer stopped using the lane and flushed it)
 *   or:                              BYE_CLOSE token (the peer has operations in flight: both close the lane)
 *
 * A closing side with operations in flight sends BYE_CLOSE 0 instead of BYE, and both close the lane.
 *
 * Both idle the lane then: what either sent on it arrived before the other's BYE or BYE_ACK, so the
 * next connection on it sees nothing of the last one's. Stream bytes take the lane too, but no stream
 * receive is ever posted on it (UCX cannot cancel one, and it would take the next connection's bytes):
 * the endpoint pulls what UCX holds there (endpoint/stream-receiver.ts), and each side moves what is
 * left into its endpoint's stash before the lane idles. A lane whose endpoint failed, whose peer does
 * not answer BYE in time, or on which either side still has operations in flight is closed in UCX
 * instead (held there until the worker goes): the protocol state of a rendezvous in flight (a receive
 * of the peer's message) fails only when its ucp_ep closes, which an idle lane never does, should the
 * peer's worker go.
 *
 * The PEER endpoint of a client that found the hint lives on its worker's failure detector
 * (worker/detector.ts), and the listener accepts it on its own: the worker that carries the data then
 * polls no TCP interface. OFFER, DECLINE and NOPE arrive there, handled here as the worker's own. Such
 * a connection takes the lane or is closed: the client connects again from its worker (which declines),
 * and the listener hands out only the one with the lane.
 *
 * Every message is a 16-byte AM header, little-endian: u32 'ucxl', u8 version (1), u8 kind, u16 0,
 * u64 token; sent with UCP_AM_SEND_FLAG_REPLY so that the receiver knows the endpoint.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import type { AmMessage } from '../active-message.js';
import { AM_ID_FAST_LANE } from '../am-ids.js';
import type { Endpoint } from '../endpoint.js';
import { debug } from '../internal/debug-log.js';
import {
  kAdoptLane, kDrainLane, kDropLane, kGiveUpLane, kLaneCall, kLaneWait, kOpenLane, kReplyHandle, kReservedAmId, kRetireLane,
} from '../internal/symbols.js';
import { lanePoolOf } from './lane-pool.js';
import { validateWorkerAddress } from '../internal/worker-address.js';
import { EndpointTimeoutError } from '../errors/index.js';

const MAGIC = 0x6c786375; // 'ucxl'
const VERSION = 1;
const HEADER_BYTES = 16;
const enum Kind { Offer = 1, Hello = 2, Welcome = 3, Decline = 4, Nope = 5, Bye = 6, ByeAck = 7, ByeClose = 8 }
const KIND_NAMES = ['', 'OFFER', 'HELLO', 'WELCOME', 'DECLINE', 'NOPE', 'BYE', 'BYE_ACK', 'BYE_CLOSE'];

/** How long a listener waits for an offered client's HELLO or DECLINE before it hands out without a lane (ms). */
export const OFFER_WAIT_MS = 2000;
/** How long a closing endpoint waits for each step of releasing its lane (flush, BYE, BYE_ACK) (ms). */
export const LANE_RELEASE_WAIT_MS = 2000;
/** How long a client that found the hint waits for the offer after its connection is made (ms). */
export const HINT_WAIT_MS = 1000;

function header(kind: Kind, token: bigint): Uint8Array {
  const bytes = new Uint8Array(HEADER_BYTES);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint8(4, VERSION);
  view.setUint8(5, kind);
  view.setBigUint64(8, token, true);
  return bytes;
}

function send(endpoint: Endpoint, kind: Kind, token: bigint, data: Uint8Array | null = null): Promise<void> {
  const options = { reply: true, [kReservedAmId]: true } as const;
  return endpoint.amSend(AM_ID_FAST_LANE, header(kind, token), data, options).promise
    .catch((err: unknown) => debug('fast lane: %s to %s not sent: %s', KIND_NAMES[kind], endpoint.peer, (err as Error).message));
}

// ---- The hint a listener publishes on this host ----

const hintName = (port: number): string => `ucxx-ts.fast-lane.${port}.`;

/** Publishes the hint for a listener on `port`; close() takes it back. Null when the name is taken. */
export function publishHint(port: number): { close(): void } {
  let server: Server | null = createServer();
  server.on('error', (err) => {
    debug('fast lane: no hint for port %d: %s', port, err.message);
    server = null;
  });
  server.listen(`\0${hintName(port)}`);
  server.unref();
  return {
    close(): void {
      server?.close();
      server = null;
    },
  };
}

/** Whether a ucxx-ts listener that offers fast lanes listens on `port` of this host. */
export function hintPresent(port: number): boolean {
  try {
    return readFileSync('/proc/net/unix', 'latin1').includes(`@${hintName(port)}`);
  } catch {
    return false;
  }
}

// ---- The listener's side ----

interface Offer {
  readonly endpoint: Endpoint;
  /** Called once: true with the lane adopted, false without. */
  settle: ((lane: boolean) => void) | null;
}

/** Offers made and not yet answered (by token); an expired one stays until its late answer or close. */
const offers = new Map<bigint, Offer>();

/**
 * Offers a lane to the client of `endpoint` (a ucxx-ts client on this host) and resolves once it is
 * settled: true with the lane in place, false without (declined, or no answer within `waitMs`).
 */
export function offerLane(endpoint: Endpoint, workerAddress: Uint8Array, waitMs = OFFER_WAIT_MS): Promise<boolean> {
  const token = randomBytes(8).readBigUInt64LE(0);
  return new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => {
      debug('fast lane: no answer from %s to the offer in %d ms', endpoint.peer, waitMs);
      settle(false);
    }, waitMs);
    const offer: Offer = { endpoint, settle: null };
    const settle = (lane: boolean): void => {
      if (offer.settle === null) return;
      offer.settle = null;
      clearTimeout(timer);
      resolve(lane);
    };
    offer.settle = settle;
    offers.set(token, offer);
    endpoint.once('close', () => {
      offers.delete(token);
      settle(false);
    });
    void send(endpoint, Kind.Offer, token, workerAddress);
  });
}

// ---- The client's side ----

interface Expectation {
  offer: { token: bigint; address: Uint8Array } | null;
  /** The server's answer to HELLO. */
  answer: Kind.Welcome | Kind.Nope | null;
  wake: (() => void) | null;
  /** No longer waiting: an offer now is declined. */
  done: boolean;
}

const expectations = new WeakMap<Endpoint, Expectation>();

/** The client will wait for an offer on `endpoint` (before its connect's wireup, so none is missed). */
export function expectOffer(endpoint: Endpoint): void {
  expectations.set(endpoint, { offer: null, answer: null, wake: null, done: false });
}

function wait(expectation: Expectation, endpoint: Endpoint, until: () => boolean, ms: number): Promise<boolean> {
  if (until()) return Promise.resolve(true);
  return new Promise<boolean>((resolve) => {
    const finish = (): void => {
      if (!until() && !endpoint.closed && !timedOut) return;
      clearTimeout(timer);
      endpoint.off('close', finish);
      expectation.wake = null;
      resolve(until());
    };
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      finish();
    }, ms);
    endpoint.once('close', finish);
    expectation.wake = finish;
  });
}

/**
 * After the connection is made: waits up to `hintWaitMs` for the server's offer and, with one, opens
 * the lane and waits for the server's answer (up to `answerWaitMs`: a server that does not answer
 * the HELLO on a live connection is stalled, and the connect fails with EndpointTimeoutError).
 * Resolves with whether the endpoint has its lane.
 */
export async function takeLane(endpoint: Endpoint, ownAddress: () => Uint8Array, hintWaitMs: number, answerWaitMs: number): Promise<boolean> {
  const expectation = expectations.get(endpoint);
  if (expectation === undefined) return false;
  await wait(expectation, endpoint, () => expectation.offer !== null, hintWaitMs);
  const offer = expectation.offer;
  expectation.done = true;
  if (offer === null || endpoint.closed) {
    debug('fast lane: no offer from %s', endpoint.peer);
    return false;
  }
  // A connection to a listener of this very worker: the lane would be one ucp_ep for both sides.
  if (Buffer.from(offer.address).equals(ownAddress())) {
    void send(endpoint, Kind.Decline, offer.token);
    return false;
  }
  try {
    validateWorkerAddress(offer.address);
    endpoint[kOpenLane](offer.address);
  } catch (err) {
    debug('fast lane: the offer of %s is not usable: %s', endpoint.peer, (err as Error).message);
    void send(endpoint, Kind.Decline, offer.token);
    return false;
  }
  void send(endpoint, Kind.Hello, offer.token);
  const answered = await wait(expectation, endpoint, () => expectation.answer !== null, answerWaitMs);
  if (!answered) {
    if (endpoint.closed) return false;
    throw new EndpointTimeoutError(`connect to ${endpoint.peer}: the server did not answer the fast lane's HELLO in ${answerWaitMs} ms`);
  }
  if (expectation.answer === Kind.Nope) {
    endpoint[kDropLane]();
    return false;
  }
  return true;
}

// ---- Releasing a lane ----

interface Release {
  readonly token: bigint;
  acked: boolean;
  /** The peer answered BYE_CLOSE: close the lane. */
  refused: boolean;
  /** The BYE_ACK this side sends for the peer's own BYE (both sides closed at once), once sent. */
  answering: Promise<boolean> | null;
  readonly endpoint: Endpoint;
}

/** Lanes whose endpoint is releasing them (sent or about to send BYE), by ucp_ep. */
const releasing = new Map<bigint, Release>();

/**
 * The closing side: flushes `lane`, sends BYE and waits for BYE_ACK (each step within `waitMs`); then
 * the lane is idle in the worker's pool. Resolves with false when a step did not complete (the caller
 * closes the lane in UCX).
 */
export async function releaseLane(endpoint: Endpoint, lane: bigint, waitMs: number): Promise<boolean> {
  const release: Release = { token: randomBytes(8).readBigUInt64LE(0), acked: false, refused: false, answering: null, endpoint };
  releasing.set(lane, release);
  try {
    const done = await endpoint[kLaneCall](lane, null, waitMs) &&
      await endpoint[kLaneCall](lane, header(Kind.Bye, release.token), waitMs) &&
      await endpoint[kLaneWait](() => release.acked, waitMs) &&
      (release.answering === null || await release.answering);
    if (!done || release.refused) {
      debug('fast lane: %s %s', endpoint.peer, done ? 'has operations in flight on the lane' : 'did not release the lane in time');
      return false;
    }
    endpoint[kDrainLane](lane);
    lanePoolOf(endpoint.worker).release(lane);
    return true;
  } finally {
    releasing.delete(lane);
  }
}

/** The closing side, with operations in flight on `lane`: tells the peer to close its side, closes its own. */
export async function closeLaneBoth(endpoint: Endpoint, lane: bigint, waitMs: number): Promise<void> {
  await endpoint[kLaneCall](lane, header(Kind.ByeClose, 0n), waitMs);
  await endpoint[kRetireLane](lane);
}

/**
 * The peer's side of a release (`endpoint` stopped using `lane`): flush it, answer BYE_ACK and idle it;
 * with operations of `endpoint` in flight, answer BYE_CLOSE and close it.
 */
async function answerBye(endpoint: Endpoint, lane: bigint, token: bigint, busy: boolean): Promise<void> {
  if (busy) {
    await endpoint[kLaneCall](lane, header(Kind.ByeClose, token), LANE_RELEASE_WAIT_MS);
    await endpoint[kRetireLane](lane);
    return;
  }
  const done = await endpoint[kLaneCall](lane, null, LANE_RELEASE_WAIT_MS) &&
    await endpoint[kLaneCall](lane, header(Kind.ByeAck, token), LANE_RELEASE_WAIT_MS);
  if (done) {
    endpoint[kDrainLane](lane);
    lanePoolOf(endpoint.worker).release(lane);
  } else await endpoint[kRetireLane](lane);
}

// ---- The messages (inside worker progress) ----

/** @internal The reserved id's handler. Anything that is not a well-formed message of ours is dropped. */
export function onFastLaneMessage(message: AmMessage): void {
  if (message.rendezvous) {
    message.reject();
    return;
  }
  const bytes = message.header;
  if (bytes.byteLength !== HEADER_BYTES) return;
  const view = new DataView(bytes.buffer, bytes.byteOffset, HEADER_BYTES);
  if (view.getUint32(0, true) !== MAGIC || view.getUint8(4) !== VERSION) return;
  const kind = view.getUint8(5) as Kind;
  const token = view.getBigUint64(8, true);
  const endpoint = message.replyEndpoint;
  const replyHandle = message[kReplyHandle];
  switch (kind) {
    case Kind.Offer: {
      if (endpoint === null || message.data === null) return;
      const address = new Uint8Array(message.data);
      const expectation = expectations.get(endpoint);
      if (expectation === undefined || expectation.done || expectation.offer !== null) {
        queueMicrotask(() => void send(endpoint, Kind.Decline, token));
        return;
      }
      expectation.offer = { token, address };
      queueMicrotask(() => expectation.wake?.());
      return;
    }
    case Kind.Hello: {
      const offer = offers.get(token);
      if (offer === undefined || replyHandle === 0n) return;
      offers.delete(token);
      const pool = lanePoolOf(offer.endpoint.worker);
      // The client's lane of an earlier connection (idle here too), or a new one UCX just made.
      pool.adopt(replyHandle);
      const settle = offer.settle;
      if (settle === null) {
        // Expired: the listener handed its endpoint out without a lane; the lane stays idle.
        pool.release(replyHandle);
        queueMicrotask(() => void send(offer.endpoint, Kind.Nope, token));
        return;
      }
      offer.endpoint[kAdoptLane](replyHandle);
      queueMicrotask(() => {
        void send(offer.endpoint, Kind.Welcome, token);
        settle(true);
      });
      return;
    }
    case Kind.Bye: {
      if (replyHandle === 0n) return;
      const mine = releasing.get(replyHandle);
      if (mine !== undefined) {
        // Both sides release at once: each answers the other, each waits for its answer.
        mine.answering = new Promise<boolean>((resolve) => queueMicrotask(() => {
          resolve(mine.endpoint[kLaneCall](replyHandle, header(Kind.ByeAck, token), LANE_RELEASE_WAIT_MS));
        }));
        return;
      }
      if (endpoint === null) return;
      queueMicrotask(() => {
        const state = endpoint[kGiveUpLane](replyHandle);
        if (state !== null) void answerBye(endpoint, replyHandle, token, state === 'busy');
      });
      return;
    }
    case Kind.ByeAck: {
      const mine = releasing.get(replyHandle);
      if (mine === undefined || mine.token !== token) return;
      mine.acked = true;
      return;
    }
    case Kind.ByeClose: {
      // The answer to this side's BYE, or the peer closing its side unasked (it had operations in flight).
      const mine = releasing.get(replyHandle);
      if (mine !== undefined) {
        mine.refused = true;
        mine.acked = true;
        return;
      }
      if (endpoint === null) return;
      queueMicrotask(() => {
        if (endpoint[kGiveUpLane](replyHandle) !== null) void endpoint[kRetireLane](replyHandle);
      });
      return;
    }
    case Kind.Decline: {
      const offer = offers.get(token);
      if (offer === undefined || offer.endpoint !== endpoint) return;
      offers.delete(token);
      queueMicrotask(() => offer.settle?.(false));
      return;
    }
    case Kind.Welcome:
    case Kind.Nope: {
      if (endpoint === null) return;
      const expectation = expectations.get(endpoint);
      if (expectation === undefined || expectation.offer?.token !== token || expectation.answer !== null) return;
      expectation.answer = kind;
      queueMicrotask(() => expectation.wake?.());
      return;
    }
    default:
      return;
  }
}
