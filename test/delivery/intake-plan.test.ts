import { describe, expect, it } from 'vitest';
import type { NotifyRequestBody } from '../../src/contract/ops.js';
import { deviceQueueKey } from '../../src/delivery/delivery-key.js';
import type { DeliveryPusher } from '../../src/delivery/device-batches.js';
import { notifyIdOf, planIntake, pushedUserIds } from '../../src/delivery/intake-plan.js';
import { ALICE } from '../support/builders.js';
import {
  aDeliveryPusher,
  aNotification,
  aRecipient,
  GATEWAY_URL,
  OTHER_GATEWAY_URL,
} from '../support/notify-builders.js';
import { bodyText } from '../../src/delivery/request-body.js';

const BOB = '@bob:example.org';
const CAROL = '@carol:example.org';
const STAMP = { notifyId: 'n1', partition: 7, seq: 42, acceptedAt: 1_000 };

function aRequest(overrides: Partial<NotifyRequestBody> = {}): NotifyRequestBody {
  return {
    op: 'notify',
    notification: aNotification(),
    recipients: [aRecipient(), aRecipient({ user_id: BOB }), aRecipient({ user_id: CAROL, actions: ['dont_notify'] })],
    ...overrides,
  };
}

const PUSHERS: Record<string, DeliveryPusher[]> = {
  [ALICE]: [
    aDeliveryPusher({ pushkey: 'phone' }),
    aDeliveryPusher({ pushkey: 'tablet' }),
    aDeliveryPusher({ pushkey: 'laptop', data: { url: OTHER_GATEWAY_URL } }),
    aDeliveryPusher({ kind: 'email', app_id: 'm.email', pushkey: 'alice@example.org', data: {} }),
  ],
  [BOB]: [],
  [CAROL]: [aDeliveryPusher({ user_id: CAROL, pushkey: 'carols' })],
};
const pushersOf = (userId: string) => PUSHERS[userId] ?? [];

describe('the intake of one notify message', () => {
  it('reads the pushers only of recipients who are pushed', () => {
    expect(pushedUserIds(aRequest())).toEqual([ALICE, BOB]);
  });

  it('plans one request per device queue, with IDs and keys derived from the message and recipient', () => {
    const plan = planIntake(aRequest(), pushersOf, STAMP);
    expect(
      plan.deliveries.map(({ id, key, seq, userId, url, devices, acceptedAt }) => ({
        id,
        key,
        seq,
        userId,
        url,
        devices,
        acceptedAt,
      })),
    ).toEqual([
      {
        id: expect.stringMatching(/^n1\/[\w-]{22}$/) as string,
        key: deviceQueueKey(ALICE, GATEWAY_URL, undefined),
        seq: 42,
        userId: ALICE,
        url: GATEWAY_URL,
        devices: [
          { appId: 'org.example.app', pushkey: 'phone' },
          { appId: 'org.example.app', pushkey: 'tablet' },
        ],
        acceptedAt: 1_000,
      },
      {
        id: expect.stringMatching(/^n1\/[\w-]{22}$/) as string,
        key: deviceQueueKey(ALICE, OTHER_GATEWAY_URL, undefined),
        seq: 42,
        userId: ALICE,
        url: OTHER_GATEWAY_URL,
        devices: [{ appId: 'org.example.app', pushkey: 'laptop' }],
        acceptedAt: 1_000,
      },
    ]);
  });

  it.each<[string, NotifyRequestBody, { recipients: number; devices: number; emailPushers: number }]>([
    [
      'counts recipients with a device, devices, and e-mail pushers it will not mail',
      aRequest(),
      { recipients: 1, devices: 3, emailPushers: 1 },
    ],
    [
      'counts nothing for a message nobody is pushed for',
      aRequest({ recipients: [aRecipient({ user_id: CAROL, actions: [] })] }),
      { recipients: 0, devices: 0, emailPushers: 0 },
    ],
    [
      'sends a badge update (no event_id) to every device, and mails nobody',
      aRequest({ notification: { room_id: '!r:example.org' } }),
      { recipients: 2, devices: 4, emailPushers: 0 },
    ],
  ])('%s', (_name, request, counts) => {
    const { recipients, devices, emailPushers } = planIntake(request, pushersOf, STAMP);
    expect({ recipients, devices, emailPushers }).toEqual(counts);
  });

  it('stores the body exactly as the gateway gets it', () => {
    const [first] = planIntake(aRequest(), pushersOf, STAMP).deliveries;
    const body = JSON.parse(first === undefined ? 'null' : bodyText(first.body)) as {
      notification: { devices: { pushkey: string }[]; counts: unknown };
    };
    expect(body.notification.devices.map((device) => device.pushkey)).toEqual(['phone', 'tablet']);
    expect(body.notification.counts).toEqual({ unread: 3, missed_calls: 1 });
  });

  it('plans the same IDs for the same message again (a redelivery stores nothing twice)', () => {
    const ids = () => planIntake(aRequest(), pushersOf, STAMP).deliveries.map((d) => d.id);
    expect(ids()).toEqual(ids());
  });

  it('names a request by its device queue: a replan after a pusher change never gives one queue another queue’s ID', () => {
    const before = planIntake(aRequest(), pushersOf, STAMP).deliveries;
    // Alice's phone and tablet are gone: her laptop's request is now her first, Carol is pushed as before.
    const changed = (userId: string) =>
      userId === ALICE ? (PUSHERS[ALICE] ?? []).filter((pusher) => pusher.pushkey === 'laptop') : pushersOf(userId);
    const after = planIntake(aRequest(), changed, STAMP).deliveries;
    const idOf = (plan: typeof before) => new Map(plan.map((delivery) => [delivery.key, delivery.id]));
    for (const [key, id] of idOf(after)) expect(idOf(before).get(key)).toBe(id);
    expect(new Set(after.map((delivery) => delivery.id)).size).toBe(after.length);
    expect(after.every((delivery) => delivery.partition === 7)).toBe(true);
  });
});

describe('notifyIdOf', () => {
  it.each(['n1', 'amq.ctag-1/2/3', 'urn:uuid:0e1f/'])(
    'gives back %s from each request planned under it',
    (notifyId) => {
      const plan = planIntake(aRequest(), pushersOf, { ...STAMP, notifyId });
      expect(plan.deliveries.length).toBeGreaterThan(1);
      for (const delivery of plan.deliveries) expect(notifyIdOf(delivery.id)).toBe(notifyId);
    },
  );
});

describe('device queue keys', () => {
  it.each<[string, [string, string, string | undefined], [string, string, string | undefined]]>([
    ['another user', [ALICE, GATEWAY_URL, undefined], [BOB, GATEWAY_URL, undefined]],
    ['another URL', [ALICE, GATEWAY_URL, undefined], [ALICE, OTHER_GATEWAY_URL, undefined]],
    ['another format', [ALICE, GATEWAY_URL, undefined], [ALICE, GATEWAY_URL, 'event_id_only']],
    ['parts that would run together if joined', ['@a:b|c', 'https://x', undefined], ['@a:b', 'c|https://x', undefined]],
  ])('differ for %s', (_name, one, other) => {
    expect(deviceQueueKey(...one)).not.toBe(deviceQueueKey(...other));
  });
});
