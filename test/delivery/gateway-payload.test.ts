import { describe, expect, it } from 'vitest';
import type { DeliveryPusher, DeviceBatch } from '../../src/delivery/device-batches.js';
import { gatewayBodyEncoder, gatewayRequestBody } from '../../src/delivery/gateway-payload.js';
import type { NotifyNotification, NotifyRecipient } from '../../src/delivery/notification-plan.js';
import { ALICE } from '../support/builders.js';
import {
  aDeliveryPusher,
  aNotification,
  aPushedPlan,
  aRecipient,
  GATEWAY_URL,
  PUSHKEY_TS_MS,
  without,
} from '../support/notify-builders.js';

function aBatch(pushers: DeliveryPusher[] = [aDeliveryPusher()], format?: string): DeviceBatch {
  return { userId: ALICE, url: GATEWAY_URL, ...(format === undefined ? {} : { format }), pushers };
}

const body = (
  notification: NotifyNotification = aNotification(),
  recipient: NotifyRecipient = aRecipient(),
  batch: DeviceBatch = aBatch(),
) => gatewayRequestBody(notification, recipient, aPushedPlan(), batch);

const PUSHKEY_TS_S = 1_714_564_800;

describe('the full format', () => {
  it('sends every field of the notification, the recipient’s counts and user_is_target, and the devices', () => {
    expect(body()).toStrictEqual({
      notification: {
        event_id: '$event:example.org',
        room_id: '!room:example.org',
        type: 'm.room.message',
        sender: '@bob:example.org',
        sender_display_name: 'Bob',
        room_name: 'Team',
        room_alias: '#team:example.org',
        user_is_target: false,
        prio: 'high',
        content: { msgtype: 'm.text', body: 'hi' },
        counts: { unread: 3, missed_calls: 1 },
        devices: [
          {
            app_id: 'org.example.app',
            pushkey: 'pushkey-1',
            pushkey_ts: PUSHKEY_TS_S,
            data: {},
            tweaks: { sound: 'default' },
          },
        ],
      },
    });
  });

  it.each([
    'event_id',
    'room_id',
    'type',
    'sender',
    'sender_display_name',
    'room_name',
    'room_alias',
    'content',
  ] as const)('leaves %s out when the notification has none (never null)', (field) => {
    const sent = body(without(aNotification(), field)).notification;
    expect(sent).not.toHaveProperty(field);
    expect(Object.keys(sent)).toEqual(Object.keys(body().notification).filter((key) => key !== field));
  });

  it.each<[string, Partial<NotifyRecipient>, boolean | undefined]>([
    ['true', { user_is_target: true }, true],
    ['false', { user_is_target: false }, false],
  ])('passes user_is_target %s', (_name, fields, expected) => {
    expect(body(aNotification(), aRecipient(fields)).notification.user_is_target).toBe(expected);
  });

  it('leaves user_is_target out when the recipient has none', () => {
    expect(body(aNotification(), without(aRecipient(), 'user_is_target')).notification).not.toHaveProperty(
      'user_is_target',
    );
  });

  it('sends only the fields the push gateway API defines (unknown notify fields are ignored)', () => {
    const notification = { ...aNotification(), unsigned: { age: 1 } } as NotifyNotification;
    expect(body(notification).notification).not.toHaveProperty('unsigned');
  });

  it('sends the prio of the plan, not the one the notification was given', () => {
    const sent = gatewayRequestBody(
      aNotification({ prio: 'high' }),
      aRecipient(),
      aPushedPlan({ prio: 'low' }),
      aBatch(),
    );
    expect(sent.notification.prio).toBe('low');
  });

  it('sends a counts-only update with what it has and no event fields', () => {
    const badge = { room_id: '!room:example.org' };
    const plan = aPushedPlan({ countsOnly: true, prio: 'low', tweaks: {} });
    expect(gatewayRequestBody(badge, aRecipient({ counts: { unread: 0 } }), plan, aBatch())).toStrictEqual({
      notification: {
        room_id: '!room:example.org',
        user_is_target: false,
        prio: 'low',
        counts: { unread: 0 },
        devices: [{ app_id: 'org.example.app', pushkey: 'pushkey-1', pushkey_ts: PUSHKEY_TS_S, data: {}, tweaks: {} }],
      },
    });
  });

  it('survives JSON as it is: nothing undefined, nothing null', () => {
    const sent = body(without(aNotification(), 'room_alias', 'content'), without(aRecipient(), 'user_is_target'));
    expect(JSON.parse(JSON.stringify(sent))).toStrictEqual(sent);
    expect(JSON.stringify(sent)).not.toContain('null');
  });
});

