import type { AcceptedNotify, DeliveryStore, Lease, PendingDelivery, RetryState } from './delivery-store.js';

/** A stored request with its holder; `owner` undefined: released, held by nobody. */
interface Held {
  readonly delivery: PendingDelivery;
  readonly owner: string | undefined;
  readonly leaseUntil: number;
}

/**
 * The delivery store's port in memory, for the engine's unit tests: the
 * same holder rules as the MongoDB store (`delivery-store.ts`). Every call
 * runs to its end without yielding in between, so two concurrent claims
 * cannot interleave here as they could on a server; the MongoDB store gets
 * the same effect from its recovery lock. Requests are copied in and out so
 * that no caller mutates stored state through a reference it still holds.
 */
export class InMemoryDeliveryStore implements DeliveryStore {
  readonly #pending = new Map<string, Held>();
  readonly #accepted = new Map<string, AcceptedNotify>();

  async ensureIndexes(): Promise<void> {
    await Promise.resolve();
  }

  async findAccepted(id: string): Promise<AcceptedNotify | undefined> {
    await Promise.resolve();
    const found = this.#accepted.get(id);
    return found === undefined ? undefined : { ...found };
  }

  async accept(
    notify: AcceptedNotify,
    deliveries: readonly PendingDelivery[],
    lease: Lease,
    now: number,
  ): Promise<readonly PendingDelivery[]> {
    await Promise.resolve();
    const keys = new Set(deliveries.map((d) => d.key));
    const holders = new Map<string, Lease>();
    for (const held of this.#pending.values()) {
      if (!keys.has(held.delivery.key) || !isLive(held, now) || held.owner === undefined) continue;
      holders.set(held.delivery.key, { owner: held.owner, until: held.leaseUntil });
    }
    for (const delivery of deliveries) {
      // A redelivered notify: what is stored stays as it is.
      if (this.#pending.has(delivery.id)) continue;
      const holder = holders.get(delivery.key) ?? lease;
      this.#pending.set(delivery.id, { delivery: copy(delivery), owner: holder.owner, leaseUntil: holder.until });
    }
    // Keys that went to `lease` take their expired requests along: a key is never split.
    for (const [id, held] of this.#pending) {
      const { key } = held.delivery;
      if (!keys.has(key) || isLive(held, now) || holders.has(key)) continue;
      this.#pending.set(id, { ...held, owner: lease.owner, leaseUntil: lease.until });
    }
    if (!this.#accepted.has(notify.id)) this.#accepted.set(notify.id, { ...notify });
    return this.#heldBy(lease.owner, keys);
  }

  async renew(lease: Lease): Promise<number> {
    await Promise.resolve();
    let renewed = 0;
    for (const [id, held] of this.#pending) {
      if (held.owner !== lease.owner) continue;
      this.#pending.set(id, { ...held, leaseUntil: lease.until });
      renewed += 1;
    }
    return renewed;
  }

  async claimExpired(lease: Lease, now: number): Promise<readonly PendingDelivery[]> {
    await Promise.resolve();
    const taken = new Set<string>();
    for (const [id, held] of this.#pending) {
      if (isLive(held, now)) continue;
      this.#pending.set(id, { ...held, owner: lease.owner, leaseUntil: lease.until });
      taken.add(id);
    }
    return this.#heldBy(lease.owner).filter((delivery) => taken.has(delivery.id));
  }

  async listHeld(owner: string): Promise<readonly PendingDelivery[]> {
    await Promise.resolve();
    return this.#heldBy(owner);
  }

  async remove(ids: readonly string[]): Promise<void> {
    await Promise.resolve();
    for (const id of ids) this.#pending.delete(id);
  }

  async saveRetry(id: string, retry: RetryState): Promise<void> {
    await Promise.resolve();
    const held = this.#pending.get(id);
    if (held === undefined) return;
    this.#pending.set(id, { ...held, delivery: { ...held.delivery, retry: { ...retry } } });
  }

  async release(owner: string): Promise<void> {
    await Promise.resolve();
    for (const [id, held] of this.#pending) {
      // Expired at once: the next claim of any worker takes them.
      if (held.owner === owner) this.#pending.set(id, { ...held, owner: undefined, leaseUntil: 0 });
    }
  }

  #heldBy(owner: string, keys?: ReadonlySet<string>): readonly PendingDelivery[] {
    return [...this.#pending.values()]
      .filter((held) => held.owner === owner && (keys === undefined || keys.has(held.delivery.key)))
      .map((held) => copy(held.delivery))
      .sort(byKeyThenSeq);
  }
}

/** A lease is live up to and including its `until`; expired strictly after it. */
function isLive(held: Held, now: number): boolean {
  return held.owner !== undefined && held.leaseUntil >= now;
}

function copy(delivery: PendingDelivery): PendingDelivery {
  return structuredClone(delivery);
}

/** Oldest first per key; keys in code-point order, as MongoDB sorts strings. */
function byKeyThenSeq(a: PendingDelivery, b: PendingDelivery): number {
  if (a.key !== b.key) return a.key < b.key ? -1 : 1;
  return a.seq - b.seq;
}
