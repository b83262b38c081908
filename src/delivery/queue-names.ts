import { createHash } from 'node:crypto';
import { deviceQueueKey } from './delivery-key.js';
import type { DeliveryPusher, DeviceBatch } from './device-batches.js';

/** What a planned request says about its device queue: the same for every `notify` to the same devices. */
export interface QueueNames {
  /** `deviceQueueKey` of the batch. */
  readonly key: string;
  /** A short, stable name of the queue for request IDs (the key itself holds a URL and a user ID). */
  readonly tag: string;
  /** The pushers the request names (app ID and pushkey), in the batch's order. */
  readonly devices: readonly { readonly appId: string; readonly pushkey: string }[];
}

interface Planned {
  readonly pushers: readonly DeliveryPusher[];
  names?: QueueNames;
}

/**
 * What was planned for the last batch with each pusher as its first, kept
 * while the pusher object lives. While the pusher cache holds a user's
 * pushers, every `notify` to them is planned with the same pusher objects
 * (delivery-pusher-of.ts), so one pusher list, key, tag and device list
 * serve all of that device's requests: during an outage 20 requests wait
 * per device, and each held its own copies (~370 B of the ~1,050 B a
 * waiting request held), and cost a SHA-256.
 *
 * Weak, so bounded by what the pusher cache holds and gone with it. An
 * entry is used only for a batch of the very same pusher objects, whose
 * user, URL and format (what the names derive from) are those of the
 * first; any other batch replaces it.
 */
const byFirstPusher = new WeakMap<DeliveryPusher, Planned>();

function planned(pushers: readonly DeliveryPusher[]): Planned {
  const first = pushers[0];
  const known = first === undefined ? undefined : byFirstPusher.get(first);
  if (known !== undefined && known.pushers.length === pushers.length && known.pushers.every((p, i) => p === pushers[i]))
    return known;
  const made: Planned = { pushers: Object.freeze(pushers.slice()) };
  if (first !== undefined) byFirstPusher.set(first, made);
  return made;
}

/** A batch's pushers as a list no one changes, the same list for every request to the same devices. */
export function plannedPushers(pushers: readonly DeliveryPusher[]): readonly DeliveryPusher[] {
  return planned(pushers).pushers;
}

/** The key, tag and devices of one batch's requests. */
export function queueNames(batch: DeviceBatch): QueueNames {
  const entry = planned(batch.pushers);
  if (entry.names !== undefined) return entry.names;
  const key = deviceQueueKey(batch.userId, batch.url, batch.format);
  entry.names = {
    key,
    tag: deviceQueueTag(key),
    devices: Object.freeze(
      batch.pushers.map((pusher) => Object.freeze({ appId: pusher.app_id, pushkey: pusher.pushkey })),
    ),
  };
  return entry.names;
}

/** Unchanged since IDs were first planned: a redelivered `notify` must plan the IDs it had. */
function deviceQueueTag(key: string): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, 22);
}
