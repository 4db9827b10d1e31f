/**
 * Small integer ids for live objects, so that C callbacks can carry an id in `user_data`/`arg` and be
 * dispatched by one registered function per kind, without a closure or a registration per object.
 * Id 0 is never issued (NULL user data means "none").
 */
export class SlotTable<T> {
  readonly #slots: (T | undefined)[] = [undefined];
  readonly #free: number[] = [];

  add(value: T): number {
    const id = this.#free.pop();
    if (id !== undefined) {
      this.#slots[id] = value;
      return id;
    }
    this.#slots.push(value);
    return this.#slots.length - 1;
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
}
