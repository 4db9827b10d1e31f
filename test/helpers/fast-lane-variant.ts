/**
 * The fast-lane variants of a test file (test/fast-lane.test.ts imports messaging and atomics with
 * UCXX_TS_TEST_FAST_LANE set): '1' makes the echo peer offer a fast lane and the test's client take
 * it, '0' turns it off on both sides; both in PEER mode (the mode a lane serves), on both UCX
 * versions. Unset: the defaults.
 */
import { strict as assert } from 'node:assert';
import type { Endpoint, Worker } from 'ucxx-ts';
import type { Peer, PeerMessage } from './peer.js';

const VARIANT = process.env['UCXX_TS_TEST_FAST_LANE'];
/** true: over a lane; false: PEER mode without one; undefined: the defaults. */
export const FAST_LANE = VARIANT === '1' ? true : VARIANT === '0' ? false : undefined;

/** The echo peer's config. */
export const echoPeerConfig = (): { fastLane?: boolean } => (FAST_LANE === undefined ? {} : { fastLane: FAST_LANE });

/** Connects as the file does, with or without the lane in a variant (and checks it). */
export async function connectToEchoPeer(worker: Worker, port: number): Promise<Endpoint> {
  const endpoint = await worker.connect('127.0.0.1', port, FAST_LANE === undefined ? {} : { fastLane: FAST_LANE, errorHandling: 'peer' });
  if (FAST_LANE !== undefined) assert.equal(endpoint.fastLane, FAST_LANE, 'the client has the fast lane (or not) as the variant says');
  return endpoint;
}

/** The peer's 'connected' report, checked for the lane in a variant. */
export async function echoPeerConnected(peer: Peer): Promise<PeerMessage> {
  const connected = await peer.next('connected');
  if (FAST_LANE !== undefined) assert.equal(connected['fastLane'], FAST_LANE, "the echo peer's endpoint has the fast lane (or not)");
  return connected;
}
