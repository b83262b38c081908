import { notifyIdOf } from '../delivery/intake-plan.js';
import type { Logger } from '../logging/logger.js';
import type { AcceptedNotify, DeliveryStore, PendingDelivery, RetryState } from '../store/delivery-store.js';
import { loggable } from '../logging/loggable-error.js';
import { IntakeStoppedError } from './notify-intake.js';
import { ProgressMarks, type DoneWatch } from './progress-marks.js';
import type { Entry, Tracked } from './journal-entries.js';
import { ChunkedWrites, type ChunkedWriteBounds } from './chunked-writes.js';
import { DeletionsUnderWay } from './deletions-until-done.js';
import { RequestWrites } from './journal-request-writes.js';

export interface DeliveryJournalOptions {
  readonly store: Pick<DeliveryStore, 'acceptAll' | 'remove' | 'saveRetry' | 'markDone'>;
  /** Whether this worker still holds the partition's lease (handing over or not): only then does it write. */
  readonly writable: (partition: number, now: number) => boolean;
  /** A part whose requests are not all done this long after it was taken in is stored (`delivery.persistAfterMs`). */
  readonly persistAfterMs: number;
  readonly logger: Logger;
  readonly now?: () => number;
  /** How waiting requests are written: in chunks, a few writes at a time (chunked-writes.ts; its defaults). */
  readonly writes?: ChunkedWriteBounds;
}

/**
 * What makes a `notify` part safe to acknowledge (docs/delivery.md): its
 * message stays in the partition queue, unacknowledged, until every
 * request it planned is done with or stored. Requests a gateway answers at
 * once never touch the store; those still waiting `persistAfterMs` after
 * their part was taken in are stored, with the parts before them. Parts are
 * secured in the order they were taken in, so the store only ever holds
 * requests older than every part still in the queue: a worker that dies
 * leaves its next holder the store's requests, then the queue's parts, in
 * publish order, and a part taken in again is planned again (a gateway may
 * see what was sent before the crash a second time, never less).
 *
 * The scheduler tells it what is done with through the store port it
 * uses (`remove`, `saveRetry`): a stored request is deleted, one only in
 * memory is merely forgotten.
 */
export class DeliveryJournal {
  readonly #options: DeliveryJournalOptions;
  readonly #log: Logger;
  readonly #now: () => number;
  /** Per partition, its parts not yet secured, in intake order. */
  readonly #entries = new Map<number, Entry[]>();
  readonly #tracked = new Map<string, Tracked>();
  /** Deletions under way: a read of the partition meanwhile lists them, done with all the same. */
  readonly #deleting = new DeletionsUnderWay();
  /** One pass at a time per partition: parts are secured in order. */
  readonly #passes = new Map<number, Promise<void>>();
  readonly #again = new Set<number>();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Requests done with while their part is not secured. */
  readonly #progress: ProgressMarks;
  /** The requests' writes, every partition's taking turns. */
  readonly #writes: ChunkedWrites;
  readonly #requestWrites: RequestWrites;

