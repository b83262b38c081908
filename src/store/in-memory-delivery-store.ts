import type { AcceptedNotify, DeliveryStore, PendingDelivery, RetryState } from './delivery-store.js';

/**
 * The delivery store's port in memory, for the engine's unit tests: the
 * same rules as the MongoDB store (`delivery-store.ts`). Requests are
 * copied in and out so that no caller mutates stored state through a
 * reference it still holds.
 */
export interface InMemoryDeliveryStoreOptions {
  /** The partition count stored with each request (`delivery.partitions`); absent: none. */
  readonly partitions?: number | undefined;
}

/** What two views of one in-memory store share (`withPartitions`). */
interface Stored {
  readonly pending: Map<string, PendingDelivery>;
  /** The partition count each request's partition was computed with, where one was stored. */
  readonly counts: Map<string, number>;
  readonly accepted: Map<string, AcceptedNotify>;
  readonly done: Map<string, Set<string>>;
}

export class InMemoryDeliveryStore implements DeliveryStore {
  readonly #stored: Stored;
  readonly #pending: Map<string, PendingDelivery>;
  readonly #counts: Map<string, number>;
  readonly #accepted: Map<string, AcceptedNotify>;
  readonly #done: Map<string, Set<string>>;
  readonly #partitions: number | undefined;

  constructor(options: InMemoryDeliveryStoreOptions = {}, stored?: Stored) {
    this.#stored = stored ?? { pending: new Map(), counts: new Map(), accepted: new Map(), done: new Map() };
    this.#pending = this.#stored.pending;
    this.#counts = this.#stored.counts;
    this.#accepted = this.#stored.accepted;
    this.#done = this.#stored.done;
    this.#partitions = options.partitions;
  }

  /** For tests: the same stored data, as a worker with another `delivery.partitions` sees it. */
  withPartitions(partitions: number): InMemoryDeliveryStore {
    return new InMemoryDeliveryStore({ partitions }, this.#stored);
  }

  async ensureIndexes(): Promise<void> {
    await Promise.resolve();
  }

  async assignPartitions(partitionOfUser: (userId: string) => number): Promise<number> {
    await Promise.resolve();
    let assigned = 0;
    const count = this.#partitions;
    for (const [id, delivery] of this.#pending) {
      const current = count === undefined ? Number.isInteger(delivery.partition) : this.#counts.get(id) === count;
      if (current) continue;
      this.#pending.set(id, { ...delivery, partition: partitionOfUser(delivery.userId) });
      if (count !== undefined) this.#counts.set(id, count);
      assigned += 1;
    }
    return assigned;
  }

  /** For tests: stores a request as an older version of the service did, without a partition. */
  storeUnpartitioned(delivery: Omit<PendingDelivery, 'partition'>): void {
    this.#pending.set(delivery.id, copy(delivery as PendingDelivery));
  }

  async findAccepted(id: string): Promise<AcceptedNotify | undefined> {
    await Promise.resolve();
    const found = this.#accepted.get(id);
    return found === undefined ? undefined : { ...found };
  }

  async findProgress(id: string): Promise<{ accepted?: AcceptedNotify; done: ReadonlySet<string> }> {
    const accepted = await this.findAccepted(id);
    const done = new Set(this.#done.get(id));
    return accepted === undefined ? { done } : { accepted, done };
  }

  async markDone(doneByPart: ReadonlyMap<string, readonly string[]>): Promise<void> {
    await Promise.resolve();
    for (const [part, ids] of doneByPart) {
      const done = this.#done.get(part) ?? new Set<string>();
      for (const id of ids) done.add(id);
      this.#done.set(part, done);
    }
  }

  async findAcceptedMany(ids: readonly string[]): Promise<readonly AcceptedNotify[]> {
    await Promise.resolve();
    return ids.flatMap((id) => {
      const found = this.#accepted.get(id);
      return found === undefined ? [] : [{ ...found }];
    });
  }

  async accept(notify: AcceptedNotify, deliveries: readonly PendingDelivery[]): Promise<void> {
    await this.acceptAll([notify], deliveries);
  }

  async acceptAll(notifies: readonly AcceptedNotify[], deliveries: readonly PendingDelivery[]): Promise<void> {
    await Promise.resolve();
    // A redelivered notify: what is stored stays as it is.
    for (const delivery of deliveries) {
      if (this.#pending.has(delivery.id)) continue;
      this.#pending.set(delivery.id, copy(delivery));
      if (this.#partitions !== undefined) this.#counts.set(delivery.id, this.#partitions);
    }
    for (const notify of notifies) if (!this.#accepted.has(notify.id)) this.#accepted.set(notify.id, { ...notify });
  }

  async listPartition(partition: number): Promise<readonly PendingDelivery[]> {
    await Promise.resolve();
    return [...this.#pending.values()]
      .filter((delivery) => delivery.partition === partition)
      .map(copy)
      .sort(byKeyThenSeq);
  }

  async remove(ids: readonly string[]): Promise<void> {
    await Promise.resolve();
    for (const id of ids) {
      this.#pending.delete(id);
      this.#counts.delete(id);
    }
  }

  async saveRetry(id: string, retry: RetryState): Promise<void> {
    await Promise.resolve();
    const delivery = this.#pending.get(id);
    if (delivery === undefined) return;
    this.#pending.set(id, { ...delivery, retry: { ...retry } });
  }

  /** For tests: how many requests are pending in all. */
  get size(): number {
    return this.#pending.size;
  }
}

/** As MongoDB keeps it: a body not encoded yet is stored as its text, as `MongoDeliveryStore` writes it. */
function copy(delivery: PendingDelivery): PendingDelivery {
  const body = typeof delivery.body === 'string' ? delivery.body : delivery.body.encodeBody();
  return structuredClone({ ...delivery, body });
}

/** Oldest first per key; keys in code-point order, as MongoDB sorts strings. */
function byKeyThenSeq(a: PendingDelivery, b: PendingDelivery): number {
  if (a.key !== b.key) return a.key < b.key ? -1 : 1;
  return a.seq - b.seq;
}
