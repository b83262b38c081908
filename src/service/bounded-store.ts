import type { Ruleset } from '../push-rules/push-rule.js';
import type { PusherDeletion } from '../pushers/pusher-deletion.js';
import type { PusherKey, StoredPusher } from '../pushers/pusher.js';
import type { RejectedRegistration } from '../pushers/rejected-registration.js';
import {
  StoreUnavailableError,
  type ErasureOutcome,
  type FoundWrite,
  type LoadedPushRules,
  type PushStore,
  type RecordedWrite,
  type SaveOutcome,
  type UserDataErasure,
} from '../store/push-store.js';

/**
 * Why a store operation was not waited for: `not-started`, its request's
 * deadline had passed before it was due; `deadline`, it was under way when
 * the deadline came; `timeout`, it took longer than the operation timeout.
 */
export type AbandonReason = 'not-started' | 'deadline' | 'timeout';

/** A store operation given up under way: it may still be applied; `settled` resolves once it is done either way. */
export interface AbandonedOperation {
  readonly operation: string;
  readonly settled: Promise<void>;
}

/** Narrow hook for metrics; tests pass object literals. */
export interface StoreBoundsObserver {
  storeOperationAbandoned(operation: string, reason: AbandonReason): void;
}

export interface StoreBounds {
  /** `Date.now()` by which the request must be answered; undefined: none. */
  readonly deadline?: number | undefined;
  /** Each operation is given up after this long; undefined or 0: no bound but the deadline. */
  readonly operationTimeoutMs?: number | undefined;
  readonly now?: () => number;
  readonly observer?: StoreBoundsObserver | undefined;
}

/**
 * The request's deadline came before the store had served it: the store
 * operation it names was not started, or not waited for. Unavailable, like
 * any store failure, with a message of its own (`MESSAGES.deadlinePassed`).
 */
export class DeadlinePassedError extends StoreUnavailableError {
  constructor(message: string) {
    super(message);
    this.name = 'DeadlinePassedError';
  }
}

/**
 * One request's view of the store, bounded in time: no operation is
 * started once the request's deadline has passed, and each one is given up
 * (rejected with `StoreUnavailableError`) when the deadline comes or
 * after `operationTimeoutMs`, whichever is sooner. Between them, the
 * request gets its reply by its deadline whatever the store does, and a
 * store that stalls is not asked for more work on behalf of callers that
 * have given up.
 *
 * An operation given up is abandoned, not cancelled: the MongoDB driver
 * (6.x) cannot cancel a write (its `timeoutMS` is a no-op), so one already
 * sent may still be applied, and one still waiting inside the driver for a
 * server or a pooled connection is sent if it gets one within
 * `serverSelectionTimeoutMS` / `waitQueueTimeoutMS`. What the worker
 * guarantees is that it starts nothing after the deadline; the caller's
 * retry with the same `messageId` settles the rest.
 */
export class BoundedStore implements PushStore {
  readonly #inner: PushStore;
  readonly #deadline: number | undefined;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #observer: StoreBoundsObserver | undefined;
  readonly #abandoned: AbandonedOperation[] = [];

  constructor(inner: PushStore, bounds: StoreBounds) {
    this.#inner = inner;
    this.#deadline = bounds.deadline;
    this.#timeoutMs =
      bounds.operationTimeoutMs !== undefined && bounds.operationTimeoutMs > 0 ? bounds.operationTimeoutMs : Infinity;
    this.#now = bounds.now ?? (() => Date.now());
    this.#observer = bounds.observer;
  }

