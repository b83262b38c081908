import type { Logger } from '../logging/logger.js';
import { loggable } from '../logging/loggable-error.js';
import type { DeliveryStore } from '../store/delivery-store.js';

/** How often the requests done with of parts not yet secured are noted in the store. */
const PROGRESS_FLUSH_MS = 50;
/** After a failed write (the store down), the next waits this long: one warning a second, not twenty. */
const RETRY_MS = 1000;

/** The requests of one part noted done that a store read begun now may not list (`ProgressMarks.watch`). */
export interface DoneWatch {
  readonly ids: ReadonlySet<string>;
  end(): void;
}

/**
 * Requests done with while their part may still be taken in again (not
 * secured here, or read from the store at a takeover), noted in the store
 * by part every `PROGRESS_FLUSH_MS`: a worker taking the part in again
 * after a crash does not send them a second time (only what was done in
 * the last few milliseconds is).
 *
 * One write at a time: what is noted while a write is out goes with the
 * next, which starts once it landed. Started by the timer alone, writes
 * would pile up whenever the store answers slower than the interval
 * (every 50 ms, a fan-out's marks, each a larger `$addToSet`), taking
 * pooled connections the lease renewals wait for too.
 */
export class ProgressMarks {
  readonly #store: Pick<DeliveryStore, 'markDone'>;
  readonly #log: Logger;
  #done = new Map<string, string[]>();
  /** Batches being written: not in the store yet, as far as a read begun now knows. */
  readonly #writing = new Set<ReadonlyMap<string, readonly string[]>>();
  /** Per part, the watches under way: each collects what is noted of it. */
  readonly #watches = new Map<string, Set<Set<string>>>();
  #timer: NodeJS.Timeout | undefined;
  /** The write under way: the next waits for it. */
  #flushing = false;
  #stopped = false;

  constructor(store: Pick<DeliveryStore, 'markDone'>, logger: Logger) {
    this.#store = store;
    this.#log = logger;
  }

  /** The request `id` of the part `part` is done: noted in the store soon. */
  note(part: string, id: string): void {
    for (const ids of this.#watches.get(part) ?? []) ids.add(id);
    this.#queue(part, id);
  }

  /**
   * For a read of the part's progress about to begin: what of it is noted
   * and not yet written (the read cannot list it), and, until `end`, what
   * is noted meanwhile. Together with the read, every request of the part
   * done with here by the time the watch ends.
   */
  watch(part: string): DoneWatch {
    const ids = new Set<string>(this.#done.get(part));
    for (const batch of this.#writing) for (const id of batch.get(part) ?? []) ids.add(id);
    let watches = this.#watches.get(part);
    if (watches === undefined) this.#watches.set(part, (watches = new Set()));
    watches.add(ids);
    const all = watches;
    return {
      ids,
      end: () => {
        all.delete(ids);
        if (all.size === 0 && this.#watches.get(part) === all) this.#watches.delete(part);
      },
    };
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async #flush(): Promise<void> {
    let failed = false;
    const batch = this.#done;
    this.#done = new Map();
    this.#writing.add(batch);
    this.#flushing = true;
    try {
      await this.#store.markDone(batch);
    } catch (error) {
      // Lost, the marks only cost duplicates after a crash; kept for the next flush all the same.
      failed = true;
      for (const [part, ids] of batch) for (const id of ids) this.#queue(part, id);
      this.#log.warn({ err: loggable(error) }, 'cannot note delivered notifications yet; trying again');
    } finally {
      this.#writing.delete(batch);
      this.#flushing = false;
      if (this.#done.size > 0) this.#arm(failed ? RETRY_MS : PROGRESS_FLUSH_MS);
    }
  }

  /** For the next flush (a mark failed to write is queued again: the watches have it already). */
  #queue(part: string, id: string): void {
    const list = this.#done.get(part);
    if (list === undefined) this.#done.set(part, [id]);
    else list.push(id);
    if (!this.#flushing) this.#arm(PROGRESS_FLUSH_MS);
  }

  #arm(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      void this.#flush();
    }, delayMs);
  }
}
