import type { PushRulesLookup } from '../push-rules/push-rules-event.js';
import type { Ruleset } from '../push-rules/push-rule.js';
import type { PusherDeletion } from '../pushers/pusher-deletion.js';
import type { PusherKey, StoredPusher } from '../pushers/pusher.js';
import type { RejectedRegistration } from '../pushers/rejected-registration.js';

/**
 * A user's push-rules account data as loaded, with the version of the
 * user's push rules. Version 0 means nothing was ever stored for them.
 * Versions only grow: after `eraseUserData` the entry is gone (`found:
 * false`, as for a new user) but the version stays past every version
 * announced before, so a front that tracks versions sees the next change
 * as newer.
 *
 * `lookup.found === 'failed'` is the "lookup failed" state
 * (docs/push-rules.md#the-push-rules-event-and-its-states): a document
 * holds a push-rules entry that cannot even be read back as an event (its
 * stored JSON text is corrupt), as opposed to an event whose content is not
 * a ruleset (which is `found: true` and decodes as undecodable).
 */
export interface LoadedPushRules {
  readonly version: number;
  readonly lookup: PushRulesLookup | { readonly found: 'failed' };
  /** The recorded write with the `messageId` asked for, when it was already applied. */
  readonly recorded?: RecordedWrite;
  /**
   * The length of the stored ruleset text, when there is any: what the
   * service weighs a write of it by (see `WeightedBudget`).
   */
  readonly storedChars?: number;
}

/**
 * A write already applied for a user, remembered under the request's AMQP
 * `messageId` so that a redelivered request gets the same reply and is not
 * applied twice. Each user keeps a bounded window of the most recent ones.
 */
export interface RecordedWrite {
  readonly messageId: string;
  /** The reply that was sent, as JSON text. */
  readonly replyJson: string;
  /**
   * The write changed nothing (it was judged a no-op and only recorded).
   * Any other recorded write changed what its op is about, and a
   * redelivery answered from the record announces that again, in case its
   * first event was lost. Only no-ops carry it: the common record stays as
   * small as it was (the record window lives in the user's document, which
   * every write rewrites).
   */
  readonly unchanged?: true;
}

/** A recorded write as `findRecordedWrite` finds it, with the user's pushers version now. */
export interface FoundWrite extends RecordedWrite {
  readonly pushersVersion: number;
}

export type SaveOutcome = { readonly saved: true; readonly version: number } | { readonly saved: false };

/** What `eraseUserData` changes in the user's document, besides recording `record`. */
export interface UserDataErasure {
  /** Remove the push-rules entry and bump the push-rules version. */
  readonly pushRules: boolean;
  /** Bump the pushers version (the pushers themselves were deleted before). */
  readonly pushers: boolean;
  readonly record?: RecordedWrite | undefined;
}

export type ErasureOutcome =
  { readonly saved: true; readonly version: number; readonly pushersVersion: number } | { readonly saved: false };

/**
 * The storage port the worker needs. Owned by the domain side; adapters:
 * `MongoPushStore` (production) and `InMemoryPushStore` (tests, local runs).
 * Both pass `test/store/push-store-contract.ts`.
 *
 * Adapters throw `StoreUnavailableError` for transient failures (the caller
 * may retry) and any other error for permanent ones.
 */
export interface PushStore {
  /** With `messageId`, also looks for a recorded write with that id. */
  loadPushRules(userId: string, messageId?: string): Promise<LoadedPushRules>;

  /**
   * Compare-and-set: stores the ruleset as the user's `m.push_rules` content
   * if the document is still at `expectedVersion` (0: no document yet), and
   * bumps the version. `{saved: false}` when another writer got there first.
   * `record` joins the user's window of recorded writes in the same atomic
   * update, so a write and its record are never separated.
   */
  savePushRules(
    userId: string,
    expectedVersion: number,
    ruleset: Ruleset,
    defaultsRevision: string,
    record?: RecordedWrite,
  ): Promise<SaveOutcome>;

  /**
   * The push rules of many users in one query (for `evaluate`): an entry
   * for each of `userIds` that has a push-rules entry stored, corrupt ones
   * included (`found: 'failed'`); users with none are left out. No recorded
   * writes are read.
   */
  loadManyPushRules(userIds: readonly string[]): Promise<ReadonlyMap<string, LoadedPushRules>>;

  /**
   * Stores the ruleset only if the user has no push-rules entry at all (not
   * even a corrupt one), bumping the version: 1 for a new user, the next
   * one for a user whose data was erased. `{saved: false}` when there is an
   * entry.
   */
  insertPushRulesIfAbsent(userId: string, ruleset: Ruleset, defaultsRevision: string): Promise<SaveOutcome>;

