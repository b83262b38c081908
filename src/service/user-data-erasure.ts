import { success } from '../contract/reply.js';
import type { FoundWrite, PushStore, RecordedWrite } from '../store/push-store.js';
import type { ChangeEvent } from './change-event.js';
import type { HandleOutcome } from './handle-outcome.js';
import type { KeyedSerializer } from './keyed-serializer.js';
import { recordOf, replayOf, withRetries, type Attempt, type AttemptPolicy } from './write-attempts.js';

/**
 * `delete_user_data` (deactivation): every pusher of the user, e-mail
 * ones included, then in one compare-and-set update of the user's
 * document the push-rules entry, both version bumps and the record.
 * Afterwards the user reads as a new one (no push rules: the defaults;
 * no pushers), but the versions go on from where they were and the
 * recorded writes stay, this request's among them, so a retry replays
 * `{}`. The record is written last: a crash before it leaves nothing a
 * redelivery would not finish.
 */
export async function eraseUserData(
  store: PushStore,
  userId: string,
  messageId: string | undefined,
  writes: { readonly perUser: KeyedSerializer; readonly attempts: AttemptPolicy },
): Promise<HandleOutcome> {
  const { perUser, attempts } = writes;
  return perUser.run(userId, async () => {
    if (messageId !== undefined) {
      const recorded = await store.findRecordedWrite(userId, messageId);
      if (recorded !== undefined)
        return withRetries(attempts, async () =>
          userDataReplayAnnounced(userId, (await store.loadPushRules(userId)).version, recorded),
        );
    }
    const deletedPushers = await store.deletePushers({ userId, devices: { all: true }, includeEmail: true });
    return withRetries(attempts, async () => {
      const loaded = await store.loadPushRules(userId, messageId);
      if (loaded.recorded !== undefined) {
        // A copy of this request got there first (a redelivery served beside it).
        const found = messageId === undefined ? undefined : await store.findRecordedWrite(userId, messageId);
        return userDataReplayAnnounced(userId, loaded.version, found ?? loaded.recorded);
      }
      const reply = success({});
      // A corrupt entry is erased too.
      const pushRules = loaded.lookup.found !== false;
      const pushers = deletedPushers > 0;
      const record = recordOf(messageId, reply, !pushRules && !pushers);
      if (!pushRules && !pushers && record === undefined) return { done: reply, unchanged: true };
      const erased = await store.eraseUserData(userId, loaded.version, { pushRules, pushers, record });
      if (!erased.saved) return { conflict: true };
      const changes: ChangeEvent[] = [];
      if (pushRules) changes.push({ user_id: userId, type: 'm.push_rules', version: erased.version });
      if (pushers) changes.push({ user_id: userId, type: 'm.pushers', version: erased.pushersVersion });
      return changes.length === 0 ? { done: reply, unchanged: true } : { done: reply, changes };
    });
  });
}

/**
 * `delete_user_data` met its own record: answered from it; one that erased
 * anything announces both types again, at the versions stored now, for the
 * reason rule-writes.ts `replayAnnounced` gives (the record does not say
 * which it erased: a spare event costs a re-read). Without the pushers version (a
 * record the store no longer finds), the push rules alone.
 */
function userDataReplayAnnounced(userId: string, version: number, recorded: RecordedWrite | FoundWrite): Attempt {
  const done = replayOf(recorded);
  if (recorded.unchanged === true) return { done, replayed: true };
  const changes: ChangeEvent[] = [{ user_id: userId, type: 'm.push_rules', version }];
  if ('pushersVersion' in recorded)
    changes.push({ user_id: userId, type: 'm.pushers', version: recorded.pushersVersion });
  return { done, replayed: true, changes };
}
