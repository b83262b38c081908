import type { DeliveryStore } from '../store/delivery-store.js';

/** How long a failed deletion waits before it is tried again. */
export const DELETION_RETRY_MS = 1000;

/**
 * Deletes requests done with, trying again while the store fails, until
 * `stopped()`: left in the store, a request is sent again by whoever
 * reads the partition next (this worker taking it back included).
 */
export async function deleteUntilDone(
  store: Pick<DeliveryStore, 'remove'>,
  ids: readonly string[],
  stopped: () => boolean,
): Promise<void> {
  for (;;) {
    try {
      await store.remove(ids);
      return;
    } catch {
      if (stopped()) return;
      await new Promise((resolve) => {
        setTimeout(resolve, DELETION_RETRY_MS).unref();
      });
      if (stopped()) return;
    }
  }
}

/** Deletions under way, by ID (how many): a read of the partition meanwhile lists them, done with all the same. */
export class DeletionsUnderWay {
  readonly #counts = new Map<string, number>();

  has(id: string): boolean {
    return this.#counts.has(id);
  }

  /** Runs a deletion, its IDs listed as under way until it ends. */
  async run(ids: readonly string[], deletion: () => Promise<void>): Promise<void> {
    for (const id of ids) this.#counts.set(id, (this.#counts.get(id) ?? 0) + 1);
    try {
      await deletion();
    } finally {
      for (const id of ids) {
        const count = this.#counts.get(id) ?? 1;
        if (count > 1) this.#counts.set(id, count - 1);
        else this.#counts.delete(id);
      }
    }
  }
}
