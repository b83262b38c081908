/**
 * At most `capacity` units of work at once, each task weighing what it
 * declares; tasks wait in arrival order. The worker bounds with it how much
 * stored ruleset text its writes are processing at once: a write of a large
 * ruleset holds several times its text in memory (the parse, the decoded
 * rules, the new text, the encoded update, the driver's buffers) until the
 * database has answered, so many of them in flight at once are what made
 * the worker's memory grow, while the work is CPU-bound and does not go
 * faster for it.
 *
 * A task heavier than the whole capacity runs alone (once nothing else is
 * running), so no task waits forever. Weight 0 never waits. Capacity 0:
 * no bound at all.
 */
export class WeightedBudget {
  readonly #capacity: number;
  #used = 0;
  #running = 0;
  readonly #waiting: { readonly weight: number; readonly admit: () => void }[] = [];

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** Units held by running tasks now. */
  get used(): number {
    return this.#used;
  }

  /** Tasks waiting for room. */
  get waiting(): number {
    return this.#waiting.length;
  }

  async run<T>(weight: number, task: () => Promise<T>): Promise<T> {
    if (this.#capacity === 0 || weight <= 0) return task();
    const held = Math.min(weight, this.#capacity);
    if (this.#waiting.length > 0 || !this.#fits(held)) {
      await new Promise<void>((admit) => {
        this.#waiting.push({ weight: held, admit });
      });
    } else {
      this.#take(held);
    }
    try {
      return await task();
    } finally {
      this.#used -= held;
      this.#running -= 1;
      this.#admitWaiting();
    }
  }

  #fits(weight: number): boolean {
    return this.#running === 0 || this.#used + weight <= this.#capacity;
  }

  #take(weight: number): void {
    this.#used += weight;
    this.#running += 1;
  }

  /** Admits waiting tasks in arrival order while the next one fits. */
  #admitWaiting(): void {
    for (let next = this.#waiting[0]; next !== undefined && this.#fits(next.weight); next = this.#waiting[0]) {
      this.#waiting.shift();
      this.#take(next.weight);
      next.admit();
    }
  }
}
