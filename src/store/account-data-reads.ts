import type { Collection, Db, Document } from 'mongodb';
import type { AccountDataDocument } from './account-data-document.js';
import { isRetryableRead } from './mongo-errors.js';
import { StoreFailedError } from './push-store.js';

/**
 * Reads of the account-data collection by `_id`, as bare `find` commands
 * (one batch): one user, or many in one query.
 */
export class AccountDataReads {
  readonly #db: Db;
  readonly #collection: Collection<AccountDataDocument>;

  constructor(db: Db, collection: Collection<AccountDataDocument>) {
    this.#db = db;
    this.#collection = collection;
  }

  /**
   * One user's account-data document, or null: what `findOne({_id})`
   * returns, as a single `find` command (limit 1, one batch). `findOne`
   * wraps the same command in a whole cursor (options, `next`, `close`),
   * which cost about a third more of the driver's CPU per read: the largest
   * part of a single-rule read left in the worker. The collection's read
   * preference and read concern apply as they would to `findOne`, and a
   * read that fails the way the driver retries reads (`retryReads`: a
   * network error, a primary stepping down) is sent once more, as `findOne`
   * would be.
   */
  async one(userId: string, projection: Document): Promise<AccountDataDocument | null> {
    const batch = await this.#find({ filter: { _id: userId }, projection, limit: 1, singleBatch: true, batchSize: 1 });
    return batch[0] ?? null;
  }

  /**
   * The documents of these users that exist, in one `find` (one batch).
   * A user missing from the answer may have no document, or the batch may
   * have been cut at the server's 16 MiB: the batcher reads them alone.
   */
  async many(userIds: readonly string[], projection: Document): Promise<ReadonlyMap<string, AccountDataDocument>> {
    const batch = await this.#find({
      filter: { _id: { $in: userIds } },
      projection,
      singleBatch: true,
      batchSize: userIds.length,
    });
    return new Map(batch.map((doc) => [doc._id, doc]));
  }

  /** A `find` on the account data, its first batch only. */
  async #find(find: Document): Promise<AccountDataDocument[]> {
    return firstBatchOf(await this.#command({ find: this.#collection.collectionName, ...find }));
  }

  /**
   * A read command on a collection, with the collection's read preference
   * and read concern; retried once on what the driver retries reads on.
   */
  async #command(read: Document): Promise<Document> {
    const { readPreference, readConcern } = this.#collection;
    const command: Document = readConcern === undefined ? read : { ...read, readConcern: readConcern.toJSON() };
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await this.#db.command(command, readPreference === undefined ? {} : { readPreference });
      } catch (error) {
        if (attempt > 0 || !isRetryableRead(error)) throw error;
      }
    }
  }
}

/** The documents of a `find` reply's first (and, with `singleBatch`, only) batch. */
function firstBatchOf(reply: Document): AccountDataDocument[] {
  const batch: unknown = (reply['cursor'] as { firstBatch?: unknown } | undefined)?.firstBatch;
  if (!Array.isArray(batch)) throw new StoreFailedError('MongoDB answered a find without cursor.firstBatch');
  return batch as AccountDataDocument[];
}