describe('the event_id_only format', () => {
  it('sends only event_id, room_id, counts, prio and devices', () => {
    const pusher = aDeliveryPusher({ data: { url: GATEWAY_URL, format: 'event_id_only' } });
    expect(
      body(aNotification(), aRecipient({ user_is_target: true }), aBatch([pusher], 'event_id_only')),
    ).toStrictEqual({
      notification: {
        event_id: '$event:example.org',
        room_id: '!room:example.org',
        counts: { unread: 3, missed_calls: 1 },
        prio: 'high',
        devices: [
          {
            app_id: 'org.example.app',
            pushkey: 'pushkey-1',
            pushkey_ts: PUSHKEY_TS_S,
            data: { format: 'event_id_only' },
            tweaks: { sound: 'default' },
          },
        ],
      },
    });
  });

  it.each<[string, NotifyNotification, NotifyRecipient, string[]]>([
    [
      'no event_id (a badge update)',
      without(aNotification(), 'event_id'),
      aRecipient(),
      ['room_id', 'counts', 'prio', 'devices'],
    ],
    ['no room_id', without(aNotification(), 'room_id'), aRecipient(), ['event_id', 'counts', 'prio', 'devices']],
    ['no counts', aNotification(), without(aRecipient(), 'counts'), ['event_id', 'room_id', 'prio', 'devices']],
  ])('leaves out what is absent: %s', (_name, notification, recipient, keys) => {
    expect(
      Object.keys(body(notification, recipient, aBatch([aDeliveryPusher()], 'event_id_only')).notification),
    ).toEqual(keys);
  });

  it.each(['EVENT_ID_ONLY', 'event_id_only ', 'full', 'org.example.custom'])(
    'is only that exact word: %j sends the full format',
    (format) => {
      expect(body(aNotification(), aRecipient(), aBatch([aDeliveryPusher()], format)).notification).toHaveProperty(
        'content',
      );
    },
  );
});

describe('counts', () => {
  it.each<[string, NonNullable<NotifyRecipient['counts']>, Record<string, number>]>([
    ['both', { unread: 3, missed_calls: 1 }, { unread: 3, missed_calls: 1 }],
    ['both zero (a cleared badge)', { unread: 0, missed_calls: 0 }, { unread: 0, missed_calls: 0 }],
    ['unread zero only', { unread: 0 }, { unread: 0 }],
    ['missed_calls zero only', { missed_calls: 0 }, { missed_calls: 0 }],
    ['empty, as given', {}, {}],
    ['unknown keys dropped', { unread: 2, badge: 9 } as NonNullable<NotifyRecipient['counts']>, { unread: 2 }],
  ])('%s', (_name, counts, expected) => {
    expect(body(aNotification(), aRecipient({ counts })).notification.counts).toStrictEqual(expected);
  });

  it('are left out when the recipient has none', () => {
    expect(body(aNotification(), without(aRecipient(), 'counts')).notification).not.toHaveProperty('counts');
  });
});

