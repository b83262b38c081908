import type { DeliveryStore } from '../store/delivery-store.js';
import { deleteUntilDone, type DeletionsUnderWay } from './deletions-until-done.js';
import type { Tracked } from './journal-entries.js';
import type { ProgressMarks } from './progress-marks.js';

export interface RequestWritesOptions {
  readonly store: Pick<DeliveryStore, 'acceptAll' | 'remove'>;
  /** The journal's requests by ID: one no longer listed (done with, or its partition let go) is not written. */
  readonly tracked: Map<string, Tracked>;
  readonly progress: Pick<ProgressMarks, 'note'>;
  readonly deleting: DeletionsUnderWay;
  /** Whether the journal is closed: a deletion stops trying then. */
  readonly closed: () => boolean;
}

/**
 * The journal's writes of the requests still waiting, a chunk at a time,
 * and what becomes of those done with while their write was out, their
 * partition let go meanwhile included (delivery-journal.ts).
 */
export class RequestWrites {
  readonly #options: RequestWritesOptions;
  /** Requests whose write was out when their partition was let go, until it settles: done meanwhile, deleted after. */
  readonly #outWhenLetGo = new Map<string, Tracked>();

  constructor(options: RequestWritesOptions) {
    this.#options = options;
  }

  /** A request of a partition let go: kept here while its write is out, for its deletion to wait for the write. */
  letGo(tracked: Tracked): void {
    if (tracked.state === 'persisting') this.#outWhenLetGo.set(tracked.delivery.id, tracked);
  }

  /** The request, if its partition was let go while its write was out, until the write settles. */
  outWhenLetGo(id: string): Tracked | undefined {
    return this.#outWhenLetGo.get(id);
  }

  /**
   * Writes a chunk's requests still only in memory once its turn came
   * (those done with before are settled as any other, `remove`); those done
   * with while it was written are deleted, and noted done, once it landed.
   * A worker dying in the middle of a long pass leaves its next holder one
   * chunk at most to send twice, not the pass.
   */
  async write(chunk: readonly Tracked[]): Promise<void> {
    const { tracked: journal, store } = this.#options;
    const writing = chunk.filter(
      (tracked) => tracked.state === 'memory' && journal.get(tracked.delivery.id) === tracked,
    );
    if (writing.length === 0) return;
    for (const tracked of writing) tracked.state = 'persisting';
    const deliveries = writing.map((tracked) => tracked.delivery);
    try {
      await store.acceptAll([], deliveries);
    } catch (error) {
      // A write reported failed (a dropped connection, a timeout) may have landed all the same: deleted once done.
      this.#notWritten(writing);
      throw error;
    }
    for (const tracked of writing) tracked.state = 'stored';
    this.#deleteDoneWhileWritten(writing);
  }

  /**
   * A chunk's write failed: its requests are in memory only again, and
   * perhaps in the store too (deleted once done). Those done with
   * meanwhile are deleted now, to be sure.
   */
  #notWritten(writing: readonly Tracked[]): void {
    for (const tracked of writing) {
      tracked.state = 'memory';
      tracked.storedToo = true;
    }
    this.#deleteDoneWhileWritten(writing);
  }

  /**
   * Those of a chunk done with while it was written: forgotten, noted done
   * for their part, and deleted until the store answers (not awaited: the
   * next chunk's turn does not wait). Left in the store, a request is sent
   * again by whoever reads the partition next, however long ago it was
   * delivered.
   */
  #deleteDoneWhileWritten(writing: readonly Tracked[]): void {
    const { tracked: journal, progress, deleting, store, closed } = this.#options;
    const done: string[] = [];
    for (const tracked of writing) {
      const id = tracked.delivery.id;
      if (this.#outWhenLetGo.get(id) === tracked) this.#outWhenLetGo.delete(id);
      if (tracked.doneWhilePersisting !== true) continue;
      done.push(id);
      // Let go meanwhile, its part may have been taken in again: the request planned anew is not this one.
      if (journal.get(id) === tracked) journal.delete(id);
      tracked.entry?.open.delete(id);
      // Its part is not acknowledged: taken in again, it must not be sent again (as in `remove`).
      if (tracked.entry !== undefined) progress.note(tracked.entry.notify.id, id);
    }
    if (done.length > 0) void deleting.run(done, async () => deleteUntilDone(store, done, closed));
  }
}
