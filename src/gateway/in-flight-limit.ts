/** What an admitted request holds until the gateway has nothing more to do for it. */
export interface InFlightSlot {
  /** One more thing to wait for before the slot is free (a call to the workers). */
  readonly hold: () => void;
  /** One thing done; the slot frees when the last one is. Extra calls are ignored. Safe to pass as a listener. */
  readonly release: () => void;
}

/**
 * Counts the requests the gateway is working on and refuses new ones at
 * `max`. A request stays counted until its response is over (sent, or its
 * client gone) and its call to the workers has settled, whichever is later:
 * a client that disconnects does not free a slot while the workers are
 * still busy with its request, and an answered request never keeps one.
 */
export class InFlightLimit {
  readonly #max: number;
  readonly #onChange: ((count: number) => void) | undefined;
  #count = 0;

  /** `max`: `Infinity` counts without a cap. `onChange` hears every new count. */
  constructor(max: number, onChange?: (count: number) => void) {
    this.#max = max;
    this.#onChange = onChange;
  }

  get count(): number {
    return this.#count;
  }

  get max(): number {
    return this.#max;
  }

  /** A slot held once, or `undefined` at the cap. */
  tryEnter(): InFlightSlot | undefined {
    if (this.#count >= this.#max) return undefined;
    let holds = 0;
    const hold = () => {
      // A slot freed before its handler ran (the client went away during
      // authentication) counts again while the handler works: the count is
      // what the gateway really holds, even past `max` for that moment.
      if (holds === 0) this.#enter();
      holds += 1;
    };
    const release = () => {
      if (holds === 0) return;
      holds -= 1;
      if (holds === 0) this.#leave();
    };
    hold();
    return { hold, release };
  }

  #enter(): void {
    this.#count += 1;
    this.#onChange?.(this.#count);
  }

  #leave(): void {
    this.#count -= 1;
    this.#onChange?.(this.#count);
  }
}
