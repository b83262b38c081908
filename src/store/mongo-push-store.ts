import { Long, type Collection, type Db, type Document, type Filter, type UpdateFilter } from 'mongodb';
import type { Ruleset } from '../push-rules/push-rule.js';
import type { PusherDeletion } from '../pushers/pusher-deletion.js';
import type { PusherData, PusherKey, StoredPusher } from '../pushers/pusher.js';
import { classifyMongoError, isDuplicateKey, isRetryableRead } from './mongo-errors.js';
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
export interface AccountDataDocument {
  _id: string;
  /** Compare-and-set version of the push rules; absent until first stored. */
  version?: number;
  push_rules?: { content_json?: string; defaults_revision?: string };
  pushers_version?: number;
  /** The newest recorded writes, oldest first, at most the configured window. */
  recent_writes?: { message_id: string; reply_json: string; unchanged?: true }[];
}

export interface PusherDocument {
  user_id: string;
  app_id: string;
  pushkey: string;
  kind: StoredPusher['kind'];
  app_display_name: string;
  device_display_name: string;
  lang: string;
  profile_tag?: string;
  /** `data` as JSON text, for the same reason as the push-rules content. */
  data_json: string;
  /** Absent on pushers stored before it was kept: read as `true`. */
  enabled?: boolean;
  /** The device that created the pusher; absent when unknown. */
  device_id?: string;
  /** When it was created or last changed (ms); absent on pushers stored before it was kept. */
  ts?: number;
}

export interface MongoPushStoreOptions {
  readonly accountDataCollection: string;
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
  /** Pushers a batched pusher read takes in its first batch before it falls back to reading each user alone (tests). */
  readonly pusherBatchDocs?: number;
}

/** What a read of the push rules needs of a user's document. */
const RULES_PROJECTION = { version: 1, push_rules: 1 } as const;
const DEFAULT_READ_BATCH_SIZE = 64;
/**
 * Users per query of `listPushersOfUsers`: each query stays well within
 * the socket and operation timeouts even where `$in` is slow (the test
 * stand-in scans: a 10,000-user query took it 4-8 s, past the 5 s socket
 * timeout, which cleared the driver's pool), and 1,000 index lookups are
 * one small query on MongoDB.
 */
const BULK_PUSHER_USERS = 1_000;

