/**
 * Runs tasks one at a time per key, in arrival order; different keys run
 * concurrently. The worker serializes writes per user with it: without it,
 * a burst of writes for one user from a single process (up to the prefetch
 * count) would all read the same version and all but one would conflict,
 * round after round. With it, only writers in different processes race.
 */
export class KeyedSerializer {
  readonly #tails = new Map<string, Promise<void>>();

  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const result = previous.then(task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }

  /** Keys with work queued or running (for tests and metrics). */
  get size(): number {
    return this.#tails.size;
  }
}