  async #bounded<T>(operation: string, call: () => Promise<T>): Promise<T> {
    checkDeadline(operation, this.#deadline, this.#now, this.#observer);
    const left = this.#deadline === undefined ? Infinity : this.#deadline - this.#now();
    const byDeadline = left <= this.#timeoutMs;
    const ms = byDeadline ? left : this.#timeoutMs;
    if (!Number.isFinite(ms)) return call();
    const work = call();
    let timer: NodeJS.Timeout | undefined;
    const givenUp = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        this.#abandoned.push({ operation, settled: work.then(noop, noop) });
        this.#observer?.storeOperationAbandoned(operation, byDeadline ? 'deadline' : 'timeout');
        reject(
          byDeadline
            ? new DeadlinePassedError(`the request's deadline came while ${operation} was under way`)
            : new StoreUnavailableError(`${operation} took longer than ${ms} ms (mongodb.operationTimeoutMs)`),
        );
      }, ms);
    });
    try {
      // A late outcome of `call` after the timer is dropped by the race (a late failure is not left unhandled).
      return await Promise.race([work, givenUp]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The operations given up while under way so far: the driver may still
   * apply them (a write given up is not a write undone, see
   * `PushService`'s late announcements).
   */
  get abandoned(): readonly AbandonedOperation[] {
    return this.#abandoned;
  }

  async loadPushRules(userId: string, messageId?: string): Promise<LoadedPushRules> {
    return this.#bounded('loadPushRules', async () => this.#inner.loadPushRules(userId, messageId));
  }

  async savePushRules(
    userId: string,
    expectedVersion: number,
    ruleset: Ruleset,
    defaultsRevision: string,
    record?: RecordedWrite,
  ): Promise<SaveOutcome> {
    return this.#bounded('savePushRules', async () =>
      this.#inner.savePushRules(userId, expectedVersion, ruleset, defaultsRevision, record),
    );
  }

  async loadManyPushRules(userIds: readonly string[]): Promise<ReadonlyMap<string, LoadedPushRules>> {
    return this.#bounded('loadManyPushRules', async () => this.#inner.loadManyPushRules(userIds));
  }

  async insertPushRulesIfAbsent(userId: string, ruleset: Ruleset, defaultsRevision: string): Promise<SaveOutcome> {
    return this.#bounded('insertPushRulesIfAbsent', async () =>
      this.#inner.insertPushRulesIfAbsent(userId, ruleset, defaultsRevision),
    );
  }

  async eraseUserData(userId: string, expectedVersion: number, erasure: UserDataErasure): Promise<ErasureOutcome> {
    return this.#bounded('eraseUserData', async () => this.#inner.eraseUserData(userId, expectedVersion, erasure));
  }

  async listPushersOfUsers(userIds: readonly string[]): Promise<ReadonlyMap<string, readonly StoredPusher[]>> {
    return this.#bounded('listPushersOfUsers', async () => this.#inner.listPushersOfUsers(userIds));
  }

  async listPushers(userId: string): Promise<readonly StoredPusher[]> {
    return this.#bounded('listPushers', async () => this.#inner.listPushers(userId));
  }

  async upsertPusher(pusher: StoredPusher): Promise<'created' | 'updated' | 'unchanged'> {
    return this.#bounded('upsertPusher', async () => this.#inner.upsertPusher(pusher));
  }

  async deletePusher(key: PusherKey): Promise<boolean> {
    return this.#bounded('deletePusher', async () => this.#inner.deletePusher(key));
  }

  async deletePushers(deletion: PusherDeletion): Promise<number> {
    return this.#bounded('deletePushers', async () => this.#inner.deletePushers(deletion));
  }

  async deleteRejectedPusher(rejected: RejectedRegistration): Promise<boolean> {
    return this.#bounded('deleteRejectedPusher', async () => this.#inner.deleteRejectedPusher(rejected));
  }

  async deletePushersOfOtherUsers(key: PusherKey): Promise<readonly string[]> {
    return this.#bounded('deletePushersOfOtherUsers', async () => this.#inner.deletePushersOfOtherUsers(key));
  }

  async bumpPushersVersion(userId: string, record?: RecordedWrite): Promise<number> {
    return this.#bounded('bumpPushersVersion', async () => this.#inner.bumpPushersVersion(userId, record));
  }

  async findRecordedWrite(userId: string, messageId: string): Promise<FoundWrite | undefined> {
    return this.#bounded('findRecordedWrite', async () => this.#inner.findRecordedWrite(userId, messageId));
  }

  async recordWrite(userId: string, record: RecordedWrite): Promise<number> {
    return this.#bounded('recordWrite', async () => this.#inner.recordWrite(userId, record));
  }

  async recordWriteAtVersion(userId: string, expectedVersion: number, record: RecordedWrite): Promise<boolean> {
    return this.#bounded('recordWriteAtVersion', async () =>
      this.#inner.recordWriteAtVersion(userId, expectedVersion, record),
    );
  }
}

function noop(): void {
  // A late outcome (or failure) of an operation given up is only waited for.
}

/** Throws `DeadlinePassedError` when `deadline` has passed: what every store operation checks before it starts. */
export function checkDeadline(
  operation: string,
  deadline: number | undefined,
  now: () => number,
  observer?: StoreBoundsObserver,
): void {
  if (deadline === undefined || now() < deadline) return;
  observer?.storeOperationAbandoned(operation, 'not-started');
  throw new DeadlinePassedError(`the request's deadline had passed before ${operation} was started`);
}

/**
 * `work`, or a `DeadlinePassedError` when `deadline` comes first (what a
 * request waiting for its turn, or for a store shared with other
 * requests, is answered). `work` goes on; its outcome is then dropped.
 */
export async function beforeDeadline<T>(
  work: Promise<T>,
  deadline: number | undefined,
  now: () => number = () => Date.now(),
): Promise<T> {
  if (deadline === undefined) return work;
  let timer: NodeJS.Timeout | undefined;
  const passed = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => {
        reject(new DeadlinePassedError("the request's deadline came while it waited for its turn or for the store"));
      },
      Math.max(0, deadline - now()),
    );
  });
  try {
    return await Promise.race([work, passed]);
  } finally {
    clearTimeout(timer);
  }
}
