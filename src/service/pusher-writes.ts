import { failure, success, type Reply } from '../contract/reply.js';
import { LIMIT_MESSAGES, matrixError } from '../errors/error-catalogue.js';
import {
  decidePusherSet,
  resolveEnabled,
  type PusherPolicy,
  type RawPusherSetAction,
} from '../pushers/decide-pusher-set.js';
import type { PusherDeletion } from '../pushers/pusher-deletion.js';
import { pusherMatches, type PusherKey, type StoredPusher } from '../pushers/pusher.js';
import type { FoundWrite, PushStore } from '../store/push-store.js';
import type { ChangeEvent } from './change-event.js';
import type { HandleOutcome } from './handle-outcome.js';
import type { KeyedSerializer } from './keyed-serializer.js';
import { recordOf, replayOf } from './write-attempts.js';

export interface PusherWritesOptions {
  readonly policy: PusherPolicy;
  readonly maxPushersPerUser: number;
  /** The writes of one user, one at a time within this process (shared with the other writes of a user). */
  readonly perUser: KeyedSerializer;
}

/**
 * `set_pusher` and `delete_pushers`. Pushers live in their own collection,
 * so a pusher write and its record are two updates: a crash between them
 * lets a redelivery apply the same change again, which leaves the same
 * pushers (a set is a replace by value, a delete of a missing pusher is a
 * no-op) and at worst announces one more change event.
 */
export class PusherWrites {
  readonly #options: PusherWritesOptions;

  constructor(options: PusherWritesOptions) {
    this.#options = options;
  }

  /**
   * A set that leaves the user's pusher exactly as it was (the store decides
   * it in the same atomic update, see `upsertPusher`), like a delete of a
   * pusher that is not there, bumps no version; its `messageId` is still
   * recorded, for the reason given at rule-writes.ts `recordUnchanged`, and
   * announced (see `pushersWritten`). Pushers of other users removed by
   * `append: false` are removed either way, and each of those users is
   * announced with a version bump of their own: their delivery caches would
   * otherwise keep sending their notifications to a pushkey that is someone
   * else's now. Should the worker die between that removal and the confirm
   * of their events, a retry finds nothing left to remove and cannot name
   * them: the caches' age bound (`delivery.pusherCacheMaxStalenessMs`) ends it.
   */
  async setPusher(
    store: PushStore,
    userId: string,
    messageId: string | undefined,
    action: RawPusherSetAction,
    deviceId: string | undefined,
  ): Promise<HandleOutcome> {
    if (messageId !== undefined) {
      const recorded = await store.findRecordedWrite(userId, messageId);
      if (recorded !== undefined) return pushersReplayAnnounced(userId, recorded);
    }
    const plan = decidePusherSet(userId, action, this.#options.policy, { deviceId });
    if (!plan.ok) return { reply: failure(plan.error), conflicts: 0 };
    let changed: boolean;
    let others: readonly ChangeEvent[] = [];
    if (plan.value.type === 'delete') {
      changed = await store.deletePusher(plan.value.key);
    } else {
      const { key } = plan.value;
      const pushers = await store.listPushers(userId);
      const refused = this.#checkPusherCount(pushers, key);
      if (refused !== undefined) return { reply: refused, conflicts: 0 };
      // The device is the store's to keep (see upsertPusher); `enabled`,
      // when the action names it twice, depends on the stored value.
      const existing = pushers.find((p) => pusherMatches(p, key));
      const enabled = existing === undefined ? plan.value.pusher.enabled : resolveEnabled(action, existing.enabled);
      const upserted = await store.upsertPusher({ ...plan.value.pusher, enabled, user_id: userId });
      if (plan.value.removeFromOtherUsers)
        others = await othersBumped(store, await store.deletePushersOfOtherUsers(key));
      changed = upserted !== 'unchanged';
    }
    const written = await pushersWritten(store, userId, messageId, success({}), changed);
    return others.length === 0 ? written : { ...written, changes: [...(written.changes ?? []), ...others] };
  }

  /**
   * `delete_pushers`: one filtered delete in the store, so each pusher goes
   * whole or stays whole whatever `set_pusher` runs beside it (see
   * `PushStore.deletePushers`). Replies `{deleted: n}`; a redelivery after
   * a crash between the delete and its record deletes nothing more and
   * counts only what it deleted.
   */
  async deletePushers(
    store: PushStore,
    messageId: string | undefined,
    deletion: PusherDeletion,
  ): Promise<HandleOutcome> {
    const { userId } = deletion;
    return this.#options.perUser.run(userId, async () => {
      if (messageId !== undefined) {
        const recorded = await store.findRecordedWrite(userId, messageId);
        if (recorded !== undefined) return pushersReplayAnnounced(userId, recorded);
      }
      const deleted = await store.deletePushers(deletion);
      return pushersWritten(store, userId, messageId, success({ deleted }), deleted > 0);
    });
  }

  /**
   * A new pusher beyond the limit is refused; replacing one never is.
   * Workers serving the same user at the same instant may each let one
   * through, so the limit can be passed by a few — it bounds abuse, it is
   * not an invariant.
   */
  #checkPusherCount(pushers: readonly StoredPusher[], key: PusherKey): Reply | undefined {
    const { maxPushersPerUser } = this.#options;
    if (pushers.length < maxPushersPerUser) return undefined;
    if (pushers.some((p) => p.app_id === key.appId && p.pushkey === key.pushkey)) return undefined;
    return failure(matrixError('TooLarge', LIMIT_MESSAGES.tooManyPushers(maxPushersPerUser)));
  }
}

