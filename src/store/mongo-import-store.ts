import { randomUUID } from 'node:crypto';
import { MongoBulkWriteError, type AnyBulkWriteOperation, type Collection, type Db } from 'mongodb';
import type { StoredPusher } from '../pushers/pusher.js';
import type { ImportStore, ImportWriteOptions, UserImport, UserImportOutcome } from './import-store.js';
import { planUserImport, pusherKey, type ImportPlan } from './import-plan.js';
import { classifyMongoError } from './mongo-errors.js';
import {
  fromDocument,
  toDocument,
  versionFilter,
  type AccountDataDocument,
  type PusherDocument,
} from './mongo-push-store.js';

/** The account-data document with the mark an import leaves until the user's pushers are written. */
interface ImportingDocument extends AccountDataDocument {
  /** The run that claimed the user and has not finished writing their pushers. */
  import_pending?: string;
}

const DUPLICATE_KEY = 11000;

/**
 * `ImportStore` on MongoDB: each batch of users is two reads (their
 * account-data documents, their pushers) and at most three bulk writes
 * (the compare-and-set claims, the pushers, the marks removed), whatever
 * the number of users (docs/storage.md#imports).
 */
export class MongoImportStore implements ImportStore {
  readonly #accountData: Collection<ImportingDocument>;
  readonly #pushers: Collection<PusherDocument>;

  constructor(db: Db, options: { readonly accountDataCollection: string; readonly pushersCollection: string }) {
    this.#accountData = db.collection<ImportingDocument>(options.accountDataCollection);
    this.#pushers = db.collection<PusherDocument>(options.pushersCollection);
  }

