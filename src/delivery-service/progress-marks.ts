import type { Logger } from '../logging/logger.js';
import { loggable } from '../logging/loggable-error.js';
import type { DeliveryStore } from '../store/delivery-store.js';

/** How often the requests done with of parts not yet secured are noted in the store. */
const PROGRESS_FLUSH_MS = 50;

/**
 * Requests done with while their part is not secured, noted in the store
 * by part every `PROGRESS_FLUSH_MS`: a worker taking the part in again
 * after a crash does not send them a second time (only what was done in
 * the last few milliseconds is).
 */
export class ProgressMarks {
  readonly #store: Pick<DeliveryStore, 'markDone'>;
  readonly #log: Logger;
  #done = new Map<string, string[]>();
  #timer: NodeJS.Timeout | undefined;

  constructor(store: Pick<DeliveryStore, 'markDone'>, logger: Logger) {
    this.#store = store;
    this.#log = logger;
  }

  /** The request `id` of the part `part`, not yet secured, is done: noted in the store soon. */
  note(part: string, id: string): void {
    const list = this.#done.get(part);
    if (list === undefined) this.#done.set(part, [id]);
    else list.push(id);
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      void this.#flush();
    }, PROGRESS_FLUSH_MS);
  }

  stop(): void {
    clearTimeout(this.#timer);
  }

  async #flush(): Promise<void> {
    const batch = this.#done;
    this.#done = new Map();
    try {
      await this.#store.markDone(batch);
    } catch (error) {
      // Lost, the marks only cost duplicates after a crash; kept for the next flush all the same.
      for (const [part, ids] of batch) for (const id of ids) this.note(part, id);
      this.#log.warn({ err: loggable(error) }, 'cannot note delivered notifications yet; trying again');
    }
  }
}
