import { randomUUID } from 'node:crypto';
import { MongoBulkWriteError, type AnyBulkWriteOperation, type Collection, type Db } from 'mongodb';
import type { ImportStore, ImportWriteOptions, UserImport, UserImportOutcome } from './import-store.js';
import { planUserImport, pusherKey, type ImportPlan } from './import-plan.js';
import { classifyMongoError, guard } from './mongo-errors.js';
import { versionFilter, type AccountDataDocument } from './account-data-document.js';
import { compareText, fromEntry, PusherLists, toEntry, type PusherListFields } from './mongo-pusher-lists.js';

/** The account-data document with the mark an import leaves until the user's pushers are written. */
interface ImportingDocument extends AccountDataDocument {
  /** The run that claimed the user and has not finished writing their pushers. */
  import_pending?: string;
}

const DUPLICATE_KEY = 11000;

/**
 * `ImportStore` on MongoDB: each batch of users is one read (their
 * account-data documents, pusher lists included) and at most four bulk
 * writes (the owners of the imported pushers, the compare-and-set claims
 * that also write the lists, the owners again, the marks removed),
 * whatever the number of users (docs/storage.md#imports).
 */
export class MongoImportStore implements ImportStore {
  readonly #accountData: Collection<ImportingDocument>;
  readonly #lists: PusherLists;

  constructor(db: Db, options: { readonly accountDataCollection: string; readonly pushersCollection: string }) {
    this.#accountData = db.collection<ImportingDocument>(options.accountDataCollection);
    this.#lists = new PusherLists(
      db.collection<PusherListFields>(options.accountDataCollection),
      db.collection(`${options.pushersCollection}_by_key`),
    );
  }

  async importUsers(users: readonly UserImport[], options: ImportWriteOptions): Promise<readonly UserImportOutcome[]> {
    if (users.length === 0) return [];
    const ids = users.map((user) => user.userId);
    const docs = await guard(async () =>
      this.#accountData
        .find(
          { _id: { $in: ids } },
          {
            projection: {
              version: 1,
              push_rules: 1,
              pushers_version: 1,
              import_pending: 1,
              pushers: 1,
              pushers_rev: 1,
            },
          },
        )
        .toArray(),
    );
    const docOf = new Map(docs.map((doc) => [doc._id, doc]));

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
          pushers: (doc?.pushers ?? []).map((entry) => fromEntry(user.userId, entry)),
          unfinished: doc?.import_pending !== undefined,
        },
        options,
      );
      if ('status' in plan) outcomes.set(user.userId, plan);
      else plans.push({ ...plan, fresh: doc === undefined, pushersRev: doc?.pushers_rev ?? 0 });
    }

    // The owners of the imported pushers before the lists hold them, and
    // again after (as the worker's upserts do): never fewer than the holders.
    const owners = plans
      .filter((plan) => plan.pushersChanged)
      .flatMap((plan) => plan.user.pushers.map((p) => ({ userId: p.user_id, appId: p.app_id, pushkey: p.pushkey })));
    await this.#lists.addOwners(owners);
    const claimed = await this.#claim(plans, token);
    for (const plan of plans) {
      if (!claimed.has(plan.user.userId))
        outcomes.set(plan.user.userId, { userId: plan.user.userId, status: 'conflict' });
    }
    const won = plans.filter((plan) => claimed.has(plan.user.userId));
    await this.#lists.addOwners(owners.filter((owner) => claimed.has(owner.userId)));
    for (const plan of won) {
      const wanted = new Set(plan.user.pushers.map(pusherKey));
      await this.#lists.settleRemoved(plan.existingPushers.filter((old) => !wanted.has(pusherKey(old))).map(toEntry));
    }
    if (options.keepMarks !== true) await this.finishImports(won.map((plan) => plan.user.userId));
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

  async finishImports(userIds: readonly string[]): Promise<void> {
    if (userIds.length === 0) return;
    // By _id alone: a filter on another field keeps some servers (the
    // test stand-in) from using the _id index. The mark is this run's:
    // two imports of the same users at once are not supported.
    await guard(async () =>
      this.#accountData.bulkWrite(
        userIds.map((userId) => ({
          updateOne: { filter: { _id: userId }, update: { $unset: { import_pending: '' } } },
        })),
        { ordered: false },
      ),
    );
  }

  /**
   * The compare-and-set claims of the batch in one bulk write; the users
   * whose claim won. A user without a document is claimed by inserting it
   * (version 0: a concurrent first write makes the insert lose on the
   * duplicate _id, a conflict like any other); the others by an update
   * filtered on the version read, and on the pushers' revision read when
   * the import replaces their list (a pusher the user set meanwhile makes
   * it a conflict). The claim writes the list in the same update.
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
      const pushers = plan.pushersChanged
        ? {
            pushers: plan.user.pushers
              .map(toEntry)
              .sort((a, b) => compareText(a.app_id, b.app_id) || compareText(a.pushkey, b.pushkey)),
            pushers_rev: plan.pushersRev + 1,
          }
        : {};
      if (plan.fresh) {
        return {
          insertOne: {
            document: {
              _id: plan.user.userId,
              ...rules,
              ...pushers,
              ...(plan.pushersChanged ? { pushers_version: plan.nextPushersVersion } : {}),
              import_pending: token,
            },
          },
        };
      }
      const filter = versionFilter(plan.user.userId, plan.version);
      return {
        updateOne: {
          filter: plan.pushersChanged
            ? { ...filter, pushers_rev: plan.pushersRev === 0 ? { $exists: false } : plan.pushersRev }
            : filter,
          update: {
            $set: { import_pending: token, ...rules, ...pushers },
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
}

/** A plan, whether the user had no document at all, and the revision of the pusher list read. */
type FreshPlan = ImportPlan & { readonly fresh: boolean; readonly pushersRev: number };

function onlyDuplicateKeys(error: unknown): boolean {
  if (!(error instanceof MongoBulkWriteError)) return false;
  const writeErrors = [error.writeErrors].flat(2) as readonly { readonly code?: unknown }[];
  return writeErrors.length > 0 && writeErrors.every((writeError) => writeError.code === DUPLICATE_KEY);
}
