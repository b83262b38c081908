import { MongoBulkWriteError, type AnyBulkWriteOperation, type Collection, type Filter } from 'mongodb';
import type { PusherData, PusherKey, StoredPusher } from '../pushers/pusher.js';
import { samePusher } from '../pushers/pusher.js';
import { classifyMongoError, guard, isDuplicateKey } from './mongo-errors.js';
import { StoreFailedError, StoreUnavailableError } from './push-store.js';

/**
 * One pusher in its owner's list (`pushers` of the user's account-data
 * document): the pusher's values without the owner, `data` as JSON text.
 */
export interface PusherEntry {
  app_id: string;
  pushkey: string;
  kind: StoredPusher['kind'];
  app_display_name: string;
  device_display_name: string;
  lang: string;
  profile_tag?: string;
  /** `data` as JSON text: clients may put any key in it, which BSON field names would restrict. */
  data_json: string;
  /** Absent on pushers stored before it was kept: read as `true`. */
  enabled?: boolean;
  /** The device that created the pusher; absent when unknown. */
  device_id?: string;
  /** When it was created or last changed (ms); absent on pushers stored before it was kept. */
  ts?: number;
}

/** A pusher of the old layout: one document per pusher in the pushers collection. */
export interface PusherDocument extends PusherEntry {
  user_id: string;
}

/** What the pusher lists need of a user's account-data document. */
export interface PusherListFields {
  _id: string;
  /** The user's pushers, sorted by app ID then pushkey (UTF-8 byte order). */
  pushers?: PusherEntry[];
  /** Compare-and-set revision of `pushers`; absent until the list is first written. */
  pushers_rev?: number;
  /** The user's pushers of the old layout were merged into `pushers`. */
  pushers_migrated?: true;
}

/** The users that may hold a pusher with this app ID and pushkey: a superset of those that do. */
interface OwnersDocument {
  /** `JSON.stringify([app_id, pushkey])`. */
  _id: string;
  user_ids: string[];
  /** Compare-and-set revision: raised by every addition, checked by every removal. */
  rev: number;
}

/** Attempts at a compare-and-set of one user's list before `Unavailable`. */
const LIST_ATTEMPTS = 10;
/** Attempts at settling one key's owners. */
const OWNER_ATTEMPTS = 10;

/** Byte order of the UTF-8 encodings: how MongoDB sorts strings without a collation. */
export function compareText(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function byKey(a: PusherEntry, b: PusherEntry): number {
  return compareText(a.app_id, b.app_id) || compareText(a.pushkey, b.pushkey);
}

function ownersId(appId: string, pushkey: string): string {
  return JSON.stringify([appId, pushkey]);
}

function holds(list: readonly PusherEntry[] | undefined, appId: string, pushkey: string): boolean {
  return list?.some((entry) => entry.app_id === appId && entry.pushkey === pushkey) ?? false;
}

/** Stored text that does not parse is a storage failure (Database), not a bug of ours (Internal). */
function parseStoredJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new StoreFailedError(`${what} is not JSON`, { cause: error });
  }
}

/**
 * A stored pusher, migrated on read: pushers stored before `enabled` and
 * `device_id` were kept read as enabled, of an unknown device.
 */
export function fromEntry(userId: string, entry: PusherEntry): StoredPusher {
  const { data_json: dataJson, enabled, device_id: deviceId, ...rest } = entry;
  return {
    user_id: userId,
    ...rest,
    data: parseStoredJson(dataJson, `the data_json of a pusher of ${userId}`) as PusherData,
    enabled: enabled ?? true,
    ...(typeof deviceId === 'string' ? { device_id: deviceId } : {}),
  };
}

/** The pusher's values as an entry, with its `ts` when it has one (an import's; the service's writes date it themselves). */
export function toEntry(pusher: StoredPusher): PusherEntry {
  const { data, user_id: _owner, ...rest } = pusher;
  return { ...rest, data_json: JSON.stringify(data) };
}

/** A list with `entry` in place of the one with its key, or added, kept sorted. */
function withEntry(list: readonly PusherEntry[], entry: PusherEntry): PusherEntry[] {
  return [...list.filter((e) => e.app_id !== entry.app_id || e.pushkey !== entry.pushkey), entry].sort(byKey);
}

