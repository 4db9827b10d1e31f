/**
 * Small integer ids for live objects, so that C callbacks can carry an id in `user_data`/`arg` and be
 * dispatched by one registered function per kind, without a closure or a registration per object.
 * Id 0 is never issued (NULL user data means "none").
 */
export class SlotTable<T> {
  readonly #slots: (T | undefined)[] = [undefined];
  readonly #free: number[] = [];

  add(value: T): number {
    const id = this.reserve();
    this.#slots[id] = value;
    return id;
  }

  /**
   * Takes an id without an object yet (`set` fills it, `release` gives it back): an operation writes the
   * id into `user_data` before its nbx call and makes its object only if UCX did not complete it at once.
   */
  reserve(): number {
    const id = this.#free.pop();
    if (id !== undefined) return id;
    this.#slots.push(undefined);
    return this.#slots.length - 1;
  }

  set(id: number, value: T): void {
    this.#slots[id] = value;
  }

  /** Gives back a reserved id that was never filled. */
  release(id: number): void {
    this.#slots[id] = undefined;
    this.#free.push(id);
  }

  get(id: number): T | undefined {
    return this.#slots[id];
  }

  delete(id: number): void {
    if (id > 0 && this.#slots[id] !== undefined) {
      this.#slots[id] = undefined;
      this.#free.push(id);
    }
  }

  /** How many ids are taken (filled or reserved). */
  get size(): number {
    return this.#slots.length - 1 - this.#free.length;
  }

  /** The live objects (a snapshot). */
  values(): T[] {
    const out: T[] = [];
    for (const value of this.#slots) if (value !== undefined) out.push(value);
    return out;
  }
}
