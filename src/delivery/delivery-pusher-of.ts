import type { StoredPusher } from '../pushers/pusher.js';
import type { DeliveryPusher } from './device-batches.js';

/**
 * One per stored pusher object, kept while it lives: the pusher cache hands
 * the intake the same objects for every `notify` to a user, and each
 * planned request names its pushers, so one made per message stayed with
 * every request waiting for the device (84 B each, 20 per device in an
 * outage). Weak, so gone with the cache's entry; a pusher changed in the
 * store is a new object.
 */
const planned = new WeakMap<StoredPusher, DeliveryPusher>();

/** A stored pusher as delivery plans with it; one stored before its time was recorded is sent `pushkey_ts` 0. */
export function deliveryPusherOf(pusher: StoredPusher): DeliveryPusher {
  const known = planned.get(pusher);
  if (known !== undefined) return known;
  const made: DeliveryPusher = {
    user_id: pusher.user_id,
    kind: pusher.kind,
    app_id: pusher.app_id,
    pushkey: pusher.pushkey,
    data: pusher.data,
    enabled: pusher.enabled,
    pushkeyTsMs: pusher.ts ?? 0,
  };
  planned.set(pusher, made);
  return made;
}
