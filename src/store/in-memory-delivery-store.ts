import type { AcceptedNotify, DeliveryStore, PendingDelivery, RetryState } from './delivery-store.js';

/**
 * The delivery store's port in memory, for the engine's unit tests: the
 * same rules as the MongoDB store (`delivery-store.ts`). Requests are
 * copied in and out so that no caller mutates stored state through a
 * reference it still holds.
 */
export class InMemoryDeliveryStore implements DeliveryStore {
  readonly #pending = new Map<string, PendingDelivery>();
  readonly #accepted = new Map<string, AcceptedNotify>();

  async ensureIndexes(): Promise<void> {
    await Promise.resolve();
  }

  async assignPartitions(partitionOfUser: (userId: string) => number): Promise<number> {
    await Promise.resolve();
    let assigned = 0;
    for (const [id, delivery] of this.#pending) {
      if (Number.isInteger(delivery.partition)) continue;
      this.#pending.set(id, { ...delivery, partition: partitionOfUser(delivery.userId) });
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

  readonly #done = new Map<string, Set<string>>();

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
    for (const delivery of deliveries)
      if (!this.#pending.has(delivery.id)) this.#pending.set(delivery.id, copy(delivery));
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
    for (const id of ids) this.#pending.delete(id);
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

function copy(delivery: PendingDelivery): PendingDelivery {
  return structuredClone(delivery);
}

/** Oldest first per key; keys in code-point order, as MongoDB sorts strings. */
function byKeyThenSeq(a: PendingDelivery, b: PendingDelivery): number {
  if (a.key !== b.key) return a.key < b.key ? -1 : 1;
  return a.seq - b.seq;
}
