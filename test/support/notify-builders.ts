import type { DeliveryPusher } from '../../src/delivery/device-batches.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import type { NotifyNotification, NotifyRecipient, Pushed } from '../../src/delivery/notification-plan.js';
import { ALICE } from './builders.js';

export const GATEWAY_URL = 'https://push.example.org/_matrix/push/v1/notify';
export const OTHER_GATEWAY_URL = 'https://push.other.example/_matrix/push/v1/notify';

/** 2024-05-01T12:00:00.789Z: not a whole second, so that a rounding slip shows. */
export const PUSHKEY_TS_MS = 1_714_564_800_789;

/** A message event with every field the push gateway API knows. */
export function aNotification(overrides: Partial<NotifyNotification> = {}): NotifyNotification {
  return {
    event_id: '$event:example.org',
    room_id: '!room:example.org',
    type: 'm.room.message',
    sender: '@bob:example.org',
    sender_display_name: 'Bob',
    room_name: 'Team',
    room_alias: '#team:example.org',
    content: { msgtype: 'm.text', body: 'hi' },
    ...overrides,
  };
}

/** Alice, notified with a sound, and her counts. */
export function aRecipient(overrides: Partial<NotifyRecipient> = {}): NotifyRecipient {
  return {
    user_id: ALICE,
    actions: ['notify', { set_tweak: 'sound', value: 'default' }],
    counts: { unread: 3, missed_calls: 1 },
    user_is_target: false,
    ...overrides,
  };
}

/** An enabled HTTP pusher of Alice's, full format. */
export function aDeliveryPusher(overrides: Partial<DeliveryPusher> = {}): DeliveryPusher {
  return {
    user_id: ALICE,
    kind: 'http',
    app_id: 'org.example.app',
    pushkey: 'pushkey-1',
    data: { url: GATEWAY_URL },
    enabled: true,
    pushkeyTsMs: PUSHKEY_TS_MS,
    ...overrides,
  };
}

/** A plan for a pushed recipient (as planRecipient makes it for an event). */
export function aPushedPlan(overrides: Partial<Pushed> = {}): Pushed {
  return { pushed: true, countsOnly: false, prio: 'high', tweaks: { sound: 'default' }, ...overrides };
}

/** The object without the given keys: how a test says "absent" under exactOptionalPropertyTypes. */
export function without<T extends object, K extends keyof T & string>(value: T, ...keys: K[]): Omit<T, K> {
  const dropped = new Set<string>(keys);
  return Object.fromEntries(Object.entries(value).filter(([key]) => !dropped.has(key))) as Omit<T, K>;
}

/** A user's phone, an HTTP pusher to `GATEWAY_URL` as the store holds it; pushkey `<user>-phone`. */
export function aStoredPusher(userId: string, overrides: Partial<StoredPusher> = {}): StoredPusher {
  return {
    user_id: userId,
    kind: 'http',
    app_id: 'org.example.app',
    pushkey: `${userId}-phone`,
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: GATEWAY_URL },
    enabled: true,
    ...overrides,
  };
}
