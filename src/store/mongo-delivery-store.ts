import {
  MongoBulkWriteError,
  type Collection,
  type Db,
  type Filter,
  type OptionalUnlessRequiredId,
  type WriteError,
} from 'mongodb';
import type { AcceptedNotify, DeliveryStore, PendingDelivery, RetryState } from './delivery-store.js';
import { classifyMongoError, DUPLICATE_KEY, guard } from './mongo-errors.js';
import { StoreUnavailableError } from './push-store.js';

/** One gateway request in the pending collection. */
export interface PendingDeliveryDocument {
  /** `PendingDelivery.id`: a redelivered `notify` inserts the same IDs, which then collide. */
  _id: string;
  /** Absent on requests stored before partitions (`assignPartitions` fills it in). */
  partition?: number;
  /** The `delivery.partitions` `partition` was computed with; absent before it was stored. */
  partitions?: number;
  key: string;
  seq: number;
  user_id: string;
  url: string;
  body_json: string;
  devices: { app_id: string; pushkey: string }[];
  /** ms */
  accepted_at: number;
  /** A badge update. */
  counts_only?: true;
  retry?: { failures: number; first_failed_at: number; retry_at: number };
}

/**
 * The record of one `notify` part taken in; a Date, for the TTL index to
 * expire it. Beside them, under `progress:<part ID>`, the requests of a
 * part not yet secured that are done with (no `recipients`).
 */
export interface AcceptedNotifyDocument {
  _id: string;
  recipients?: number;
  devices?: number;
  done?: string[];
  accepted_at: Date;
}

const PROGRESS = 'progress:';

export interface MongoDeliveryStoreOptions {
  readonly pendingCollection: string;
  readonly acceptedCollection: string;
  /** How long the record of a `notify` is kept (its `messageId` answered again), from its intake. */
  readonly acceptedRetentionSeconds: number;
  /** The server gives up an operation after this (`maxTimeMS`); 0 or absent: no limit. */
  readonly operationTimeoutMs?: number | undefined;
  /** `delivery.partitions`, stored with each request; absent: none stored, and none moved but the unpartitioned. */
  readonly partitions?: number | undefined;
}

/** IDs per `deleteMany` (and documents per migration step): a bounded command, whatever the number removed. */
const REMOVE_CHUNK = 1_000;
/**
 * Requests per read of a partition (a few MB of bodies): each page is a
 * command of its own under `maxTimeMS`, so a partition of any size can be
 * read, where one cursor's time limit counts all its batches together.
 */
export const LIST_PAGE = 2_000;
/** Indexes of the per-request leases this store kept before partitions: dropped, as nothing reads them. */
const RETIRED_INDEXES = ['pending_owner_key_seq', 'pending_lease_until'];

/**
 * The delivery store on MongoDB without transactions (the test stand-in has
 * none): every step is a single-collection command, ordered so that a crash
 * between two of them leaves nothing lost — requests before their intake
 * record, and a retried intake fills in what is missing. Only the holder of
 * a partition's lease writes its requests, so no two writers race here.
 */
export class MongoDeliveryStore implements DeliveryStore {
  readonly #pending: Collection<PendingDeliveryDocument>;
  readonly #accepted: Collection<AcceptedNotifyDocument>;
  readonly #retentionSeconds: number;
  /** Spread into every command's options. */
  readonly #limit: { maxTimeMS?: number };
  readonly #partitions: number | undefined;

  constructor(db: Db, options: MongoDeliveryStoreOptions) {
    this.#pending = db.collection<PendingDeliveryDocument>(options.pendingCollection);
    this.#accepted = db.collection<AcceptedNotifyDocument>(options.acceptedCollection);
    this.#retentionSeconds = options.acceptedRetentionSeconds;
    const timeout = options.operationTimeoutMs ?? 0;
    this.#limit = timeout > 0 ? { maxTimeMS: timeout } : {};
    this.#partitions = options.partitions;
  }

