/**
 * A worker's fast lanes between connections. UCX frees a NONE-mode ucp_ep whose peer has connected
 * back to it (every lane, once its first message is answered) only when the worker is destroyed:
 * ucp_ep_close_nbx flushes such an endpoint and keeps it, with its shared-memory mappings, "to enable
 * remote endpoints keep sending", and refuses a forced close in NONE mode. Closing each lane would so
 * hold some 40 KiB per connection ever made, on both sides, until the worker goes. Instead, a lane
 * that both sides have released (BYE / BYE_ACK, endpoint/fast-lane.ts) stays open here, and the next
 * connection between the same two workers takes it again: a worker holds at most as many lanes per
 * peer worker as it had connections to that worker open at once.
 */

const keyOf = (address: Uint8Array): string => Buffer.from(address.buffer, address.byteOffset, address.byteLength).toString('hex');

export class LanePool {
  /** Idle lanes this worker opened, by the peer worker's address (hex). */
  readonly #idle = new Map<string, bigint[]>();
  /** Every live lane this worker opened, in use or idle: the address it goes to. */
  readonly #addressOf = new Map<bigint, string>();
  /** Idle lanes UCX made for a peer's lane (this worker accepted the connection). */
  readonly #parked = new Set<bigint>();

  /** An idle lane this worker opened to the worker at `address`, now in use; null when there is none. */
  take(address: Uint8Array): bigint | null {
    const key = keyOf(address);
    const idle = this.#idle.get(key);
    const lane = idle?.pop();
    if (idle !== undefined && idle.length === 0) this.#idle.delete(key);
    return lane ?? null;
  }

  /** A lane this worker just opened to the worker at `address` (in use). */
  opened(lane: bigint, address: Uint8Array): void {
    this.#addressOf.set(lane, keyOf(address));
  }

  /** A lane no connection uses any more: idle, for the next connection between the same workers. */
  release(lane: bigint): void {
    const key = this.#addressOf.get(lane);
    if (key === undefined) {
      this.#parked.add(lane);
      return;
    }
    const idle = this.#idle.get(key);
    if (idle === undefined) this.#idle.set(key, [lane]);
    else if (!idle.includes(lane)) idle.push(lane);
  }

  /** A peer's connection takes the idle lane UCX made for it earlier: true (now in use) if it was idle. */
  adopt(lane: bigint): boolean {
    return this.#parked.delete(lane);
  }

  /** A lane closed in UCX (after a failure, or a release its peer did not answer): never used again. */
  retire(lane: bigint): void {
    this.#parked.delete(lane);
    const key = this.#addressOf.get(lane);
    if (key === undefined) return;
    this.#addressOf.delete(lane);
    const idle = this.#idle.get(key);
    if (idle === undefined) return;
    const at = idle.indexOf(lane);
    if (at >= 0) idle.splice(at, 1);
    if (idle.length === 0) this.#idle.delete(key);
  }
}

const pools = new WeakMap<object, LanePool>();

/** The lane pool of `worker` (made on first use; it goes with the worker, whose destruction frees its lanes in UCX). */
export function lanePoolOf(worker: object): LanePool {
  let pool = pools.get(worker);
  if (pool === undefined) pools.set(worker, pool = new LanePool());
  return pool;
}