/** Byte order of the UTF-8 encodings: how MongoDB sorts strings without a collation. */
function compareText(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

export class MongoPushStore implements PushStore {
  readonly #db: Db;
  readonly #accountData: Collection<AccountDataDocument>;
  readonly #pushers: Collection<PusherDocument>;
  readonly #window: number;
  readonly #parsed: ParsedEntryCache | undefined;
  /** Push-rule reads (without a `messageId`) that come in together share a query. */
  readonly #ruleReads: ReadBatcher<AccountDataDocument>;
  /** So do pusher reads. */
  readonly #pusherReads: ReadBatcher<readonly PusherDocument[]>;
  readonly #pusherBatchDocs: number;

  constructor(db: Db, options: MongoPushStoreOptions) {
    this.#db = db;
    this.#accountData = db.collection<AccountDataDocument>(options.accountDataCollection);
    this.#pushers = db.collection<PusherDocument>(options.pushersCollection);
    this.#window = options.recordedWritesWindow ?? DEFAULT_RECORDED_WRITES_WINDOW;
    const parsedCacheChars = options.parsedCacheChars ?? 0;
    this.#parsed = parsedCacheChars > 0 ? new ParsedEntryCache(parsedCacheChars) : undefined;
    this.#ruleReads = new ReadBatcher({
      fetchOne: async (userId) => this.#findAccountData(userId, RULES_PROJECTION),
      fetchMany: async (userIds) => this.#findAccountDataOf(userIds, RULES_PROJECTION),
      maxBatch: options.readBatchSize ?? DEFAULT_READ_BATCH_SIZE,
    });
    this.#pusherBatchDocs = options.pusherBatchDocs ?? 1_000_000;
    this.#pusherReads = new ReadBatcher({
      fetchOne: async (userId) =>
        this.#pushers
          .find({ user_id: userId }, { projection: { _id: 0 } })
          .sort({ app_id: 1, pushkey: 1 })
          .toArray(),
      fetchMany: async (userIds) => this.#pushersOf(userIds),
      maxBatch: options.readBatchSize ?? DEFAULT_READ_BATCH_SIZE,
    });
  }

  /** Creates the indexes the queries rely on. Idempotent; run at start-up. */
  async ensureIndexes(): Promise<void> {
    await guard(async () => {
      await this.#pushers.createIndexes([
        { key: { user_id: 1, app_id: 1, pushkey: 1 }, unique: true, name: 'pusher_identity' },
        { key: { app_id: 1, pushkey: 1 }, name: 'pusher_app_pushkey' },
      ]);
    });
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
    const docs = await guard(async () => this.#pusherReads.load(userId));
    return (docs ?? []).map(fromDocument);
  }

  /**
   * One `$in` query per `BULK_PUSHER_USERS` users, one after the other,
   * each user's pushers then sorted here as `listPushers` sorts them.
   */
  async listPushersOfUsers(userIds: readonly string[]): Promise<ReadonlyMap<string, readonly StoredPusher[]>> {
    const byUser = new Map<string, StoredPusher[]>(userIds.map((userId) => [userId, []]));
    for (let start = 0; start < userIds.length; start += BULK_PUSHER_USERS) {
      const chunk = userIds.slice(start, start + BULK_PUSHER_USERS);
      const docs = await guard(async () =>
        this.#pushers.find({ user_id: { $in: chunk } }, { projection: { _id: 0 } }).toArray(),
      );
      for (const doc of docs) byUser.get(doc.user_id)?.push(fromDocument(doc));
    }
    for (const list of byUser.values())
      list.sort((a, b) => compareText(a.app_id, b.app_id) || compareText(a.pushkey, b.pushkey));
    return byUser;
  }

  /**
   * The pushers of each of these users, in the order `listPushers` gives
   * them, from one `find`; an empty map (every user then read alone) when
   * they did not fit in its first batch.
   */
  async #pushersOf(userIds: readonly string[]): Promise<ReadonlyMap<string, readonly PusherDocument[]>> {
    const find = {
      find: this.#pushers.collectionName,
      filter: { user_id: { $in: userIds } },
      projection: { _id: 0 },
      sort: { user_id: 1, app_id: 1, pushkey: 1 },
      batchSize: this.#pusherBatchDocs,
    };
    // Cursor IDs are 64-bit: kept as Long so that a cursor left open can be closed.
    const reply = await this.#command(this.#pushers, find, { promoteLongs: false });
    const cursor = reply['cursor'] as { id?: unknown; firstBatch?: unknown } | undefined;
    if (!Array.isArray(cursor?.firstBatch) || !(cursor.id instanceof Long))
      throw new StoreFailedError('MongoDB answered a find without cursor.id and cursor.firstBatch');
    if (!cursor.id.isZero()) {
      await this.#db
        .command({ killCursors: this.#pushers.collectionName, cursors: [cursor.id] })
        .catch(() => undefined);
      return new Map();
    }
    const byUser = new Map<string, PusherDocument[]>(userIds.map((userId) => [userId, []]));
    for (const doc of cursor.firstBatch as PusherDocument[]) byUser.get(doc.user_id)?.push(doc);
    return byUser;
  }

  async upsertPusher(pusher: StoredPusher): Promise<'created' | 'updated' | 'unchanged'> {
    const outcome = await this.#upsertPusherValues(pusher);
    if (outcome === 'updated') {
      // Its own write after the update: in the update, a $set of the time would
      // make every upsert a change, and 'unchanged' could no longer be told.
      // A crash in between leaves the previous time, which only dates the
      // pusher a little early for its gateway.
      await guard(async () =>
        this.#pushers.updateOne(
          { user_id: pusher.user_id, app_id: pusher.app_id, pushkey: pusher.pushkey },
          { $set: { ts: Date.now() } },
        ),
      );
    }
    return outcome;
  }

  /** The pusher's values, written as one atomic update; a new pusher gets its `ts` in the same insert. */
  async #upsertPusherValues(pusher: StoredPusher): Promise<'created' | 'updated' | 'unchanged'> {
    const {
      user_id: userId,
      app_id: appId,
      pushkey,
      profile_tag: profileTag,
      device_id: deviceId,
      ...values
    } = toDocument(pusher);
    const filter = { user_id: userId, app_id: appId, pushkey };
    // Field by field, not a replacement: MongoDB skips a $set to the value a
    // field already has (and an $unset of a field that is not there), so an
    // identical pusher is a no-op of the same atomic update — nothing
    // written, no oplog entry, modifiedCount 0. A replacement document is
    // written even when identical: it lacks the stored _id, so the server's
    // own no-op check never matches it.
    const set = profileTag === undefined ? values : { ...values, profile_tag: profileTag };
    const unset = profileTag === undefined ? { $unset: { profile_tag: '' as const } } : {};
    if (deviceId !== undefined) {
      // A pusher stored before devices were recorded takes this device, in
      // the same update as its new values.
      const adopted = await guard(async () =>
        this.#pushers.updateOne(
          { ...filter, device_id: { $exists: false } },
          { $set: { ...set, device_id: deviceId }, ...unset },
        ),
      );
      if (adopted.matchedCount === 1) return 'updated';
    }
    // The device is written only with a new pusher: an existing one keeps
    // the device that created it.
    const update: UpdateFilter<PusherDocument> = {
      $set: set,
      ...unset,
      $setOnInsert: { ts: Date.now(), ...(deviceId === undefined ? {} : { device_id: deviceId }) },
    };
    // Two upserts of a new key can race to insert; the loser sees a
    // duplicate key and then finds the winner's document to update.
    for (let attempt = 0; ; attempt += 1) {
      try {
        const result = await guard(async () => this.#pushers.updateOne(filter, update, { upsert: true }));
        if (result.upsertedCount === 1) return 'created';
        return result.modifiedCount === 1 ? 'updated' : 'unchanged';
      } catch (error) {
        if (!isDuplicateKey(error) || attempt > 0) throw error;
      }
    }
  }

  async deletePusher(key: PusherKey): Promise<boolean> {
    const result = await guard(async () =>
      this.#pushers.deleteOne({ user_id: key.userId, app_id: key.appId, pushkey: key.pushkey }),
    );
    return result.deletedCount === 1;
  }

  async deletePushers(deletion: PusherDeletion): Promise<number> {
    const result = await guard(async () => this.#pushers.deleteMany(deletionFilter(deletion)));
    return result.deletedCount;
  }

  async deletePushersOfOtherUsers(key: PusherKey): Promise<number> {
    const result = await guard(async () =>
      this.#pushers.deleteMany({ app_id: key.appId, pushkey: key.pushkey, user_id: { $ne: key.userId } }),
    );
    return result.deletedCount;
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
    collection: Collection<AccountDataDocument> | Collection<PusherDocument>,
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

  async recordWrite(userId: string, record: RecordedWrite): Promise<void> {
    await guard(async () => this.#accountData.updateOne({ _id: userId }, this.#pushRecord(record), { upsert: true }));
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

async function guard<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    throw classifyMongoError(error);
  }
}

/** `deletionSelects` as a query: each pusher is judged and deleted in one step by the server. */
function deletionFilter({ userId, devices, includeEmail }: PusherDeletion): Filter<PusherDocument> {
  const filter: Filter<PusherDocument> = { user_id: userId };
  if (!includeEmail) filter.kind = { $ne: 'email' };
  // `$ne` also matches a pusher without a device_id, as `deletionSelects` does.
  if ('exceptDeviceId' in devices) filter.device_id = { $ne: devices.exceptDeviceId };
  else if ('deviceIds' in devices) filter.device_id = { $in: [...devices.deviceIds] };
  return filter;
}

/** The pusher's values as a document; `ts` is left out: the store sets it, never the caller. */
export function toDocument(pusher: StoredPusher): PusherDocument {
  const { data, ts: _ts, ...rest } = pusher;
  return { ...rest, data_json: JSON.stringify(data) };
}

/**
 * A stored pusher, migrated on read: pushers stored before `enabled` and
 * `device_id` were kept read as enabled, of an unknown device.
 */
/** Stored text that does not parse is a storage failure (Database), not a bug of ours (Internal). */
function parseStoredJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new StoreFailedError(`${what} is not JSON`, { cause: error });
  }
}

export function fromDocument(doc: PusherDocument): StoredPusher {
  const { data_json: dataJson, enabled, device_id: deviceId, ...rest } = doc;
  return {
    ...rest,
    data: parseStoredJson(dataJson, `the data_json of a pusher of ${rest.user_id}`) as PusherData,
    enabled: enabled ?? true,
    ...(typeof deviceId === 'string' ? { device_id: deviceId } : {}),
  };
}
