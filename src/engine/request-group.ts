/**
 * The requests in flight that an owner tracks (a worker's own receives and flushes, an endpoint's tag
 * receives), so that it can cancel or abandon them. An intrusive doubly linked list through the
 * requests themselves: adding and removing allocate nothing, where a Set's table is reallocated as
 * entries come and go (~130 bytes a round trip in an 8 B tag ping-pong: docs/performance.md).
 * Iteration is in the order of addition.
 */
import { kGroup, kGroupNext, kGroupPrev } from '../internal/symbols.js';
import type { AnyRequest } from '../request.js';

export class RequestGroup {
  #head: AnyRequest | null = null;
  #tail: AnyRequest | null = null;
  #size = 0;

  /** How many requests are in the group. */
  get size(): number {
    return this.#size;
  }

  /** Adds `request` (not in a group yet); it leaves by `delete`, which its settling calls. */
  add(request: AnyRequest): void {
    if (request[kGroup] !== null) return;
    request[kGroup] = this;
    request[kGroupPrev] = this.#tail;
    request[kGroupNext] = null;
    if (this.#tail === null) this.#head = request;
    else this.#tail[kGroupNext] = request;
    this.#tail = request;
    this.#size++;
  }

  /** Removes `request`; false when it is not in this group. */
  delete(request: AnyRequest): boolean {
    if (request[kGroup] !== this) return false;
    const prev = request[kGroupPrev];
    const next = request[kGroupNext];
    if (prev === null) this.#head = next;
    else prev[kGroupNext] = next;
    if (next === null) this.#tail = prev;
    else next[kGroupPrev] = prev;
    request[kGroup] = null;
    request[kGroupPrev] = null;
    request[kGroupNext] = null;
    this.#size--;
    return true;
  }

  /** The requests now in the group, oldest first (a copy: settling them while iterating is safe). */
  toArray(): AnyRequest[] {
    const all: AnyRequest[] = [];
    for (let request = this.#head; request !== null; request = request[kGroupNext]) all.push(request);
    return all;
  }
}
