/**
 * The fast-lane variant of a test file (test/fast-lane.test.ts imports messaging and atomics with
 * UCXX_TS_TEST_FAST_LANE=1): the echo peer offers fast lanes and the test's client takes one, in PEER
 * mode (the mode a lane serves) on both UCX versions, so every test of the file runs over the lane.
 */
import { strict as assert } from 'node:assert';
import type { Endpoint, Worker } from 'ucxx-ts';
import type { Peer, PeerMessage } from './peer.js';

export const FAST_LANE = process.env['UCXX_TS_TEST_FAST_LANE'] === '1';

/** The echo peer's config. */
export const echoPeerConfig = (): { fastLane?: boolean } => (FAST_LANE ? { fastLane: true } : {});

/** Connects as the file does, over a fast lane in the fast-lane variant (and checks it got one). */
export async function connectToEchoPeer(worker: Worker, port: number): Promise<Endpoint> {
  const endpoint = await worker.connect('127.0.0.1', port, FAST_LANE ? { fastLane: true, errorHandling: 'peer' } : {});
  if (FAST_LANE) assert.equal(endpoint.fastLane, true, 'the client took the fast lane');
  return endpoint;
}

/** The peer's 'connected' report, checked for the lane in the fast-lane variant. */
export async function echoPeerConnected(peer: Peer): Promise<PeerMessage> {
  const connected = await peer.next('connected');
  if (FAST_LANE) assert.equal(connected['fastLane'], true, "the echo peer's endpoint has the fast lane");
  return connected;
}
