import { type Collection, type Db, type Document, type Filter, type UpdateFilter } from 'mongodb';
import type { Ruleset } from '../push-rules/push-rule.js';
import { deletionSelects, type PusherDeletion } from '../pushers/pusher-deletion.js';
import type { PusherKey, StoredPusher } from '../pushers/pusher.js';
import { stillRejected, type RejectedRegistration } from '../pushers/rejected-registration.js';
import { guard, isDuplicateKey, isRetryableRead } from './mongo-errors.js';
import { fromEntry, PusherLists, type PusherDocument, type PusherListFields } from './mongo-pusher-lists.js';
import {
  DEFAULT_RECORDED_WRITES_WINDOW,
  StoreFailedError,
  type ErasureOutcome,
  type FoundWrite,
  type LoadedPushRules,
  type PushStore,
  type RecordedWrite,
  type SaveOutcome,
  type UserDataErasure,
} from './push-store.js';
import { ParsedEntryCache } from './parsed-entry-cache.js';
import { ReadBatcher } from './read-batcher.js';
import { encodePushRulesContent, readPushRulesEntry } from './push-rules-entry.js';

/**
 * One document per user in the account-data collection; the push-rules
 * event content is kept as JSON text (see `push-rules-entry.ts`).
 */
export interface AccountDataDocument extends PusherListFields {
  _id: string;
  /** Compare-and-set version of the push rules; absent until first stored. */
  version?: number;
  push_rules?: { content_json?: string; defaults_revision?: string };
  pushers_version?: number;
  /** The newest recorded writes, oldest first, at most the configured window. */
  recent_writes?: { message_id: string; reply_json: string; unchanged?: true }[];
}

export type { PusherDocument } from './mongo-pusher-lists.js';

export interface MongoPushStoreOptions {
  readonly accountDataCollection: string;
  /**
   * Pushers of the old layout, one document each, moved into the users'
   * lists by `ensureIndexes`; `<name>_by_key` holds the owners of each app
   * ID and pushkey (docs/storage.md#pushers-a-list-per-user).
   */
  readonly pushersCollection: string;
  /** Recorded writes kept per user (see `RecordedWrite`). */
  readonly recordedWritesWindow?: number;
  /** Characters of stored ruleset text whose parse is kept (`ParsedEntryCache`); 0 or absent: none. */
  readonly parsedCacheChars?: number;
  /**
   * Users whose push rules one query reads at most, when reads come in
   * together (`ReadBatcher`); 1: every read alone. Default 64.
   */
  readonly readBatchSize?: number;
  /** Old-layout pushers `ensureIndexes` moves per batch (tests). */
  readonly migrationBatchSize?: number;
}

/** What a read of the push rules needs of a user's document. */
const RULES_PROJECTION = { version: 1, push_rules: 1 } as const;
/** What a read of the pushers needs of a user's document. */
const PUSHERS_PROJECTION = { pushers: 1 } as const;
const DEFAULT_READ_BATCH_SIZE = 64;
/**
 * Users per query of `listPushersOfUsers`: 1,000 `_id` lookups are one
 * small query, whose reply (a few pushers each) stays far below 16 MiB.
 */
const BULK_PUSHER_USERS = 1_000;

/** The pushers of a user's document, in the order stored (app ID, then pushkey). */
function pushersOf(doc: Pick<AccountDataDocument, '_id' | 'pushers'> | null | undefined): StoredPusher[] {
  if (doc === null || doc === undefined) return [];
  return (doc.pushers ?? []).map((entry) => fromEntry(doc._id, entry));
}

export class MongoPushStore implements PushStore {
  readonly #db: Db;
  readonly #accountData: Collection<AccountDataDocument>;
  readonly #legacyPushers: Collection<PusherDocument>;
  readonly #lists: PusherLists;
  readonly #migrationBatchSize: number;
  readonly #window: number;
  readonly #parsed: ParsedEntryCache | undefined;
  /** Push-rule reads (without a `messageId`) that come in together share a query. */
  readonly #ruleReads: ReadBatcher<AccountDataDocument>;
  /** So do pusher reads. */
  readonly #pusherReads: ReadBatcher<AccountDataDocument>;

