import type { PartitionLease, PartitionLeaseStore, WorkerBeat } from './partition-lease-store.js';

/**
 * The partition leases in memory, for unit tests: the same rules as the
 * MongoDB store. Each call runs to its end without yielding, so two claims
 * cannot interleave (MongoDB gets that from a filtered update).
 */
export class InMemoryPartitionLeaseStore implements PartitionLeaseStore {
  readonly #workers = new Map<string, { until: number; partitions?: number | undefined }>();
  readonly #leases = new Map<number, PartitionLease>();

  async ensureIndexes(): Promise<void> {
    await Promise.resolve();
  }

  async heartbeat(worker: string, until: number, partitions?: number): Promise<void> {
    await Promise.resolve();
    this.#workers.set(worker, { until, partitions });
  }

  async liveWorkers(now: number): Promise<readonly string[]> {
    return (await this.liveBeats(now)).map((beat) => beat.worker);
  }

  async liveBeats(now: number): Promise<readonly WorkerBeat[]> {
    await Promise.resolve();
    return [...this.#workers]
      .filter(([, beat]) => beat.until >= now)
      .map(([worker, beat]) => (beat.partitions === undefined ? { worker } : { worker, partitions: beat.partitions }));
  }

  async leave(worker: string): Promise<void> {
    await Promise.resolve();
    this.#workers.delete(worker);
  }

  async leases(): Promise<readonly PartitionLease[]> {
    await Promise.resolve();
    return [...this.#leases.values()].sort((a, b) => a.partition - b.partition);
  }

  async claim(partition: number, owner: string, until: number, now: number): Promise<boolean> {
    await Promise.resolve();
    const lease = this.#leases.get(partition);
    if (lease !== undefined && lease.owner !== null && lease.until >= now) return false;
    this.#leases.set(partition, { partition, owner, until });
    return true;
  }

  async renew(owner: string, partitions: readonly number[], until: number): Promise<readonly number[]> {
    await Promise.resolve();
    const held: number[] = [];
    for (const partition of partitions) {
      const lease = this.#leases.get(partition);
      if (lease?.owner !== owner) continue;
      this.#leases.set(partition, { partition, owner, until });
      held.push(partition);
    }
    return held;
  }

  async release(partition: number, owner: string): Promise<void> {
    await Promise.resolve();
    if (this.#leases.get(partition)?.owner === owner) this.#leases.set(partition, { partition, owner: null, until: 0 });
  }
}
