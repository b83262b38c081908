import type { Collection, Db, UpdateFilter } from 'mongodb';
import type { Ruleset } from '../push-rules/push-rule.js';
import { deletionSelects, type PusherDeletion } from '../pushers/pusher-deletion.js';
import type { PusherKey, StoredPusher } from '../pushers/pusher.js';
import { stillRejected, type RejectedRegistration } from '../pushers/rejected-registration.js';
import { findRecorded, pushRecord, versionFilter, type AccountDataDocument } from './account-data-document.js';
import { AccountDataReads } from './account-data-reads.js';
import { guard, isDuplicateKey } from './mongo-errors.js';
import { fromEntry, PusherLists, type PusherDocument, type PusherListFields } from './mongo-pusher-lists.js';
import {
  DEFAULT_RECORDED_WRITES_WINDOW,
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
  readonly #reads: AccountDataReads;
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
    // Every read here may fill a cache (read, evaluate, delivery pushers) that
    // only a change event drops: a read of a lagging secondary after the
    // event would be kept, stale, for the cache's whole staleness bound. So
    // the primary, whatever `readPreference` the URL names.
    const onPrimary = { readPreference: 'primary' } as const;
    this.#accountData = db.collection<AccountDataDocument>(options.accountDataCollection, onPrimary);
    this.#reads = new AccountDataReads(db, this.#accountData);
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
      fetchOne: async (userId) => this.#reads.one(userId, RULES_PROJECTION),
      fetchMany: async (userIds) => this.#reads.many(userIds, RULES_PROJECTION),
      maxBatch: options.readBatchSize ?? DEFAULT_READ_BATCH_SIZE,
    });
    this.#pusherReads = new ReadBatcher({
      fetchOne: async (userId) => this.#reads.one(userId, PUSHERS_PROJECTION),
      fetchMany: async (userIds) => this.#reads.many(userIds, PUSHERS_PROJECTION),
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
        : this.#reads.one(userId, { ...RULES_PROJECTION, recent_writes: 1 }),
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
          { $set: { push_rules: pushRules, version }, ...pushRecord(record, this.#window) },
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
      ...pushRecord(record, this.#window),
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
        { $inc: { pushers_version: 1 }, ...pushRecord(record, this.#window) },
        { upsert: true, returnDocument: 'after', projection: { pushers_version: 1 } },
      ),
    );
    return doc?.pushers_version ?? 1;
  }

  async findRecordedWrite(userId: string, messageId: string): Promise<FoundWrite | undefined> {
    const doc = await guard(async () => this.#reads.one(userId, { recent_writes: 1, pushers_version: 1 }));
    const found = findRecorded(doc, messageId);
    return found === undefined ? undefined : { ...found, pushersVersion: doc?.pushers_version ?? 0 };
  }

  async recordWrite(userId: string, record: RecordedWrite): Promise<number> {
    const doc = await guard(async () =>
      this.#accountData.findOneAndUpdate({ _id: userId }, pushRecord(record, this.#window), {
        upsert: true,
        returnDocument: 'after',
        projection: { pushers_version: 1 },
      }),
    );
    return doc?.pushers_version ?? 0;
  }

  async recordWriteAtVersion(userId: string, expectedVersion: number, record: RecordedWrite): Promise<boolean> {
    const result = await guard(async () =>
      this.#accountData.updateOne(versionFilter(userId, expectedVersion), pushRecord(record, this.#window)),
    );
    return result.matchedCount === 1;
  }
}