  constructor(options: DeliveryJournalOptions) {
    this.#options = options;
    this.#log = options.logger;
    this.#now = options.now ?? Date.now;
    this.#progress = new ProgressMarks(options.store, options.logger);
    this.#writes = new ChunkedWrites(options.writes);
    this.#requestWrites = new RequestWrites({
      store: options.store,
      tracked: this.#tracked,
      progress: this.#progress,
      deleting: this.#deleting,
      closed: () => this.#closed,
    });
  }

  /** Parts not yet secured, all partitions together (for metrics and tests). */
  get unsecured(): number {
    let count = 0;
    for (const entries of this.#entries.values()) count += entries.length;
    return count;
  }

  /** Requests it keeps track of, of one partition or of all (for metrics and tests: each holds its body). */
  tracking(partition?: number): number {
    if (partition === undefined) return this.#tracked.size;
    let count = 0;
    for (const tracked of this.#tracked.values()) if (tracked.delivery.partition === partition) count += 1;
    return count;
  }

  /** Looks at the parts every half `persistAfterMs`. */
  start(): void {
    this.#timer = setInterval(
      () => {
        for (const partition of this.#entries.keys()) void this.#schedule(partition, false);
      },
      Math.max(10, Math.floor(this.#options.persistAfterMs / 2)),
    );
    this.#timer.unref();
  }

  /**
   * A part was planned: resolves once it may be acknowledged, rejects with
   * `IntakeStoppedError` when its partition is let go without writing
   * (`forget`). Registered at once, before the requests are handed to the
   * scheduler.
   */
  async admit(partition: number, notify: AcceptedNotify, deliveries: readonly PendingDelivery[]): Promise<void> {
    let resolve: () => void = () => undefined;
    let reject: (error: Error) => void = () => undefined;
    const promise = new Promise<void>((done, fail) => {
      resolve = done;
      reject = fail;
    });
    const entry: Entry = { partition, notify, open: new Set(), resolve, reject };
    for (const delivery of deliveries) {
      // Planned before (the same part again, after a lost acknowledgement): it belongs to its first entry.
      if (this.#tracked.has(delivery.id)) continue;
      this.#tracked.set(delivery.id, { delivery, state: 'memory', entry });
      entry.open.add(delivery.id);
    }
    const entries = this.#entries.get(partition);
    if (entries === undefined) this.#entries.set(partition, [entry]);
    else entries.push(entry);
    if (entry.open.size === 0) void this.#schedule(partition, false);
    return promise;
  }

  /** Requests read from the store (a partition taken over): deleted from it once done. */
  stored(deliveries: readonly PendingDelivery[]): void {
    for (const delivery of deliveries) {
      const tracked = this.#tracked.get(delivery.id);
      // Being deleted, or to be once its write settles: the scheduler holds it no more (nor again).
      if (
        this.#deleting.has(delivery.id) ||
        this.#requestWrites.outWhenLetGo(delivery.id)?.doneWhilePersisting === true
      )
        continue;
      if (tracked === undefined) this.#tracked.set(delivery.id, { delivery, state: 'stored', taken: true });
      // Also planned from its part here: the store's copy must not outlive it.
      else if (tracked.state === 'memory') tracked.storedToo = true;
    }
  }

  /** The requests are done with: deleted from the store if they are there. */
  async remove(ids: readonly string[]): Promise<void> {
    const deleting: string[] = [];
    const touched = new Set<number>();
    for (const id of ids) {
      const tracked = this.#tracked.get(id) ?? this.#requestWrites.outWhenLetGo(id);
      if (tracked === undefined) {
        deleting.push(id);
        // Let go with its partition (a lease run out) while its deletion waited for its batch: its part may come back.
        this.#progress.note(notifyIdOf(id), id);
        continue;
      }
      if (tracked.state === 'persisting') {
        // Deleted now, it would be stored after all once its write landed, for the partition's next reader to send.
        // Let go, its part is back in the queue already: noted done at once.
        if (!this.#tracked.has(id)) this.#progress.note(notifyIdOf(id), id);
        tracked.doneWhilePersisting = true;
        continue;
      }
      this.#tracked.delete(id);
      if (tracked.state === 'stored' || tracked.storedToo === true) deleting.push(id);
      if (tracked.entry !== undefined) {
        tracked.entry.open.delete(id);
        touched.add(tracked.entry.partition);
        // Its part is not acknowledged yet: taken in again, it must not be sent again.
        this.#progress.note(tracked.entry.notify.id, id);
      } else if (tracked.taken === true) this.#progress.note(notifyIdOf(id), id);
    }
    for (const partition of touched) void this.#schedule(partition, false);
    if (deleting.length > 0) await this.#deleting.run(deleting, async () => this.#options.store.remove(deleting));
  }

  /**
   * For the intake of a part about to read the part's progress: what of it
   * was done with here and may not be in the store yet, and what is done
   * with until `end` (progress-marks.ts).
   */
  watchDone(part: string): DoneWatch {
    return this.#progress.watch(part);
  }

  async saveRetry(id: string, retry: RetryState): Promise<void> {
    // Only in memory, the backoff lives with the scheduler; stored later, it starts afresh after a crash.
    const tracked = this.#tracked.get(id);
    if (tracked?.state === 'stored' || tracked?.storedToo === true) await this.#options.store.saveRetry(id, retry);
  }

  /**
   * Resolves once the partition's pass under way, and the one queued after
   * it, have landed or failed: what this worker stored of a partition it
   * let go is in the store by then, for it to read when it takes the
   * partition back.
   */
  async written(partition: number): Promise<void> {
    for (let pass = this.#passes.get(partition); pass !== undefined; pass = this.#passes.get(partition)) await pass;
  }

  /** Secures every part of the partition now (a handover, a shutdown): what is not done is stored. */
  async flush(partition: number): Promise<void> {
    await this.#schedule(partition, true);
  }

  /**
   * A handover's flush (`flush`) is over: the parts it could not secure
   * (the store down) go back to the queue, in order, for the next holder,
   * which plans them again (what was sent of them may be sent twice).
   * What the journal tracks of the partition stays until `released`: the
   * sends still in flight are settled against it.
   */
  returnUnsecured(partition: number): void {
    const entries = this.#entries.get(partition) ?? [];
    this.#entries.delete(partition);
    for (const entry of entries) entry.reject(new IntakeStoppedError());
  }

  /** Another worker took the partition over (this one lost its lease): nothing is written any more; its parts go back. */
  forget(partition: number): void {
    this.#letGo(partition);
  }

  /**
   * The partition was handed over cleanly: its parts secured (`flush`),
   * its sends let go, its lease about to be released. What the journal
   * still tracks of it (the requests stored at the flush, bodies included)
   * is the next holder's now, read from the store: kept here, it would
   * stay for the life of the process, a partition's backlog per handover.
   * A part the flush could not secure (the store down) goes back to the
   * queue.
   */
  released(partition: number): void {
    this.#letGo(partition);
  }

  #letGo(partition: number): void {
    this.returnUnsecured(partition);
    for (const [id, tracked] of this.#tracked) {
      if (tracked.delivery.partition !== partition) continue;
      this.#tracked.delete(id);
      this.#requestWrites.letGo(tracked);
    }
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#timer);
    this.#progress.stop();
  }

  /** Runs a pass for the partition after the one under way (one more at most is queued). */
  async #schedule(partition: number, force: boolean): Promise<void> {
    const running = this.#passes.get(partition);
    if (running !== undefined) {
      if (!force) {
        this.#again.add(partition);
        return running;
      }
      await running;
      return this.#schedule(partition, force);
    }
    const pass = this.#pass(partition, force)
      .catch((error: unknown) => {
        this.#log.warn({ err: loggable(error), partition }, 'cannot secure taken-in notifications yet; trying again');
      })
      .finally(() => {
        this.#passes.delete(partition);
        if (this.#again.delete(partition)) void this.#schedule(partition, false);
      });
    this.#passes.set(partition, pass);
    return pass;
  }

  /**
   * Secures the longest run of the partition's oldest parts that are done,
   * or old enough (`force`: all of them): their open requests, then their
   * intake records are written, then they are acknowledged.
   *
   * Each write is started only while the lease holds, and the parts are
   * acknowledged only if it still holds once the writes landed: a write
   * that lands after the lease came into doubt may land after the next
   * holder read the partition, so its parts go back to the queue (the next
   * holder plans them again) rather than being acknowledged here. The
   * records go last, after a second look at the lease: a record the next
   * holder finds makes it skip the part, so it must never land late.
   */
  async #pass(partition: number, force: boolean): Promise<void> {
    const entries = this.#entries.get(partition);
    if (entries === undefined || entries.length === 0) return;
    const now = this.#now();
    const oldEnough = now - this.#options.persistAfterMs;
    let count = 0;
    while (count < entries.length) {
      const entry = entries[count] as Entry;
      if (!force && entry.open.size > 0 && entry.notify.acceptedAt > oldEnough) break;
      count += 1;
    }
    if (count === 0) return;
    // A worker whose lease is in doubt writes nothing: its parts wait (unacknowledged) for a renewal, or go back.
    if (!this.#holds(partition)) return;
    const prefix = entries.slice(0, count);
    const waiting: Tracked[] = [];
    for (const entry of prefix)
      for (const id of entry.open) {
        const tracked = this.#tracked.get(id);
        if (tracked?.state === 'memory') waiting.push(tracked);
      }
    try {
      const chunk = async (tracked: readonly Tracked[]) => this.#requestWrites.write(tracked);
      // The lease came into doubt between two chunks: the parts wait, unacknowledged, as when it was at the start
      // (the chunks written stay stored; the next pass writes the rest).
      if ((await this.#writes.write(waiting, chunk, () => this.#holds(partition))) < waiting.length) return;
    } catch (error) {
      this.#log.warn(
        { err: loggable(error), partition, parts: prefix.length },
        'cannot store pending notifications yet; their messages wait, unacknowledged',
      );
      return;
    }
    const secured = (await this.#record(partition, prefix)) && this.#holds(partition);
    // The entries may have been forgotten meanwhile (lost lease): only those still listed are acknowledged.
    if (secured) {
      const current = this.#entries.get(partition);
      if (current === entries) entries.splice(0, count);
      for (const entry of prefix) {
        for (const id of entry.open) {
          const tracked = this.#tracked.get(id);
          if (tracked?.entry === entry) tracked.entry = undefined;
        }
        entry.resolve();
      }
    } else {
      this.#log.warn(
        { partition, parts: prefix.length },
        'the partition lease came into doubt while its notifications were stored: their messages are not acknowledged',
      );
    }
  }

  /** Writes the parts' intake records if the lease still holds; whether they were written. */
  async #record(partition: number, prefix: readonly Entry[]): Promise<boolean> {
    if (!this.#holds(partition)) return false;
    try {
      await this.#options.store.acceptAll(
        prefix.map((entry) => entry.notify),
        [],
      );
      return true;
    } catch (error) {
      this.#log.warn(
        { err: loggable(error), partition, parts: prefix.length },
        'cannot record stored notifications yet; their messages wait, unacknowledged',
      );
      return false;
    }
  }

  #holds(partition: number): boolean {
    return this.#options.writable(partition, this.#now());
  }
}
