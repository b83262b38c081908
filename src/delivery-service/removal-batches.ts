import type { Logger } from '../logging/logger.js';
import { loggable } from '../logging/loggable-error.js';
import type { DeliveryStore } from '../store/delivery-store.js';

const REMOVE_CHUNK = 1000;
/** Done with requests gather this long before their deletion goes out. */
const GATHER_MS = 5;
const RETRY_MS = 1000;

/**
 * Requests done with (delivered, failed for good, given up, dropped),
 * deleted from the store in batches: a fan-out of 10,000 requests costs a
 * handful of store round trips. Until deleted they are still in this
 * worker's partition there, so whoever takes the partition over must not
 * hold them again (`has`).
 */
export class RemovalBatches {
  readonly #store: Pick<DeliveryStore, 'remove'>;
  readonly #log: Logger;
  readonly #closed: () => boolean;
  readonly #removing = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;

  constructor(store: Pick<DeliveryStore, 'remove'>, logger: Logger, closed: () => boolean) {
    this.#store = store;
    this.#log = logger;
    this.#closed = closed;
  }

  /** Done with, not deleted yet. */
  has(id: string): boolean {
    return this.#removing.has(id);
  }

  add(id: string): void {
    this.#removing.add(id);
    if (this.#timer === undefined && this.#flushing === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        void this.flush();
      }, GATHER_MS);
    }
  }

  /** Deletes what is done with now, retrying while the store fails, until the scheduler closes. */
  async flush(): Promise<void> {
    if (this.#flushing !== undefined) return this.#flushing;
    let gaveUp = false;
    const run = async () => {
      while (this.#removing.size > 0) {
        const ids = [...this.#removing].slice(0, REMOVE_CHUNK);
        try {
          await this.#store.remove(ids);
          for (const id of ids) this.#removing.delete(id);
        } catch (error) {
          this.#log.warn(
            { err: loggable(error), requests: ids.length },
            'cannot delete delivered notifications yet; retrying',
          );
          gaveUp = this.#closed();
          if (gaveUp) return;
          await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
        }
      }
    };
    this.#flushing = run()
      .finally(() => {
        this.#flushing = undefined;
      })
      // Done with after the loop found nothing left, before the line above: no timer was armed for them (a flush
      // was under way), and a flush asked for then got this one. Deleted now, and this one waits for it.
      .then(async () => (gaveUp || this.#removing.size === 0 ? undefined : this.flush()));
    return this.#flushing;
  }

  /** No batch waits for its timer any more: the caller flushes what is left. */
  stopTimer(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
