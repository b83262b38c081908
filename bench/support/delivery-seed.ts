import type { Db } from 'mongodb';
import type { NotifyNotification } from '../../src/client/push-rules-client.js';
import type { NotifyRequestBody } from '../../src/contract/ops.js';
import type { DeliveryPusher } from '../../src/delivery/device-batches.js';
import { MongoPushStore } from '../../src/store/mongo-push-store.js';
import type { PusherDocument } from '../../src/store/mongo-pusher-lists.js';

/** The delivery bench's recipients: `users` users with `devicesPerUser` HTTP pushers each, user i on gateway i mod the URLs. */
export interface DeliveryAudience {
  readonly userIds: readonly string[];
  readonly pushers: readonly PusherDocument[];
  readonly devices: number;
}

const APP_ID = 'org.example.bench';

export function deliveryAudience(
  prefix: string,
  users: number,
  devicesPerUser: number,
  notifyUrls: readonly string[],
): DeliveryAudience {
  const userIds = Array.from({ length: users }, (_, i) => `@${prefix}-${i}:bench.example.org`);
  // Set an hour ago, as pushers are: `pushkey_ts` is then a real value, as `set_pusher` would store it.
  const ts = Date.now() - 3_600_000;
  const pushers = userIds.flatMap((userId, i) =>
    Array.from({ length: devicesPerUser }, (_, d): PusherDocument => ({
      user_id: userId,
      app_id: APP_ID,
      pushkey: pushkeyOf(prefix, i, d),
      kind: 'http',
      app_display_name: 'Bench',
      device_display_name: `Device ${d}`,
      lang: 'en',
      data_json: JSON.stringify({ url: notifyUrls[i % notifyUrls.length] }),
      enabled: true,
      device_id: `DEVICE${d}`,
      ts,
    })),
  );
  return { userIds, pushers, devices: users * devicesPerUser };
}

export const pushkeyOf = (prefix: string, user: number, device = 0) => `pk-${prefix}-${user}-${device}`;

/**
 * Writes the pushers straight into the worker's collection, as
 * `set_pusher` stores them (mongo-push-store.ts): 40,000 RPCs would take
 * the bench longer than what it measures.
 */
export async function seedPushers(db: Db, audience: DeliveryAudience): Promise<void> {
  const collection = db.collection<PusherDocument>('pushers');
  for (let i = 0; i < audience.pushers.length; i += 5000)
    await collection.insertMany(
      audience.pushers.slice(i, i + 5000).map((doc) => ({ ...doc })),
      { ordered: false },
    );
  // Into the users' lists, as a worker's start-up moves pushers of this (old) layout.
  await new MongoPushStore(db, { accountDataCollection: 'account_data', pushersCollection: 'pushers' }).ensureIndexes();
}

/** The same pushers as delivery plans with them (notify-intake.ts), for the raw limit's requests. */
export function deliveryPushersOf(audience: DeliveryAudience): ReadonlyMap<string, DeliveryPusher[]> {
  const byUser = new Map<string, DeliveryPusher[]>();
  for (const doc of audience.pushers) {
    const pusher: DeliveryPusher = {
      user_id: doc.user_id,
      kind: doc.kind,
      app_id: doc.app_id,
      pushkey: doc.pushkey,
      data: JSON.parse(doc.data_json) as DeliveryPusher['data'],
      enabled: doc.enabled ?? true,
      pushkeyTsMs: doc.ts ?? 0,
    };
    const list = byUser.get(doc.user_id);
    if (list === undefined) byUser.set(doc.user_id, [pusher]);
    else list.push(pusher);
  }
  return byUser;
}

/** A room message, as a homeserver would hand it over after `evaluate`. */
export function benchNotification(eventId: string): NotifyNotification {
  return {
    event_id: eventId,
    room_id: '!bench:bench.example.org',
    type: 'm.room.message',
    sender: '@sender:bench.example.org',
    sender_display_name: 'Sender',
    room_name: 'Bench',
    content: { msgtype: 'm.text', body: 'hello' },
  };
}

/** Each recipient as `.m.rule.message` notifies them, with an unread count. */
/** In the message's own (wire) type: the client takes them, and so does the worker's intake plan. */
export function benchRecipients(userIds: readonly string[]): NotifyRequestBody['recipients'] {
  return userIds.map((user_id) => ({ user_id, actions: ['notify'], counts: { unread: 1 } }));
}
