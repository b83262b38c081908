import { unwatchAbort, watchAbort } from './abort-callbacks.js';

interface Waiter {
  readonly grant: () => void;
  readonly refuse: (error: Error) => void;
}

/** `acquire` on slots whose line is as long as it may be: nothing was taken, nothing waits. */
export class LineFullError extends Error {
  constructor() {
    super('every slot is taken and the line for them is full');
    this.name = 'LineFullError';
  }
}

/**
 * `acquire` whose caller withdrew while it waited (its signal aborted):
 * nothing was taken, and it left the line.
 */
export class WithdrawnError extends Error {
  constructor() {
    super('the caller withdrew while waiting for a slot');
    this.name = 'WithdrawnError';
  }
}

/**
 * A fixed number of slots, handed out first come, first served: how many
 * gateway requests may be in flight at once (for the whole client, per
 * gateway origin, per address, per user). A caller that finds none free
 * waits in line, up to `maxWaiting` callers; a released slot passes
 * straight to the first in line, so a steady stream of newcomers cannot
 * overtake those already waiting.
 */
export class RequestSlots {
  readonly #size: number;
  readonly #maxWaiting: number;
  #taken = 0;
  /** A Set keeps insertion order and removes its first entry in O(1): thousands may wait. */
  readonly #waiting = new Set<Waiter>();

  constructor(size: number, maxWaiting = Number.POSITIVE_INFINITY) {
    if (!Number.isSafeInteger(size) || size < 1)
      throw new RangeError(`a slot count must be a whole number ≥ 1, not ${size}`);
    if (maxWaiting !== Number.POSITIVE_INFINITY && (!Number.isSafeInteger(maxWaiting) || maxWaiting < 0))
      throw new RangeError(`a line must be a whole number ≥ 0 long, not ${maxWaiting}`);
    this.#size = size;
    this.#maxWaiting = maxWaiting;
  }

  /**
   * Resolves once a slot is the caller's (hand it back with `release`);
   * rejects when `refuseWaiting` ends the wait, or at once with
   * `LineFullError` when no slot is free and `maxWaiting` already wait,
   * and with `WithdrawnError` when `signal` aborts before a slot is
   * handed over (the caller leaves the line at once).
   */
  async acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted === true) throw new WithdrawnError();
    if (this.#taken < this.#size) {
      this.#taken += 1;
      return;
    }
    if (this.#waiting.size >= this.#maxWaiting) throw new LineFullError();
    await new Promise<void>((grant, refuse) => {
      const withdraw = () => {
        this.#waiting.delete(waiter);
        refuse(new WithdrawnError());
      };
      const waiter: Waiter =
        signal === undefined
          ? { grant, refuse }
          : {
              grant: () => {
                unwatchAbort(signal, withdraw);
                grant();
              },
              refuse: (error) => {
                unwatchAbort(signal, withdraw);
                refuse(error);
              },
            };
      this.#waiting.add(waiter);
      if (signal !== undefined) watchAbort(signal, withdraw);
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

/**
 * `RequestSlots` per key (a gateway origin, an address, a user), each of
 * `size` slots and a line of `maxWaiting`. Only keys with a slot out or a
 * caller waiting are held: an idle key is forgotten, so a million pushers'
 * hosts or users cost nothing while they send nothing.
 */
export class KeyedSlots {
  readonly #size: number;
  readonly #maxWaiting: number;
  readonly #slots = new Map<string, RequestSlots>();

  constructor(size: number, maxWaiting = Number.POSITIVE_INFINITY) {
    // Checked here, not at the first key: a bad setting stops the worker at start.
    new RequestSlots(size, maxWaiting);
    this.#size = size;
    this.#maxWaiting = maxWaiting;
  }

  /** `RequestSlots.acquire` for the key's slots. */
  async acquire(key: string, signal?: AbortSignal): Promise<void> {
    let slots = this.#slots.get(key);
    if (slots === undefined) {
      slots = new RequestSlots(this.#size, this.#maxWaiting);
      this.#slots.set(key, slots);
    }
    try {
      await slots.acquire(signal);
    } catch (error) {
      this.#forgetIfIdle(key, slots);
      throw error;
    }
  }

  release(key: string): void {
    const slots = this.#slots.get(key);
    if (slots === undefined) throw new Error(`release: no slot of this key is out`);
    slots.release();
    this.#forgetIfIdle(key, slots);
  }

  /** Ends every wait of every key with `error`. */
  refuseWaiting(error: Error): void {
    for (const slots of this.#slots.values()) slots.refuseWaiting(error);
  }

  /** Keys with a slot out or a caller waiting. */
  get keys(): number {
    return this.#slots.size;
  }

  #forgetIfIdle(key: string, slots: RequestSlots): void {
    if (slots.idle && this.#slots.get(key) === slots) this.#slots.delete(key);
  }
}
