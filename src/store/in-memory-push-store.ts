import type { Ruleset } from '../push-rules/push-rule.js';
import { applyPusherSet } from '../pushers/apply-pusher-set.js';
import { deletionSelects, type PusherDeletion } from '../pushers/pusher-deletion.js';
import { pusherMatches, type PusherKey, type StoredPusher } from '../pushers/pusher.js';
import { stillRejected, type RejectedRegistration } from '../pushers/rejected-registration.js';
import type { ImportStore, ImportWriteOptions, UserImport, UserImportOutcome } from './import-store.js';
import { planUserImport } from './import-plan.js';
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
import { encodePushRulesContent, readPushRulesEntry } from './push-rules-entry.js';

interface UserDocument {
  version: number;
  /** The push-rules event as JSON text, like the MongoDB adapter keeps it. */
  pushRules?: { contentJson?: string; defaultsRevision?: string };
  pushersVersion: number;
  recentWrites: readonly RecordedWrite[];
  /** An import claimed the user and stopped before writing the pushers (a test hook sets it). */
  importUnfinished?: true;
}

/**
 * The storage port in memory, with the same compare-and-set semantics as
 * MongoDB. Values are kept as JSON text so that no caller can mutate stored
 * state through a reference it still holds.
 */
export class InMemoryPushStore implements PushStore, ImportStore {
  readonly #users = new Map<string, UserDocument>();
  #pushers: readonly StoredPusher[] = [];
  readonly #window: number;
  /** The clock of a pusher's `ts`. */
  readonly #now: () => number;

  constructor(options: { readonly recordedWritesWindow?: number; readonly now?: () => number } = {}) {
    this.#window = options.recordedWritesWindow ?? DEFAULT_RECORDED_WRITES_WINDOW;
    this.#now = options.now ?? Date.now;
  }

  /** Test hook: put a raw push-rules entry in place, as another writer might have. */
  putRawPushRules(userId: string, entry: { contentJson?: string; defaultsRevision?: string }): void {
    const doc = this.#doc(userId);
    this.#users.set(userId, { ...doc, version: doc.version + 1, pushRules: entry });
  }

  /** Test hook: leave the user as an import stopped between its claim and its pushers would. */
  markImportUnfinished(userId: string): void {
    this.#users.set(userId, { ...this.#doc(userId), importUnfinished: true });
  }