  async ensureIndexes(): Promise<void> {
    await guard(async () => {
      await this.#pending.createIndexes(
        [
          // listPartition: a partition's requests, a page at a time.
          { key: { partition: 1, _id: 1 }, name: 'pending_partition_id' },
          // What listPartition read before pages: kept while workers of earlier versions may still read by it.
          { key: { partition: 1, key: 1, seq: 1 }, name: 'pending_partition_key_seq' },
          // assignPartitions: the requests of another partition count, without reading the others.
          { key: { partitions: 1 }, name: 'pending_partition_count' },
        ],
        this.#limit,
      );
      await this.#accepted.createIndex(
        { accepted_at: 1 },
        { name: 'accepted_ttl', expireAfterSeconds: this.#retentionSeconds, ...this.#limit },
      );
    });
    for (const name of RETIRED_INDEXES) await this.#pending.dropIndex(name).catch(() => undefined);
  }

  async assignPartitions(partitionOfUser: (userId: string) => number): Promise<number> {
    const count = this.#partitions;
    // `$ne` matches a request without the field too: stored before partitions, or before their count was.
    const stale: Filter<PendingDeliveryDocument> =
      count === undefined ? { partition: { $exists: false } } : { partitions: { $ne: count } };
    let assigned = 0;
    for (;;) {
      const docs = await guard(async () =>
        this.#pending
          .find(stale, { projection: { _id: 1, user_id: 1 }, limit: REMOVE_CHUNK, ...this.#limit })
          .toArray(),
      );
      if (docs.length === 0) return assigned;
      await guard(async () =>
        this.#pending.bulkWrite(
          docs.map((doc) => ({
            updateOne: {
              filter: { _id: doc._id, ...stale },
              update: {
                $set: {
                  partition: partitionOfUser(doc.user_id),
                  ...(count === undefined ? {} : { partitions: count }),
                },
              },
            },
          })),
          { ordered: false, ...this.#limit },
        ),
      );
      assigned += docs.length;
    }
  }

  async findAccepted(id: string): Promise<AcceptedNotify | undefined> {
    const doc = await guard(async () => this.#accepted.findOne({ _id: id }, this.#limit));
    return doc === null ? undefined : fromRecord(doc);
  }

  async findProgress(id: string): Promise<{ accepted?: AcceptedNotify; done: ReadonlySet<string> }> {
    // One keyed read for both: the record and the progress beside it.
    const docs = await guard(async () =>
      this.#accepted.find({ _id: { $in: [id, `${PROGRESS}${id}`] } }, this.#limit).toArray(),
    );
    const record = docs.find((doc) => doc._id === id);
    const done = new Set(docs.find((doc) => doc._id !== id)?.done ?? []);
    const accepted = record === undefined ? undefined : fromRecord(record);
    return accepted === undefined ? { done } : { accepted, done };
  }

  async markDone(doneByPart: ReadonlyMap<string, readonly string[]>): Promise<void> {
    if (doneByPart.size === 0) return;
    const now = new Date();
    await guard(async () =>
      this.#accepted.bulkWrite(
        [...doneByPart].map(([part, ids]) => ({
          updateOne: {
            filter: { _id: `${PROGRESS}${part}` },
            update: { $addToSet: { done: { $each: [...ids] } }, $setOnInsert: { accepted_at: now } },
            upsert: true,
          },
        })),
        { ordered: false, ...this.#limit },
      ),
    );
  }

  async findAcceptedMany(ids: readonly string[]): Promise<readonly AcceptedNotify[]> {
    if (ids.length === 0) return [];
    const docs = await guard(async () => this.#accepted.find({ _id: { $in: [...ids] } }, this.#limit).toArray());
    return docs.map(fromRecord);
  }

  async accept(notify: AcceptedNotify, deliveries: readonly PendingDelivery[]): Promise<void> {
    await this.acceptAll([notify], deliveries);
  }

  async acceptAll(notifies: readonly AcceptedNotify[], deliveries: readonly PendingDelivery[]): Promise<void> {
    const count = this.#partitions;
    if (deliveries.length > 0)
      await this.#insert(
        this.#pending,
        deliveries.map((delivery) => ({
          ...toDocument(delivery),
          ...(count === undefined ? {} : { partitions: count }),
        })),
      );
    // After the requests: a record means they are all stored.
    if (notifies.length > 0)
      await this.#insert(
        this.#accepted,
        notifies.map((notify) => ({
          _id: notify.id,
          recipients: notify.recipients,
          devices: notify.devices,
          accepted_at: new Date(notify.acceptedAt),
        })),
      );
  }

  async listPartition(partition: number): Promise<readonly PendingDelivery[]> {
    const deliveries: PendingDelivery[] = [];
    let after: string | undefined;
    for (;;) {
      const filter = after === undefined ? { partition } : { partition, _id: { $gt: after } };
      const page = await guard(async () =>
        this.#pending
          .find(filter, { ...this.#limit, limit: LIST_PAGE, batchSize: LIST_PAGE })
          .sort({ _id: 1 })
          .toArray(),
      );
      for (const doc of page) deliveries.push(fromDocument(doc));
      if (page.length < LIST_PAGE) break;
      after = (page.at(-1) as PendingDeliveryDocument)._id;
    }
    // Read by `_id`: each device queue's order (seq) is restored here, the keys in the in-memory store's order.
    return deliveries.sort(byKeyThenSeq);
  }

  async remove(ids: readonly string[]): Promise<void> {
    for (let start = 0; start < ids.length; start += REMOVE_CHUNK) {
      const chunk = ids.slice(start, start + REMOVE_CHUNK);
      await guard(async () => this.#pending.deleteMany({ _id: { $in: chunk } }, this.#limit));
    }
  }

  async saveRetry(id: string, retry: RetryState): Promise<void> {
    await guard(async () =>
      this.#pending.updateOne(
        { _id: id },
        {
          $set: {
            retry: { failures: retry.failures, first_failed_at: retry.firstFailedAt, retry_at: retry.retryAt },
          },
        },
        this.#limit,
      ),
    );
  }

  /**
   * The new requests in one `insertMany` (the driver splits it into as few
   * commands as the server takes). Unordered, so that requests already
   * stored (a redelivered `notify`) fail alone on their `_id` and the rest
   * go in.
   */
  async #insert<T extends { _id: string }>(
    collection: Collection<T>,
    docs: OptionalUnlessRequiredId<T>[],
  ): Promise<void> {
    try {
      await collection.insertMany(docs, { ordered: false, ...this.#limit });
    } catch (error) {
      if (onlyDuplicateKeys(error)) return;
      // No write failed on its own: the batch never reached a server (the driver wraps "Topology is closed" so).
      if (
        error instanceof MongoBulkWriteError &&
        writeErrorsOf(error).length === 0 &&
        error.writeConcernError === undefined
      )
        throw new StoreUnavailableError(`MongoDB is unavailable: ${error.message}`, { cause: error });
      throw classifyMongoError(error);
    }
  }
}

/** An unordered insert whose every failure is a duplicate `_id`: those requests were stored before. */
function onlyDuplicateKeys(error: unknown): boolean {
  if (!(error instanceof MongoBulkWriteError) || error.writeConcernError !== undefined) return false;
  const writeErrors = writeErrorsOf(error);
  return writeErrors.length > 0 && writeErrors.every((writeError) => writeError.code === DUPLICATE_KEY);
}

function writeErrorsOf(error: MongoBulkWriteError): readonly WriteError[] {
  const { writeErrors } = error as { writeErrors?: WriteError | WriteError[] };
  if (writeErrors === undefined) return [];
  return Array.isArray(writeErrors) ? writeErrors : [writeErrors];
}

function toDocument(delivery: PendingDelivery): PendingDeliveryDocument {
  return {
    _id: delivery.id,
    partition: delivery.partition,
    key: delivery.key,
    seq: delivery.seq,
    user_id: delivery.userId,
    url: delivery.url,
    body_json: typeof delivery.body === 'string' ? delivery.body : delivery.body.encodeBody(),
    devices: delivery.devices.map((device) => ({ app_id: device.appId, pushkey: device.pushkey })),
    accepted_at: delivery.acceptedAt,
    ...(delivery.countsOnly === true ? { counts_only: true as const } : {}),
    ...(delivery.retry === undefined
      ? {}
      : {
          retry: {
            failures: delivery.retry.failures,
            first_failed_at: delivery.retry.firstFailedAt,
            retry_at: delivery.retry.retryAt,
          },
        }),
  };
}

function fromRecord(doc: AcceptedNotifyDocument): AcceptedNotify {
  return {
    id: doc._id,
    recipients: doc.recipients ?? 0,
    devices: doc.devices ?? 0,
    acceptedAt: doc.accepted_at.getTime(),
  };
}

function fromDocument(doc: PendingDeliveryDocument): PendingDelivery {
  const delivery: PendingDelivery = {
    id: doc._id,
    partition: doc.partition ?? -1,
    key: doc.key,
    seq: doc.seq,
    userId: doc.user_id,
    url: doc.url,
    body: doc.body_json,
    devices: doc.devices.map((device) => ({ appId: device.app_id, pushkey: device.pushkey })),
    acceptedAt: doc.accepted_at,
    ...(doc.counts_only === true ? { countsOnly: true } : {}),
  };
  const { retry } = doc;
  if (retry === undefined) return delivery;
  return {
    ...delivery,
    retry: { failures: retry.failures, firstFailedAt: retry.first_failed_at, retryAt: retry.retry_at },
  };
}

/** Oldest first per key. */
function byKeyThenSeq(a: PendingDelivery, b: PendingDelivery): number {
  if (a.key !== b.key) return a.key < b.key ? -1 : 1;
  return a.seq - b.seq;
}