  /**
   * Compare-and-set at `expectedVersion` (0: a document without a version,
   * or none at all), in one atomic update: removes the push-rules entry and
   * bumps the version (`pushRules`), bumps the pushers version (`pushers`),
   * records `record`. Everything else in the document stays: the versions
   * (which only grow), the recorded writes, other account data; a user
   * without a document gets one (for the pushers version or the record).
   * `{saved: false}` when another writer got there first. What
   * `delete_user_data` does after deleting the pushers.
   */
  eraseUserData(userId: string, expectedVersion: number, erasure: UserDataErasure): Promise<ErasureOutcome>;

  listPushers(userId: string): Promise<readonly StoredPusher[]>;

  /**
   * The pushers of many users at once (a `notify` fan-out), in as few
   * queries as the store allows; each user's in the order `listPushers`
   * gives them, and an empty list for a user with none.
   */
  listPushersOfUsers(userIds: readonly string[]): Promise<ReadonlyMap<string, readonly StoredPusher[]>>;
  /**
   * Creates the pusher with this (user, app_id, pushkey), or replaces it if
   * any of its values differ, in one atomic update. `unchanged` when it
   * already had exactly these values, and then nothing was written. `data`
   * is compared as its JSON text, the form it is stored and returned in.
   *
   * `device_id` is recorded when the pusher is created; a pusher that has
   * one keeps it (an update may come from another device), one without
   * (stored before devices were recorded) takes the given one. The values
   * and the device are written in the same atomic update, so a concurrent
   * `deletePushers` sees the pusher either before or after it, never half.
   */
  upsertPusher(pusher: StoredPusher): Promise<'created' | 'updated' | 'unchanged'>;
  /** Whether a pusher was deleted. */
  deletePusher(key: PusherKey): Promise<boolean>;
  /**
   * Deletes the pushers `deletion` selects and says how many. Each pusher is
   * judged and deleted in one atomic step (a filtered delete, never a read
   * followed by deletes by key), so a pusher written concurrently is either
   * deleted with the values it has or kept whole.
   */
  deletePushers(deletion: PusherDeletion): Promise<number>;
  /**
   * Deletes the pusher a gateway rejected only if it is still the
   * registration the rejected request was sent for (see
   * `RejectedRegistration`): a pusher registered again since, or moved to
   * another gateway, stays. Whether it was deleted. One atomic step, like
   * `deletePushers`.
   */
  deleteRejectedPusher(rejected: RejectedRegistration): Promise<boolean>;
  /**
   * Deletes pushers with this app_id and pushkey owned by anyone but
   * `key.userId`, and returns those owners (each once, in no set order):
   * every one of them must be announced (`m.pushers`), or their delivery
   * caches keep pushing to a pushkey that is someone else's now.
   */
  deletePushersOfOtherUsers(key: PusherKey): Promise<readonly string[]>;
  /** Bumps and returns the user's pushers version (for change events), recording `record` with it. */
  bumpPushersVersion(userId: string, record?: RecordedWrite): Promise<number>;

  /** The recorded write with this `messageId`, if it is still in the user's window. */
  findRecordedWrite(userId: string, messageId: string): Promise<FoundWrite | undefined>;
  /**
   * Adds a write to the user's window (for pusher writes that changed
   * nothing else) and returns the user's pushers version, which it leaves
   * as it is (what such a write announces, see `PushService`).
   */
  recordWrite(userId: string, record: RecordedWrite): Promise<number>;
  /**
   * Compare-and-set without a change: adds `record` to the user's window if
   * their push rules are still at `expectedVersion` (0: a document without
   * a version), leaving the rules and the version as they are. `false` when
   * another writer changed them first, or there is no document. How a
   * push-rule write that changed nothing is remembered (see `PushService`).
   */
  recordWriteAtVersion(userId: string, expectedVersion: number, record: RecordedWrite): Promise<boolean>;
}

/** How many recorded writes each user keeps unless configured otherwise. */
export const DEFAULT_RECORDED_WRITES_WINDOW = 100;

/**
 * The store failed an operation for good (a server error that another
 * attempt would meet again): a storage problem, answered `Database`.
 * Anything else a store throws that is neither this nor
 * `StoreUnavailableError` is a bug, answered `Internal`.
 */
export class StoreFailedError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StoreFailedError';
  }
}

/** A transient storage failure: nothing was decided, the request may be retried. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}
