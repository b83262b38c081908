/**
 * At most one log line per `intervalMs` for an event that can happen on
 * every request (a rate-limited write, a refused request): the first one
 * is logged at once, the next ones within the interval are only counted and
 * reported with the next line. Pure apart from its injected clock.
 */
export class LogThrottle {
  readonly #intervalMs: number;
  readonly #now: () => number;
  #lastLine = Number.NEGATIVE_INFINITY;
  #heldBack = 0;

  constructor(intervalMs: number, now: () => number) {
    this.#intervalMs = intervalMs;
    this.#now = now;
  }

  /** `undefined`: stay quiet; a number: log now, saying how many were held back since the last line. */
  note(): number | undefined {
    const now = this.#now();
    if (now - this.#lastLine < this.#intervalMs) {
      this.#heldBack += 1;
      return undefined;
    }
    const heldBack = this.#heldBack;
    this.#lastLine = now;
    this.#heldBack = 0;
    return heldBack;
  }
}