/** What an upsert makes of a user's list (see `PushStore.upsertPusher`), `ts` set to `now` on a change. */
export function planUpsert(
  list: readonly PusherEntry[],
  pusher: StoredPusher,
  now: number,
): { readonly outcome: 'created' | 'updated' | 'unchanged'; readonly next: PusherEntry[] } {
  const { ts: _ts, device_id: deviceId, ...values } = toEntry(pusher);
  const old = list.find((e) => e.app_id === values.app_id && e.pushkey === values.pushkey);
  if (old === undefined) {
    const entry = { ...values, ...(deviceId === undefined ? {} : { device_id: deviceId }), ts: now };
    return { outcome: 'created', next: withEntry(list, entry) };
  }
  // A pusher that has a device keeps it; one without takes the given one.
  const device = old.device_id ?? deviceId;
  const candidate: PusherEntry = { ...values, ...(device === undefined ? {} : { device_id: device }) };
  if (samePusher(fromEntry('', old), fromEntry('', candidate))) return { outcome: 'unchanged', next: [...list] };
  return { outcome: 'updated', next: withEntry(list, { ...candidate, ts: now }) };
}

const pause = async (attempt: number) =>
  new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 5 * (attempt + 1))));

/** The change a compare-and-set of one user's list makes, or undefined to write nothing. */
type ListChange<R> = (
  list: readonly PusherEntry[],
  doc: PusherListFields | null,
) =>
  | { readonly next: PusherEntry[]; readonly result: R; readonly set?: Partial<PusherListFields> }
  | { readonly result: R };

/**
 * The pushers in their per-user lists (docs/storage.md#pushers-a-list-per-user):
 * every read and write of a list is by the user's `_id`, every change of
 * the owners of an app ID and pushkey by that key's `_id`.
 */
export class PusherLists {
  readonly #accountData: Collection<PusherListFields>;
  readonly #owners: Collection<OwnersDocument>;

  constructor(accountData: Collection<PusherListFields>, owners: Collection<OwnersDocument>) {
    this.#accountData = accountData;
    this.#owners = owners;
  }

