import { pusherMatches, samePusher, type StoredPusher } from './pusher.js';
import type { PusherSetPlan } from './decide-pusher-set.js';

export type PusherSetEffect = 'created' | 'updated' | 'deleted' | 'unchanged';

export interface PusherSetOutcome {
  readonly pushers: readonly StoredPusher[];
  readonly effect: PusherSetEffect;
  /** How many pushers of other users `append: false` removed. */
  readonly removedFromOtherUsers: number;
}

/**
 * Applies a plan to a list of pushers (all users'). The in-memory store is
 * built on this; the MongoDB store performs the same steps as queries.
 * Deleting a pusher that does not exist succeeds and changes nothing; so
 * does setting a pusher to exactly the values it has (`samePusher`), and
 * then it is left as it was. An update keeps the `device_id` the pusher
 * has; one without (stored before devices were recorded) takes the plan's.
 */
export function applyPusherSet(pushers: readonly StoredPusher[], plan: PusherSetPlan): PusherSetOutcome {
  const { key } = plan;
  if (plan.type === 'delete') {
    const kept = pushers.filter((p) => !pusherMatches(p, key));
    const effect = kept.length === pushers.length ? 'unchanged' : 'deleted';
    return { pushers: kept, effect, removedFromOtherUsers: 0 };
  }
  const stored: StoredPusher = { ...plan.pusher, user_id: key.userId };
  let effect: PusherSetEffect = 'created';
  let removedFromOtherUsers = 0;
  const next: StoredPusher[] = [];
  for (const pusher of pushers) {
    if (pusherMatches(pusher, key)) {
      const updated = keepDevice(pusher, stored);
      const same = samePusher(pusher, updated);
      effect = same ? 'unchanged' : 'updated';
      next.push(same ? pusher : updated);
    } else if (plan.removeFromOtherUsers && pusher.app_id === key.appId && pusher.pushkey === key.pushkey) {
      removedFromOtherUsers += 1;
    } else {
      next.push(pusher);
    }
  }
  if (effect === 'created') next.push(stored);
  return { pushers: next, effect, removedFromOtherUsers };
}

/** The new values of an existing pusher, with the device it was created by (as Synapse does), if known. */
export function keepDevice(existing: StoredPusher, update: StoredPusher): StoredPusher {
  const deviceId = existing.device_id ?? update.device_id;
  const { device_id: _ignored, ...values } = update;
  return deviceId === undefined ? values : { ...values, device_id: deviceId };
}