  async importUsers(users: readonly UserImport[], options: ImportWriteOptions): Promise<readonly UserImportOutcome[]> {
    await Promise.resolve();
    return users.map((user) => this.#importUser(user, options));
  }

  async finishImports(userIds: readonly string[]): Promise<void> {
    await Promise.resolve();
    for (const userId of userIds) {
      const { importUnfinished: _done, ...rest } = this.#doc(userId);
      this.#users.set(userId, rest);
    }
  }

  #importUser(user: UserImport, options: ImportWriteOptions): UserImportOutcome {
    const { userId } = user;
    const doc = this.#doc(userId);
    const existing = this.#pushers.filter((p) => p.user_id === userId);
    const plan = planUserImport(
      user,
      {
        version: doc.version,
        pushersVersion: doc.pushersVersion,
        entry: doc.pushRules,
        pushers: existing,
        unfinished: doc.importUnfinished === true,
      },
      options,
    );
    if ('status' in plan) return plan;
    const { importUnfinished: _done, ...rest } = doc;
    this.#users.set(userId, {
      ...rest,
      ...(options.keepMarks === true ? { importUnfinished: true as const } : {}),
      version: plan.nextVersion,
      pushersVersion: plan.nextPushersVersion,
      ...(plan.rulesChanged
        ? { pushRules: { contentJson: plan.contentJson, defaultsRevision: user.defaultsRevision } }
        : {}),
    });
    if (plan.pushersChanged) {
      this.#pushers = [...this.#pushers.filter((p) => p.user_id !== userId), ...structuredClone(user.pushers)];
    }
    return {
      userId,
      status: 'imported',
      ...(plan.announceRules ? { pushRulesVersion: plan.nextVersion } : {}),
      ...(plan.announcePushers ? { pushersVersion: plan.nextPushersVersion } : {}),
    };
  }

  async loadPushRules(userId: string, messageId?: string): Promise<LoadedPushRules> {
    await Promise.resolve();
    const doc = this.#doc(userId);
    const lookup = readPushRulesEntry(doc.pushRules);
    const chars = doc.pushRules?.contentJson?.length ?? 0;
    const loaded: LoadedPushRules =
      chars > 0 ? { version: doc.version, lookup, storedChars: chars } : { version: doc.version, lookup };
    const recorded = messageId === undefined ? undefined : findRecorded(doc, messageId);
    return recorded === undefined ? loaded : { ...loaded, recorded };
  }

  async loadManyPushRules(userIds: readonly string[]): Promise<ReadonlyMap<string, LoadedPushRules>> {
    await Promise.resolve();
    const loaded = new Map<string, LoadedPushRules>();
    for (const userId of userIds) {
      const doc = this.#users.get(userId);
      if (doc?.pushRules === undefined) continue;
      loaded.set(userId, { version: doc.version, lookup: readPushRulesEntry(doc.pushRules) });
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
    await Promise.resolve();
    const doc = this.#doc(userId);
    if (doc.version !== expectedVersion) return { saved: false };
    const version = expectedVersion + 1;
    const pushRules = { contentJson: encodePushRulesContent(ruleset), defaultsRevision };
    this.#users.set(userId, { ...doc, version, pushRules, recentWrites: this.#withRecord(doc, record) });
    return { saved: true, version };
  }

  async insertPushRulesIfAbsent(userId: string, ruleset: Ruleset, defaultsRevision: string): Promise<SaveOutcome> {
    const doc = this.#doc(userId);
    if (doc.pushRules !== undefined) {
      await Promise.resolve();
      return { saved: false };
    }
    return this.savePushRules(userId, doc.version, ruleset, defaultsRevision);
  }

  async eraseUserData(userId: string, expectedVersion: number, erasure: UserDataErasure): Promise<ErasureOutcome> {
    await Promise.resolve();
    const doc = this.#doc(userId);
    if (doc.version !== expectedVersion) return { saved: false };
    const { pushRules: erasePushRules, pushers, record } = erasure;
    const version = erasePushRules ? expectedVersion + 1 : expectedVersion;
    const pushersVersion = pushers ? doc.pushersVersion + 1 : doc.pushersVersion;
    const next: UserDocument = { ...doc, version, pushersVersion, recentWrites: this.#withRecord(doc, record) };
    if (erasePushRules) delete next.pushRules;
    this.#users.set(userId, next);
    return { saved: true, version, pushersVersion };
  }

  async listPushers(userId: string): Promise<readonly StoredPusher[]> {
    await Promise.resolve();
    return this.#pushers.filter((p) => p.user_id === userId).map((p) => structuredClone(p));
  }

  async listPushersOfUsers(userIds: readonly string[]): Promise<ReadonlyMap<string, readonly StoredPusher[]>> {
    const lists = await Promise.all(userIds.map(async (userId) => this.listPushers(userId)));
    return new Map(userIds.map((userId, index) => [userId, lists[index] ?? []]));
  }

  async upsertPusher(pusher: StoredPusher): Promise<'created' | 'updated' | 'unchanged'> {
    await Promise.resolve();
    const key = { userId: pusher.user_id, appId: pusher.app_id, pushkey: pusher.pushkey };
    // `ts` is the store's to set, never the caller's.
    const { user_id: _owner, ts: _ts, ...wire } = structuredClone(pusher);
    const outcome = applyPusherSet(this.#pushers, { type: 'upsert', key, pusher: wire, removeFromOtherUsers: false });
    // An upsert plan is never a deletion.
    const effect = outcome.effect === 'deleted' ? 'updated' : outcome.effect;
    // An unchanged pusher keeps the time it was last changed.
    const ts = this.#now();
    this.#pushers =
      effect === 'unchanged' ? outcome.pushers : outcome.pushers.map((p) => (pusherMatches(p, key) ? { ...p, ts } : p));
    return effect;
  }

  async deletePusher(key: PusherKey): Promise<boolean> {
    await Promise.resolve();
    const outcome = applyPusherSet(this.#pushers, { type: 'delete', key });
    this.#pushers = outcome.pushers;
    return outcome.effect === 'deleted';
  }

  async deletePushers(deletion: PusherDeletion): Promise<number> {
    await Promise.resolve();
    const before = this.#pushers.length;
    this.#pushers = this.#pushers.filter((p) => !deletionSelects(deletion, p));
    return before - this.#pushers.length;
  }

  async deleteRejectedPusher(rejected: RejectedRegistration): Promise<boolean> {
    await Promise.resolve();
    const before = this.#pushers.length;
    this.#pushers = this.#pushers.filter((p) => !stillRejected(p, rejected));
    return this.#pushers.length < before;
  }

  async deletePushersOfOtherUsers(key: PusherKey): Promise<readonly string[]> {
    await Promise.resolve();
    const taken = (p: StoredPusher) => p.user_id !== key.userId && p.app_id === key.appId && p.pushkey === key.pushkey;
    const owners = [...new Set(this.#pushers.filter(taken).map((p) => p.user_id))];
    this.#pushers = this.#pushers.filter((p) => !taken(p));
    return owners;
  }

  async bumpPushersVersion(userId: string, record?: RecordedWrite): Promise<number> {
    await Promise.resolve();
    const doc = this.#doc(userId);
    const pushersVersion = doc.pushersVersion + 1;
    this.#users.set(userId, { ...doc, pushersVersion, recentWrites: this.#withRecord(doc, record) });
    return pushersVersion;
  }

  async findRecordedWrite(userId: string, messageId: string): Promise<FoundWrite | undefined> {
    await Promise.resolve();
    const doc = this.#doc(userId);
    const found = findRecorded(doc, messageId);
    return found === undefined ? undefined : { ...found, pushersVersion: doc.pushersVersion };
  }

  async recordWrite(userId: string, record: RecordedWrite): Promise<number> {
    await Promise.resolve();
    const doc = this.#doc(userId);
    this.#users.set(userId, { ...doc, recentWrites: this.#withRecord(doc, record) });
    return doc.pushersVersion;
  }

  async recordWriteAtVersion(userId: string, expectedVersion: number, record: RecordedWrite): Promise<boolean> {
    await Promise.resolve();
    const doc = this.#users.get(userId);
    if (doc?.version !== expectedVersion) return false;
    this.#users.set(userId, { ...doc, recentWrites: this.#withRecord(doc, record) });
    return true;
  }

  #doc(userId: string): UserDocument {
    return this.#users.get(userId) ?? { version: 0, pushersVersion: 0, recentWrites: [] };
  }

  #withRecord(doc: UserDocument, record: RecordedWrite | undefined): readonly RecordedWrite[] {
    if (record === undefined) return doc.recentWrites;
    return [...doc.recentWrites, { ...record }].slice(-this.#window);
  }
}

function findRecorded(doc: UserDocument, messageId: string): RecordedWrite | undefined {
  return doc.recentWrites.findLast((w) => w.messageId === messageId);
}