describe('devices', () => {
  it.each<[string, DeliveryPusher['data'], Record<string, unknown>, string[]]>([
    ['url only: empty data', { url: GATEWAY_URL }, {}, []],
    ['format kept', { url: GATEWAY_URL, format: 'event_id_only' }, { format: 'event_id_only' }, ['format']],
    [
      'every other key kept, in order, url removed wherever it was',
      { brand: 'x', url: GATEWAY_URL, default_payload: { aps: { 'mutable-content': 1 } }, format: 'f' },
      { brand: 'x', default_payload: { aps: { 'mutable-content': 1 } }, format: 'f' },
      ['brand', 'default_payload', 'format'],
    ],
  ])('data: %s', (_name, data, expected, keys) => {
    const [sent] = body(aNotification(), aRecipient(), aBatch([aDeliveryPusher({ data })])).notification.devices;
    expect(sent?.data).toStrictEqual(expected);
    expect(Object.keys(sent?.data ?? {})).toEqual(keys);
  });

  it('leaves the stored data untouched', () => {
    const data = { url: GATEWAY_URL, format: 'f' };
    body(aNotification(), aRecipient(), aBatch([aDeliveryPusher({ data })]));
    expect(data).toStrictEqual({ url: GATEWAY_URL, format: 'f' });
  });

  it.each([
    [0, 0],
    [999, 0],
    [1000, 1],
    [1999, 1],
    [PUSHKEY_TS_MS, PUSHKEY_TS_S],
  ])('pushkey_ts of a pusher set at %i ms is %i s', (ms, seconds) => {
    const [sent] = body(aNotification(), aRecipient(), aBatch([aDeliveryPusher({ pushkeyTsMs: ms })])).notification
      .devices;
    expect(sent?.pushkey_ts).toBe(seconds);
  });

  it('one per pusher of the batch, in order, each with its own app and key and the recipient’s tweaks', () => {
    const pushers = [
      aDeliveryPusher({ app_id: 'a', pushkey: 'k1', pushkeyTsMs: 1000 }),
      aDeliveryPusher({ app_id: 'b', pushkey: 'k2', pushkeyTsMs: 2000, data: { url: GATEWAY_URL, x: 1 } }),
      aDeliveryPusher({ app_id: 'a', pushkey: 'k3', pushkeyTsMs: 3000 }),
    ];
    const plan = aPushedPlan({ tweaks: { sound: 'ring', highlight: true } });
    expect(gatewayRequestBody(aNotification(), aRecipient(), plan, aBatch(pushers)).notification.devices).toStrictEqual(
      [
        { app_id: 'a', pushkey: 'k1', pushkey_ts: 1, data: {}, tweaks: { sound: 'ring', highlight: true } },
        { app_id: 'b', pushkey: 'k2', pushkey_ts: 2, data: { x: 1 }, tweaks: { sound: 'ring', highlight: true } },
        { app_id: 'a', pushkey: 'k3', pushkey_ts: 3, data: {}, tweaks: { sound: 'ring', highlight: true } },
      ],
    );
  });
});

describe('the body as sent: encoded once per notification, each request adding its own fields', () => {
  const twoDevices = aBatch([
    aDeliveryPusher(),
    aDeliveryPusher({ pushkey: 'tablet', data: { url: GATEWAY_URL, x: 1 } }),
  ]);
  it.each<[string, NotifyNotification, NotifyRecipient, DeviceBatch]>([
    ['every field', aNotification(), aRecipient(), aBatch()],
    ['no user_is_target, two devices', aNotification(), without(aRecipient(), 'user_is_target'), twoDevices],
    ['no counts', aNotification(), without(aRecipient(), 'counts'), aBatch()],
    ['no content', without(aNotification(), 'content'), aRecipient(), aBatch()],
    ['a counts-only update', without(aNotification(), 'event_id'), aRecipient({ actions: [] }), aBatch()],
    ['event_id_only', aNotification(), aRecipient(), aBatch([aDeliveryPusher()], 'event_id_only')],
    ['nothing but the devices', {}, { user_id: ALICE, actions: ['notify'] }, aBatch()],
  ])('%s: the very text of JSON.stringify(gatewayRequestBody(…))', (_case, notification, recipient, batch) => {
    const plan = aPushedPlan();
    expect(gatewayBodyEncoder(notification)(recipient, plan, batch)).toBe(
      JSON.stringify(gatewayRequestBody(notification, recipient, plan, batch)),
    );
  });
});