  async importUsers(users: readonly UserImport[], options: ImportWriteOptions): Promise<readonly UserImportOutcome[]> {
    if (users.length === 0) return [];
    const ids = users.map((user) => user.userId);
    const docs = await guard(async () =>
      this.#accountData
        .find(
          { _id: { $in: ids } },
          { projection: { version: 1, push_rules: 1, pushers_version: 1, import_pending: 1 } },
        )
        .toArray(),
    );
    const docOf = new Map(docs.map((doc) => [doc._id, doc]));
    // Every pusher write bumps the owner's pushers version in their
    // account-data document (the service's `bumpPushersVersion`, and the
    // claims below), so a user without a document has no pushers: only
    // the others' are read. On a fresh import that is nobody.
    const pushersOf = await this.#pushersOf(docs.map((doc) => doc._id));

    const token = randomUUID();
    const outcomes = new Map<string, UserImportOutcome>();
    const plans: FreshPlan[] = [];
    for (const user of users) {
      const doc = docOf.get(user.userId);
      const plan = planUserImport(
        user,
        {
          version: doc?.version ?? 0,
          pushersVersion: doc?.pushers_version ?? 0,
          entry:
            doc?.push_rules === undefined
              ? undefined
              : { contentJson: doc.push_rules.content_json, defaultsRevision: doc.push_rules.defaults_revision },
          pushers: pushersOf.get(user.userId) ?? [],
          unfinished: doc?.import_pending !== undefined,
        },
        options,
      );
      if ('status' in plan) outcomes.set(user.userId, plan);
      else plans.push({ ...plan, fresh: doc === undefined });
    }

    const claimed = await this.#claim(plans, token);
    for (const plan of plans) {
      if (!claimed.has(plan.user.userId))
        outcomes.set(plan.user.userId, { userId: plan.user.userId, status: 'conflict' });
    }
    const won = plans.filter((plan) => claimed.has(plan.user.userId));
    await this.#writePushers(won);
    if (won.length > 0) {
      // By _id alone: a filter on another field keeps some servers (the
      // test stand-in) from using the _id index. The mark is this run's:
      // two imports of the same users at once are not supported.
      await guard(async () =>
        this.#accountData.bulkWrite(
          won.map((plan) => ({
            updateOne: { filter: { _id: plan.user.userId }, update: { $unset: { import_pending: '' } } },
          })),
          { ordered: false },
        ),
      );
    }
    for (const plan of won) {
      const { userId } = plan.user;
      outcomes.set(userId, {
        userId,
        status: 'imported',
        ...(plan.announceRules ? { pushRulesVersion: plan.nextVersion } : {}),
        ...(plan.announcePushers ? { pushersVersion: plan.nextPushersVersion } : {}),
      });
    }
    return ids.map((userId) => outcomes.get(userId) as UserImportOutcome);
  }

  async #pushersOf(userIds: readonly string[]): Promise<ReadonlyMap<string, StoredPusher[]>> {
    const pushersOf = new Map<string, StoredPusher[]>();
    if (userIds.length === 0) return pushersOf;
    const docs = await guard(async () =>
      this.#pushers.find({ user_id: { $in: [...userIds] } }, { projection: { _id: 0 } }).toArray(),
    );
    for (const doc of docs) {
      const list = pushersOf.get(doc.user_id) ?? [];
      list.push(fromDocument(doc));
      pushersOf.set(doc.user_id, list);
    }
    return pushersOf;
  }

  /**
   * The compare-and-set claims of the batch in one bulk write; the users
   * whose claim won. A user without a document is claimed by inserting it
   * (version 0: a concurrent first write makes the insert lose on the
   * duplicate _id, a conflict like any other); the others by an update
   * filtered on the version read.
   */
  async #claim(plans: readonly FreshPlan[], token: string): Promise<ReadonlySet<string>> {
    if (plans.length === 0) return new Set();
    const operations: AnyBulkWriteOperation<ImportingDocument>[] = plans.map((plan) => {
      const rules = plan.rulesChanged
        ? {
            push_rules: { content_json: plan.contentJson, defaults_revision: plan.user.defaultsRevision },
            version: plan.nextVersion,
          }
        : {};
      if (plan.fresh) {
        return {
          insertOne: {
            document: {
              _id: plan.user.userId,
              ...rules,
              ...(plan.pushersChanged ? { pushers_version: plan.nextPushersVersion } : {}),
              import_pending: token,
            },
          },
        };
      }
      return {
        updateOne: {
          filter: versionFilter(plan.user.userId, plan.version),
          update: {
            $set: { import_pending: token, ...rules },
            ...(plan.pushersChanged ? { $inc: { pushers_version: 1 } } : {}),
          },
        },
      };
    });
    let complete = false;
    try {
      const result = await this.#accountData.bulkWrite(operations, { ordered: false });
      complete = result.insertedCount + result.matchedCount === plans.length;
    } catch (error) {
      if (!onlyDuplicateKeys(error)) throw classifyMongoError(error);
    }
    if (complete) return new Set(plans.map((plan) => plan.user.userId));
    // Some lost: the documents that carry this run's mark are the ones that won.
    const marked = await guard(async () =>
      this.#accountData
        .find({ _id: { $in: plans.map((plan) => plan.user.userId) } }, { projection: { _id: 1, import_pending: 1 } })
        .toArray(),
    );
    return new Set(marked.filter((doc) => doc.import_pending === token).map((doc) => doc._id));
  }

  /** Every claimed user's pushers made what the import says, in one bulk write. */
  async #writePushers(plans: readonly FreshPlan[]): Promise<void> {
    const operations: AnyBulkWriteOperation<PusherDocument>[] = [];
    for (const plan of plans) {
      if (!plan.pushersChanged) continue;
      if (plan.fresh) {
        // A user who had no document had no pushers.
        for (const pusher of plan.user.pushers) operations.push({ insertOne: { document: importedDocument(pusher) } });
        continue;
      }
      const wanted = new Set(plan.user.pushers.map(pusherKey));
      for (const old of plan.existingPushers) {
        if (!wanted.has(pusherKey(old)))
          operations.push({
            deleteOne: { filter: { user_id: old.user_id, app_id: old.app_id, pushkey: old.pushkey } },
          });
      }
      for (const pusher of plan.user.pushers) {
        const { user_id: userId, app_id: appId, pushkey, ...values } = importedDocument(pusher);
        // Every field set, the optional ones absent from the import unset:
        // the stored pusher becomes exactly the imported one.
        const unset = (['profile_tag', 'device_id', 'ts'] as const).filter((field) => !(field in values));
        operations.push({
          updateOne: {
            filter: { user_id: userId, app_id: appId, pushkey },
            update: {
              $set: values,
              ...(unset.length === 0 ? {} : { $unset: Object.fromEntries(unset.map((field) => [field, ''])) }),
            },
            upsert: true,
          },
        });
      }
    }
    if (operations.length === 0) return;
    try {
      await this.#pushers.bulkWrite(operations, { ordered: false });
    } catch (error) {
      // A pusher the user set through the service since the claim is newer than Synapse's: it stays.
      if (!onlyDuplicateKeys(error)) throw classifyMongoError(error);
    }
  }
}

/**
 * A pusher as the import stores it: its values, and its `ts` (Synapse's),
 * which the service's own writes leave to the store's clock.
 */
function importedDocument(pusher: StoredPusher): PusherDocument {
  return { ...toDocument(pusher), ...(pusher.ts === undefined ? {} : { ts: pusher.ts }) };
}

/** A plan, and whether the user had no document at all. */
type FreshPlan = ImportPlan & { readonly fresh: boolean };

function onlyDuplicateKeys(error: unknown): boolean {
  if (!(error instanceof MongoBulkWriteError)) return false;
  const writeErrors = [error.writeErrors].flat(2) as readonly { readonly code?: unknown }[];
  return writeErrors.length > 0 && writeErrors.every((writeError) => writeError.code === DUPLICATE_KEY);
}

async function guard<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    throw classifyMongoError(error);
  }
}
