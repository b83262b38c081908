interface Waiter {
  readonly grant: () => void;
  readonly refuse: (error: Error) => void;
}

/**
 * A fixed number of slots, handed out first come, first served: how many
 * gateway requests may be in flight at once (one for the whole client, one
 * per gateway origin). A caller that finds none free waits in line; a
 * released slot passes straight to the first in line, so a steady stream of
 * newcomers cannot overtake those already waiting.
 */
export class RequestSlots {
  readonly #size: number;
  #taken = 0;
  /** A Set keeps insertion order and removes its first entry in O(1): thousands may wait. */
  readonly #waiting = new Set<Waiter>();

  constructor(size: number) {
    if (!Number.isSafeInteger(size) || size < 1)
      throw new RangeError(`a slot count must be a whole number ≥ 1, not ${size}`);
    this.#size = size;
  }

  /** Resolves once a slot is the caller's (hand it back with `release`); rejects when `refuseWaiting` ends the wait. */
  async acquire(): Promise<void> {
    if (this.#taken < this.#size) {
      this.#taken += 1;
      return;
    }
    await new Promise<void>((grant, refuse) => {
      this.#waiting.add({ grant, refuse });
    });
  }

  /** Gives back a slot `acquire` handed out. */
  release(): void {
    const [next] = this.#waiting;
    if (next === undefined) {
      this.#taken -= 1;
      return;
    }
    // The slot stays taken: it changes hands.
    this.#waiting.delete(next);
    next.grant();
  }

  /** Ends every wait in line with `error` (the slots already handed out stay so until released). */
  refuseWaiting(error: Error): void {
    const waiting = [...this.#waiting];
    this.#waiting.clear();
    for (const waiter of waiting) waiter.refuse(error);
  }

  /** No slot handed out and nobody waiting: the holder may forget these slots. */
  get idle(): boolean {
    return this.#taken === 0 && this.#waiting.size === 0;
  }
}