  /**
   * A compare-and-set of one user's list on `pushers_rev`: read, change,
   * write if still at the revision read, again from the read otherwise.
   * `beforeWrite` runs before each write (adding owners).
   */
  async modify<R>(
    userId: string,
    change: ListChange<R>,
    beforeWrite?: (next: readonly PusherEntry[], result: R) => Promise<void>,
  ): Promise<R> {
    for (let attempt = 0; attempt < LIST_ATTEMPTS; attempt += 1) {
      const doc = await guard(async () =>
        this.#accountData.findOne({ _id: userId }, { projection: { pushers: 1, pushers_rev: 1, pushers_migrated: 1 } }),
      );
      const rev = doc?.pushers_rev ?? 0;
      const changed = change(doc?.pushers ?? [], doc);
      if (!('next' in changed)) return changed.result;
      await beforeWrite?.(changed.next, changed.result);
      // Revision 0: no list yet. The upsert inserts a document when there is
      // none; a concurrent first write makes it lose on the duplicate _id.
      const filter: Filter<PusherListFields> =
        rev === 0 ? { _id: userId, pushers_rev: { $exists: false } } : { _id: userId, pushers_rev: rev };
      try {
        const written = await guard(async () =>
          this.#accountData.updateOne(
            filter,
            { $set: { ...changed.set, pushers: changed.next, pushers_rev: rev + 1 } },
            { upsert: rev === 0 },
          ),
        );
        if (written.matchedCount + written.upsertedCount === 1) return changed.result;
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
      }
      await pause(attempt);
    }
    throw new StoreUnavailableError(`the pushers of ${userId} kept changing under a write`);
  }

  /** Adds `userId` to the owners of each key (an upsert each, by `_id`), raising their revisions. */
  async addOwners(owners: readonly { readonly userId: string; readonly appId: string; readonly pushkey: string }[]) {
    if (owners.length === 0) return;
    const operations: AnyBulkWriteOperation<OwnersDocument>[] = owners.map((o) => ({
      updateOne: {
        filter: { _id: ownersId(o.appId, o.pushkey) },
        update: { $addToSet: { user_ids: o.userId }, $inc: { rev: 1 } },
        upsert: true,
      },
    }));
    for (let attempt = 0; ; attempt += 1) {
      try {
        await this.#owners.bulkWrite(operations, { ordered: false });
        return;
      } catch (error) {
        // Two upserts of a new key raced to insert it: again, the loser now updates.
        if (attempt > 0 || !onlyDuplicateKeys(error)) throw classifyMongoError(error);
      }
    }
  }

  /**
   * Settles the owners of a key: with `keep`, first removes the pusher from
   * every other user that holds it (the users it removed it from are
   * returned); then
   * keeps as owners only the users whose list holds it, by a
   * compare-and-set on the owners' revision read before the lists were
   * read (a user added meanwhile raised it, and the settling starts over).
   */
  async settleOwners(appId: string, pushkey: string, keep?: string): Promise<readonly string[]> {
    const _id = ownersId(appId, pushkey);
    const removed = new Set<string>();
    for (let attempt = 0; attempt < OWNER_ATTEMPTS; attempt += 1) {
      const owners = await guard(async () => this.#owners.findOne({ _id }));
      if (owners === null) return [...removed];
      if (keep !== undefined) {
        for (const userId of owners.user_ids) {
          if (userId === keep) continue;
          const gone = await this.modify(userId, (list) =>
            holds(list, appId, pushkey)
              ? { next: list.filter((e) => e.app_id !== appId || e.pushkey !== pushkey), result: true }
              : { result: false },
          );
          if (gone) removed.add(userId);
        }
      }
      const lists = await guard(async () =>
        this.#accountData.find({ _id: { $in: owners.user_ids } }, { projection: { pushers: 1 } }).toArray(),
      );
      const holders = lists.filter((doc) => holds(doc.pushers, appId, pushkey)).map((doc) => doc._id);
      if (holders.length === owners.user_ids.length) return [...removed];
      const settled = await guard(async () =>
        holders.length === 0
          ? this.#owners.deleteOne({ _id, rev: owners.rev }).then((r) => r.deletedCount)
          : this.#owners
              .updateOne({ _id, rev: owners.rev }, { $set: { user_ids: holders }, $inc: { rev: 1 } })
              .then((r) => r.matchedCount),
      );
      if (settled === 1) return [...removed];
    }
    if (keep !== undefined) throw new StoreUnavailableError(`the owners of a pushkey kept changing under a delete`);
    // Left a superset, which is safe: the next settling of the key prunes it.
    return [...removed];
  }

  /** Settles the owners of keys whose pusher was removed; a failure leaves a superset, which is safe. */
  async settleRemoved(removed: readonly PusherEntry[]): Promise<void> {
    for (const entry of removed) {
      await this.settleOwners(entry.app_id, entry.pushkey).catch(() => undefined);
    }
  }

  /** Creates, changes or keeps one pusher (see `PushStore.upsertPusher`). */
  async upsert(pusher: StoredPusher, now: () => number): Promise<'created' | 'updated' | 'unchanged'> {
    const owner = [{ userId: pusher.user_id, appId: pusher.app_id, pushkey: pusher.pushkey }];
    const outcome = await this.modify(
      pusher.user_id,
      (list) => {
        const plan = planUpsert(list, pusher, now());
        return plan.outcome === 'unchanged' ? { result: plan.outcome } : { next: plan.next, result: plan.outcome };
      },
      // Before the list holds it, so the owners are never fewer than the holders.
      async (_next, result) => (result === 'created' ? this.addOwners(owner) : undefined),
    );
    // Again after: a settling that read the list before it held the pusher
    // and pruned the user meanwhile is undone, or fails on the revision.
    if (outcome === 'created') await this.addOwners(owner);
    return outcome;
  }

  /** Removes the pushers `selects` picks from the user's list in one compare-and-set; those removed. */
  async remove(userId: string, selects: (pusher: StoredPusher) => boolean): Promise<PusherEntry[]> {
    const removed = await this.modify(userId, (list) => {
      const gone = list.filter((entry) => selects(fromEntry(userId, entry)));
      return gone.length === 0 ? { result: gone } : { next: list.filter((e) => !gone.includes(e)), result: gone };
    });
    await this.settleRemoved(removed);
    return removed;
  }

  /** Deletes the pusher with this key from every user but `key.userId`; the users it was deleted from. */
  async removeFromOtherUsers(key: PusherKey): Promise<readonly string[]> {
    return this.settleOwners(key.appId, key.pushkey, key.userId);
  }

  /**
   * Moves the pushers of the old layout (one document each in `legacy`)
   * into their owners' lists, `batchSize` documents at a time, and deletes
   * them once moved. Idempotent, and safe to run from several workers at
   * once: a user's old pushers are merged into the list once (the list is
   * marked `pushers_migrated` in the same compare-and-set), never over a
   * newer pusher with the same key; a run stopped midway is finished by the
   * next. Returns how many documents it moved.
   */
  async migrateLegacy(legacy: Collection<PusherDocument>, batchSize = 500): Promise<number> {
    let moved = 0;
    for (;;) {
      const batch = await guard(async () =>
        legacy.find({}).sort({ user_id: 1, app_id: 1, pushkey: 1 }).limit(batchSize).toArray(),
      );
      if (batch.length === 0) return moved;
      const byUser = new Map<string, (PusherDocument & { _id: unknown })[]>();
      for (const doc of batch) byUser.set(doc.user_id, [...(byUser.get(doc.user_id) ?? []), doc]);
      const last = batch.at(-1)?.user_id;
      if (batch.length === batchSize && last !== undefined) {
        // The batch may have cut the last user's pushers short: all of them.
        byUser.set(last, await guard(async () => legacy.find({ user_id: last }).toArray()));
      }
      moved += await this.#migrateUsers(legacy, byUser);
    }
  }

  /**
   * One batch: the owners of every key first (never fewer than the
   * holders), then the lists — inserted whole for users without a
   * document (one bulk write), merged by compare-and-set for the others —
   * then the old documents deleted by `_id`.
   */
  async #migrateUsers(
    legacy: Collection<PusherDocument>,
    byUser: ReadonlyMap<string, readonly (PusherDocument & { _id: unknown })[]>,
  ): Promise<number> {
    const entriesOf = new Map(
      [...byUser].map(([userId, docs]) => [userId, docs.map(({ _id: _legacyId, user_id: _owner, ...entry }) => entry)]),
    );
    await this.addOwners(
      [...entriesOf].flatMap(([userId, entries]) =>
        entries.map((e) => ({ userId, appId: e.app_id, pushkey: e.pushkey })),
      ),
    );
    const users = [...byUser.keys()];
    const existing = await guard(async () =>
      this.#accountData.find({ _id: { $in: users } }, { projection: { _id: 1 } }).toArray(),
    );
    const merge = new Set(existing.map((doc) => doc._id));
    const fresh = users.filter((userId) => !merge.has(userId));
    if (fresh.length > 0) {
      try {
        await this.#accountData.bulkWrite(
          fresh.map((userId) => ({
            insertOne: {
              document: {
                _id: userId,
                pushers: [...(entriesOf.get(userId) ?? [])].sort(byKey),
                pushers_rev: 1,
                pushers_migrated: true,
              },
            },
          })),
          { ordered: false },
        );
      } catch (error) {
        if (!onlyDuplicateKeys(error)) throw classifyMongoError(error);
        // A worker wrote some of them first: those are merged below.
        for (const userId of fresh) merge.add(userId);
      }
    }
    for (const userId of merge) {
      const entries = entriesOf.get(userId) ?? [];
      await this.modify(userId, (list, doc) => {
        if (doc?.pushers_migrated === true) return { result: undefined };
        let next = [...list];
        for (const entry of entries) if (!holds(list, entry.app_id, entry.pushkey)) next = withEntry(next, entry);
        return { next, result: undefined, set: { pushers_migrated: true as const } };
      });
    }
    const ids = [...byUser.values()].flatMap((docs) => docs.map((doc) => doc._id));
    await guard(async () => legacy.deleteMany({ _id: { $in: ids } } as never));
    return ids.length;
  }
}

function onlyDuplicateKeys(error: unknown): boolean {
  if (!(error instanceof MongoBulkWriteError)) return false;
  const writeErrors = [error.writeErrors].flat(2) as readonly { readonly code?: unknown }[];
  return writeErrors.length > 0 && writeErrors.every((writeError) => writeError.code === 11000);
}