  constructor(db: Db, options: MongoPushStoreOptions) {
    this.#db = db;
    // Every read here may fill a cache (read, evaluate, delivery pushers) that
    // only a change event drops: a read of a lagging secondary after the
    // event would be kept, stale, for the cache's whole staleness bound. So
    // the primary, whatever `readPreference` the URL names.
    const onPrimary = { readPreference: 'primary' } as const;
    this.#accountData = db.collection<AccountDataDocument>(options.accountDataCollection, onPrimary);
    this.#legacyPushers = db.collection<PusherDocument>(options.pushersCollection, onPrimary);
    this.#lists = new PusherLists(
      db.collection<PusherListFields>(options.accountDataCollection, onPrimary),
      db.collection(`${options.pushersCollection}_by_key`, onPrimary),
    );
    this.#migrationBatchSize = options.migrationBatchSize ?? 500;
    this.#window = options.recordedWritesWindow ?? DEFAULT_RECORDED_WRITES_WINDOW;
    const parsedCacheChars = options.parsedCacheChars ?? 0;
    this.#parsed = parsedCacheChars > 0 ? new ParsedEntryCache(parsedCacheChars) : undefined;
    this.#ruleReads = new ReadBatcher({
      fetchOne: async (userId) => this.#findAccountData(userId, RULES_PROJECTION),
      fetchMany: async (userIds) => this.#findAccountDataOf(userIds, RULES_PROJECTION),
      maxBatch: options.readBatchSize ?? DEFAULT_READ_BATCH_SIZE,
    });
    this.#pusherReads = new ReadBatcher({
      fetchOne: async (userId) => this.#findAccountData(userId, PUSHERS_PROJECTION),
      fetchMany: async (userIds) => this.#findAccountDataOf(userIds, PUSHERS_PROJECTION),
      maxBatch: options.readBatchSize ?? DEFAULT_READ_BATCH_SIZE,
    });
  }

  /**
   * Prepares the storage at start-up: moves the pushers of the old layout
   * into their users' lists (docs/storage.md#migration-from-one-document-per-pusher).
   * Every query is by `_id`, so there is no index to create. Idempotent.
   * Returns how many old-layout pushers it moved.
   */
  async ensureIndexes(): Promise<number> {
    return this.#lists.migrateLegacy(this.#legacyPushers, this.#migrationBatchSize);
  }

  async loadPushRules(userId: string, messageId?: string): Promise<LoadedPushRules> {
    const doc = await guard(async () =>
      messageId === undefined
        ? this.#ruleReads.load(userId)
        : this.#findAccountData(userId, { ...RULES_PROJECTION, recent_writes: 1 }),
    );
    const entry = doc?.push_rules;
    const version = doc?.version ?? 0;
    const read = () =>
      readPushRulesEntry(
        entry === undefined
          ? undefined
          : { contentJson: entry.content_json, defaultsRevision: entry.defaults_revision },
      );
    const contentJson = entry?.content_json;
    const lookup =
      this.#parsed !== undefined && typeof contentJson === 'string'
        ? // A load with a messageId is a write's: what it parses is replaced by the write.
          this.#parsed.lookup(userId, version, contentJson, entry?.defaults_revision, read, messageId === undefined)
        : read();
    const recorded = messageId === undefined ? undefined : findRecorded(doc, messageId);
    const sized =
      typeof contentJson === 'string' && contentJson.length > 0
        ? { version, lookup, storedChars: contentJson.length }
        : { version, lookup };
    return recorded === undefined ? sized : { ...sized, recorded };
  }

  async loadManyPushRules(userIds: readonly string[]): Promise<ReadonlyMap<string, LoadedPushRules>> {
    const loaded = new Map<string, LoadedPushRules>();
    if (userIds.length === 0) return loaded;
    const docs = await guard(async () =>
      this.#accountData
        // By `_id` alone: a filter on another field keeps some servers (the
        // test stand-in) from using the `_id` index. Documents without push
        // rules are left out below.
        .find({ _id: { $in: [...userIds] } }, { projection: { version: 1, push_rules: 1 } })
        .toArray(),
    );
    for (const doc of docs) {
      const entry = doc.push_rules;
      if (entry === undefined) continue;
      const lookup = readPushRulesEntry({ contentJson: entry.content_json, defaultsRevision: entry.defaults_revision });
      loaded.set(doc._id, { version: doc.version ?? 0, lookup });
    }
    return loaded;
  }

  async savePushRules(
    userId: string,
    expectedVersion: number,
    ruleset: Ruleset,
    defaultsRevision: string,
    record?: RecordedWrite,
  ): Promise<SaveOutcome> {
    const pushRules = { content_json: encodePushRulesContent(ruleset), defaults_revision: defaultsRevision };
    const version = expectedVersion + 1;
    // Version 0: the first write. The filter matches a document that exists
    // for other account data but has no version yet; when there is no
    // document, the upsert inserts one, and a concurrent first write loses
    // on the duplicate _id — a conflict like any other.
    const filter = versionFilter(userId, expectedVersion);
    try {
      const result = await guard(async () =>
        this.#accountData.updateOne(
          filter,
          { $set: { push_rules: pushRules, version }, ...this.#pushRecord(record) },
          { upsert: expectedVersion === 0 },
        ),
      );
      if (result.matchedCount + result.upsertedCount !== 1) return { saved: false };
      // The entry's text is no longer what is stored.
      this.#parsed?.forget(userId);
      return { saved: true, version };
    } catch (error) {
      if (isDuplicateKey(error)) return { saved: false };
      throw error;
    }
  }

  async insertPushRulesIfAbsent(userId: string, ruleset: Ruleset, defaultsRevision: string): Promise<SaveOutcome> {
    const pushRules = { content_json: encodePushRulesContent(ruleset), defaults_revision: defaultsRevision };
    try {
      const doc = await guard(async () =>
        this.#accountData.findOneAndUpdate(
          { _id: userId, push_rules: { $exists: false } },
          { $set: { push_rules: pushRules }, $inc: { version: 1 } },
          { upsert: true, returnDocument: 'after', projection: { version: 1 } },
        ),
      );
      return doc?.version === undefined ? { saved: false } : { saved: true, version: doc.version };
    } catch (error) {
      if (isDuplicateKey(error)) return { saved: false };
      throw error;
    }
  }

  async eraseUserData(userId: string, expectedVersion: number, erasure: UserDataErasure): Promise<ErasureOutcome> {
    const { pushRules: erasePushRules, pushers, record } = erasure;
    const update: UpdateFilter<AccountDataDocument> = {
      ...(erasePushRules ? { $unset: { push_rules: '' }, $set: { version: expectedVersion + 1 } } : {}),
      ...(pushers ? { $inc: { pushers_version: 1 } } : {}),
      ...this.#pushRecord(record),
    };
    try {
      // As in savePushRules: at version 0 there may be no document yet, and
      // a concurrent first write makes the upsert lose on the duplicate _id.
      const doc = await guard(async () =>
        this.#accountData.findOneAndUpdate(versionFilter(userId, expectedVersion), update, {
          upsert: expectedVersion === 0,
          returnDocument: 'after',
          projection: { version: 1, pushers_version: 1 },
        }),
      );
      return doc === null
        ? { saved: false }
        : { saved: true, version: doc.version ?? 0, pushersVersion: doc.pushers_version ?? 0 };
    } catch (error) {
      if (isDuplicateKey(error)) return { saved: false };
      throw error;
    }
  }

  async listPushers(userId: string): Promise<readonly StoredPusher[]> {
    return pushersOf(await guard(async () => this.#pusherReads.load(userId)));
  }

  /**
   * One `find` by `_id` `$in` per `BULK_PUSHER_USERS` users, one after the
   * other: each user's list is one document, kept in `listPushers`' order.
   */
  async listPushersOfUsers(userIds: readonly string[]): Promise<ReadonlyMap<string, readonly StoredPusher[]>> {
    const byUser = new Map<string, readonly StoredPusher[]>(userIds.map((userId) => [userId, []]));
    for (let start = 0; start < userIds.length; start += BULK_PUSHER_USERS) {
      const chunk = userIds.slice(start, start + BULK_PUSHER_USERS);
      const docs = await guard(async () =>
        this.#accountData.find({ _id: { $in: chunk } }, { projection: PUSHERS_PROJECTION }).toArray(),
      );
      for (const doc of docs) if (byUser.has(doc._id)) byUser.set(doc._id, pushersOf(doc));
    }
    return byUser;
  }

  async upsertPusher(pusher: StoredPusher): Promise<'created' | 'updated' | 'unchanged'> {
    return this.#lists.upsert(pusher, Date.now);
  }

  async deletePusher(key: PusherKey): Promise<boolean> {
    const removed = await this.#lists.remove(
      key.userId,
      (pusher) => pusher.app_id === key.appId && pusher.pushkey === key.pushkey,
    );
    return removed.length > 0;
  }

  async deletePushers(deletion: PusherDeletion): Promise<number> {
    return (await this.#lists.remove(deletion.userId, (pusher) => deletionSelects(deletion, pusher))).length;
  }

  async deleteRejectedPusher(rejected: RejectedRegistration): Promise<boolean> {
    return (await this.#lists.remove(rejected.userId, (pusher) => stillRejected(pusher, rejected))).length > 0;
  }

  async deletePushersOfOtherUsers(key: PusherKey): Promise<readonly string[]> {
    return this.#lists.removeFromOtherUsers(key);
  }

  async bumpPushersVersion(userId: string, record?: RecordedWrite): Promise<number> {
    const doc = await guard(async () =>
      this.#accountData.findOneAndUpdate(
        { _id: userId },
        { $inc: { pushers_version: 1 }, ...this.#pushRecord(record) },
        { upsert: true, returnDocument: 'after', projection: { pushers_version: 1 } },
      ),
    );
    return doc?.pushers_version ?? 1;
  }

  async findRecordedWrite(userId: string, messageId: string): Promise<FoundWrite | undefined> {
    const doc = await guard(async () => this.#findAccountData(userId, { recent_writes: 1, pushers_version: 1 }));
    const found = findRecorded(doc, messageId);
    return found === undefined ? undefined : { ...found, pushersVersion: doc?.pushers_version ?? 0 };
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
  async #findAccountData(userId: string, projection: Document): Promise<AccountDataDocument | null> {
    const batch = await this.#find({ filter: { _id: userId }, projection, limit: 1, singleBatch: true, batchSize: 1 });
    return batch[0] ?? null;
  }

  /**
   * The documents of these users that exist, in one `find` (one batch).
   * A user missing from the answer may have no document, or the batch may
   * have been cut at the server's 16 MiB: the batcher reads them alone.
   */
  async #findAccountDataOf(
    userIds: readonly string[],
    projection: Document,
  ): Promise<ReadonlyMap<string, AccountDataDocument>> {
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
    return firstBatchOf(await this.#command(this.#accountData, { find: this.#accountData.collectionName, ...find }));
  }

  /**
   * A read command on a collection, with the collection's read preference
   * and read concern; retried once on what the driver retries reads on.
   */
  async #command(
    collection: Collection<AccountDataDocument>,
    read: Document,
    options: { promoteLongs?: boolean } = {},
  ): Promise<Document> {
    const { readPreference, readConcern } = collection;
    const command: Document = readConcern === undefined ? read : { ...read, readConcern: readConcern.toJSON() };
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await this.#db.command(command, readPreference === undefined ? options : { ...options, readPreference });
      } catch (error) {
        if (attempt > 0 || !isRetryableRead(error)) throw error;
      }
    }
  }

  async recordWrite(userId: string, record: RecordedWrite): Promise<number> {
    const doc = await guard(async () =>
      this.#accountData.findOneAndUpdate({ _id: userId }, this.#pushRecord(record), {
        upsert: true,
        returnDocument: 'after',
        projection: { pushers_version: 1 },
      }),
    );
    return doc?.pushers_version ?? 0;
  }

  async recordWriteAtVersion(userId: string, expectedVersion: number, record: RecordedWrite): Promise<boolean> {
    const result = await guard(async () =>
      this.#accountData.updateOne(versionFilter(userId, expectedVersion), this.#pushRecord(record)),
    );
    return result.matchedCount === 1;
  }

  /** Appends to the window and drops the oldest beyond its size, in the same update. */
  #pushRecord(record: RecordedWrite | undefined): Pick<UpdateFilter<AccountDataDocument>, '$push'> {
    if (record === undefined) return {};
    const entry = {
      message_id: record.messageId,
      reply_json: record.replyJson,
      ...(record.unchanged === true ? { unchanged: true as const } : {}),
    };
    return { $push: { recent_writes: { $each: [entry], $slice: -this.#window } } };
  }
}

/** The documents of a `find` reply's first (and, with `singleBatch`, only) batch. */
function firstBatchOf(reply: Document): AccountDataDocument[] {
  const batch: unknown = (reply['cursor'] as { firstBatch?: unknown } | undefined)?.firstBatch;
  if (!Array.isArray(batch)) throw new StoreFailedError('MongoDB answered a find without cursor.firstBatch');
  return batch as AccountDataDocument[];
}

/** The user's document if its push rules are at `version`; 0 matches a document that has none yet. */
export function versionFilter(userId: string, version: number): Filter<AccountDataDocument> {
  return version === 0 ? { _id: userId, version: { $exists: false } } : { _id: userId, version };
}

function findRecorded(
  doc: Pick<AccountDataDocument, 'recent_writes'> | null,
  messageId: string,
): RecordedWrite | undefined {
  // Newest first: an id recorded twice (see PushService) answers as last recorded.
  const entry = doc?.recent_writes?.findLast((w) => w.message_id === messageId);
  if (entry === undefined) return undefined;
  return {
    messageId: entry.message_id,
    replyJson: entry.reply_json,
    ...(entry.unchanged === true ? { unchanged: true as const } : {}),
  };
}
