import type { Collection, Db } from 'mongodb';
import { guard, isDuplicateKey } from './mongo-errors.js';
import type { PartitionLease, PartitionLeaseStore, WorkerBeat } from './partition-lease-store.js';

interface WorkerDocument {
  _id: string;
  /** ms */
  until: number;
  /** Its `delivery.partitions`: absent from the heartbeats of versions before it was checked. */
  partitions?: number;
}

interface PartitionDocument {
  _id: number;
  owner: string | null;
  /** ms */
  until: number;
}

export interface MongoPartitionLeaseStoreOptions {
  /** `<name>_workers` and `<name>_partitions` (the pending collection's name). */
  readonly collectionPrefix: string;
  readonly operationTimeoutMs?: number | undefined;
}

/**
 * Partition leases on MongoDB: one document per worker and one per
 * partition, each read or written by `_id` (or read whole: a few dozen
 * documents). A claim is one filtered upsert, so of two workers claiming
 * at once, one wins (the other's upsert collides on `_id`).
 */
export class MongoPartitionLeaseStore implements PartitionLeaseStore {
  readonly #workers: Collection<WorkerDocument>;
  readonly #partitions: Collection<PartitionDocument>;
  readonly #limit: { maxTimeMS?: number };

  constructor(db: Db, options: MongoPartitionLeaseStoreOptions) {
    this.#workers = db.collection<WorkerDocument>(`${options.collectionPrefix}_workers`);
    this.#partitions = db.collection<PartitionDocument>(`${options.collectionPrefix}_partitions`);
    const timeout = options.operationTimeoutMs ?? 0;
    this.#limit = timeout > 0 ? { maxTimeMS: timeout } : {};
  }

  async ensureIndexes(): Promise<void> {
    // Every query is by `_id` or reads the whole (small) collection.
    await Promise.resolve();
  }

  async heartbeat(worker: string, until: number, partitions?: number): Promise<void> {
    const beat = partitions === undefined ? { until } : { until, partitions };
    await guard(async () => this.#workers.updateOne({ _id: worker }, { $set: beat }, { upsert: true, ...this.#limit }));
  }

  async liveWorkers(now: number): Promise<readonly string[]> {
    return (await this.liveBeats(now)).map((beat) => beat.worker);
  }

  async liveBeats(now: number): Promise<readonly WorkerBeat[]> {
    const docs = await guard(async () => this.#workers.find({}, this.#limit).toArray());
    const dead = docs.filter((doc) => doc.until < now - FORGET_AFTER_MS).map((doc) => doc._id);
    // Workers gone long ago are forgotten, so the collection stays as small as the pool.
    if (dead.length > 0) await guard(async () => this.#workers.deleteMany({ _id: { $in: dead } }, this.#limit));
    return docs
      .filter((doc) => doc.until >= now)
      .map((doc) =>
        typeof doc.partitions === 'number' ? { worker: doc._id, partitions: doc.partitions } : { worker: doc._id },
      );
  }

  async leave(worker: string): Promise<void> {
    await guard(async () => this.#workers.deleteOne({ _id: worker }, this.#limit));
  }

  async leases(): Promise<readonly PartitionLease[]> {
    const docs = await guard(async () => this.#partitions.find({}, this.#limit).sort({ _id: 1 }).toArray());
    return docs.map((doc) => ({ partition: doc._id, owner: doc.owner, until: doc.until }));
  }

  async claim(partition: number, owner: string, until: number, now: number): Promise<boolean> {
    try {
      const doc = await guard(async () =>
        this.#partitions.findOneAndUpdate(
          { _id: partition, $or: [{ owner: null }, { until: { $lt: now } }] },
          { $set: { owner, until } },
          { upsert: true, returnDocument: 'after', ...this.#limit },
        ),
      );
      return doc?.owner === owner && doc.until === until;
    } catch (error) {
      // Held by another worker: the upsert collided with its document.
      if (isDuplicateKey(error)) return false;
      throw error;
    }
  }

  async renew(owner: string, partitions: readonly number[], until: number): Promise<readonly number[]> {
    if (partitions.length === 0) return [];
    const ids = [...partitions];
    await guard(async () =>
      this.#partitions.updateMany({ _id: { $in: ids }, owner }, { $set: { until } }, this.#limit),
    );
    const docs = await guard(async () =>
      this.#partitions.find({ _id: { $in: ids } }, { projection: { owner: 1 }, ...this.#limit }).toArray(),
    );
    return docs.filter((doc) => doc.owner === owner).map((doc) => doc._id);
  }

  async release(partition: number, owner: string): Promise<void> {
    await guard(async () =>
      this.#partitions.updateOne({ _id: partition, owner }, { $set: { owner: null, until: 0 } }, this.#limit),
    );
  }
}

/** A worker whose heartbeat stopped this long ago is deleted from the list. */
const FORGET_AFTER_MS = 3_600_000;