/**
 * After a pusher write: the record, and a version bump with its change
 * event when something changed.
 *
 * A write with a `messageId` announces its user even when it changed
 * nothing now. It found no record of itself (looked up first), so it may
 * be the retry of one whose change landed while its bump and record did
 * not (answered `Unavailable`, with no event): judged again on what is
 * stored, it changes nothing, and it is the last chance to announce that
 * change. A spare event costs each cache one read; a missing one leaves
 * every worker's delivery cache with the old list. It bumps no version
 * (consumers take any event as "read this user again", at a version seen
 * before too), and it is recorded as a change, so that a redelivery whose
 * event was not confirmed announces again.
 */
async function pushersWritten(
  store: PushStore,
  userId: string,
  messageId: string | undefined,
  reply: Reply,
  changed: boolean,
): Promise<HandleOutcome> {
  const record = recordOf(messageId, reply);
  if (!changed) {
    if (record === undefined) return { reply, conflicts: 0, unchanged: true };
    const version = await store.recordWrite(userId, record);
    return { reply, conflicts: 0, unchanged: true, changes: [{ user_id: userId, type: 'm.pushers', version }] };
  }
  const version = await store.bumpPushersVersion(userId, record);
  return { reply, changes: [{ user_id: userId, type: 'm.pushers', version }], conflicts: 0 };
}

/** The users a `set_pusher` took a pushkey from, each with a pushers version bump and its change event. */
async function othersBumped(store: PushStore, userIds: readonly string[]): Promise<readonly ChangeEvent[]> {
  const changes: ChangeEvent[] = [];
  for (const userId of userIds) {
    changes.push({ user_id: userId, type: 'm.pushers', version: await store.bumpPushersVersion(userId) });
  }
  return changes;
}

/**
 * A pusher write (or `delete_pushers`) met its own record: answered from
 * it; one that changed the user's pushers announces them again at the
 * pushers version stored now: the first delivery may have applied the
 * write and died before the broker confirmed its change event (as
 * rule-writes.ts `replayAnnounced` says).
 */
function pushersReplayAnnounced(userId: string, recorded: FoundWrite): HandleOutcome {
  const reply = replayOf(recorded);
  return recorded.unchanged !== true
    ? {
        reply,
        conflicts: 0,
        replayed: true,
        changes: [{ user_id: userId, type: 'm.pushers', version: recorded.pushersVersion }],
      }
    : { reply, conflicts: 0, replayed: true };
}
