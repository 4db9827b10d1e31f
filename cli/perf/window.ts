/** A ring of the requests a bandwidth loop keeps in flight. */
import type { Request } from 'ucxx-ts';

/** The last `size` requests posted, in a fixed ring (no allocation per operation). */
export class Window {
  readonly #ring: (Request<unknown> | null)[];
  #next = 0;
  #count = 0;
  constructor(size: number) {
    this.#ring = new Array<Request<unknown> | null>(size).fill(null);
  }

  push(request: Request<unknown>): void {
    this.#ring[this.#next] = request;
    this.#next = (this.#next + 1) % this.#ring.length;
    if (this.#count < this.#ring.length) this.#count++;
  }

  /** When full: the request the next push replaces (the oldest); otherwise null. */
  oldest(): Request<unknown> | null {
    return this.#count === this.#ring.length ? this.#ring[this.#next] ?? null : null;
  }

  /** Empties the window, returning its requests oldest first. */
  drain(): Request<unknown>[] {
    const out: Request<unknown>[] = [];
    const start = (this.#next - this.#count + this.#ring.length) % this.#ring.length;
    for (let i = 0; i < this.#count; i++) out.push(this.#ring[(start + i) % this.#ring.length] as Request<unknown>);
    this.#ring.fill(null);
    this.#next = 0;
    this.#count = 0;
    return out;
  }
}
