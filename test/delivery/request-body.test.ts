import { describe, expect, it } from 'vitest';
import type { DeliveryPusher } from '../../src/delivery/device-batches.js';
import { gatewayBodyEncoder, gatewayRequestBody } from '../../src/delivery/gateway-payload.js';
import { planIntake } from '../../src/delivery/intake-plan.js';
import type { NotifyNotification, NotifyRecipient, Pushed } from '../../src/delivery/notification-plan.js';
import { bodyFor, bodyText, PlannedBody, plannedBody } from '../../src/delivery/request-body.js';
import { ALICE } from '../support/builders.js';
import {
  aDeliveryPusher,
  aNotification,
  aPushedPlan,
  aRecipient,
  GATEWAY_URL,
  without,
} from '../support/notify-builders.js';

const PHONE = aDeliveryPusher({ pushkey: 'phone' });
const TABLET = aDeliveryPusher({ pushkey: 'tablet', data: { url: GATEWAY_URL, custom: { nested: [1, null] } } });
const ID_ONLY = 'event_id_only';

describe('a planned body, encoded when sent', () => {
  it.each<[string, NotifyNotification, NotifyRecipient, Pushed, string | undefined, DeliveryPusher[]]>([
    ['the full format', aNotification(), aRecipient(), aPushedPlan(), undefined, [PHONE, TABLET]],
    ['event_id_only', aNotification(), aRecipient(), aPushedPlan(), ID_ONLY, [PHONE]],
    ['no counts, not the target', aNotification(), without(aRecipient(), 'counts'), aPushedPlan(), undefined, [PHONE]],
    ['a target', aNotification(), aRecipient({ user_is_target: true }), aPushedPlan(), undefined, [PHONE]],
    [
      'a badge update',
      without(aNotification(), 'event_id'),
      aRecipient({ counts: { unread: 0 } }),
      aPushedPlan({ prio: 'low', tweaks: {} }),
      undefined,
      [PHONE],
    ],
    [
      'content with keys of any kind',
      aNotification({ content: { $weird: { 'a.b': [1, null] }, __proto__x: 'y', body: 'é "quoted"' } }),
      aRecipient(),
      aPushedPlan({ tweaks: { sound: 'default', highlight: true } }),
      undefined,
      [PHONE],
    ],
  ])('%s: the same bytes as the body built at once', (_, notification, recipient, plan, format, pushers) => {
    const batch = { userId: ALICE, url: GATEWAY_URL, ...(format === undefined ? {} : { format }), pushers };
    expect(bodyText(plannedBody(gatewayBodyEncoder(notification), recipient, plan, batch))).toBe(
      JSON.stringify(gatewayRequestBody(notification, recipient, plan, batch)),
    );
  });

  it('is text as it is when taken from the store', () => {
    expect(bodyText('{"notification":{}}')).toBe('{"notification":{}}');
  });

  it('holds the notification of its notify, not a copy: every recipient shares one', () => {
    const pusherOf = (userId: string) => [aDeliveryPusher({ user_id: userId, pushkey: `${userId}-phone` })];
    const plan = planIntake(
      {
        op: 'notify',
        notification: aNotification(),
        recipients: [aRecipient({ user_id: ALICE }), aRecipient({ user_id: '@bob:example.org' })],
      },
      pusherOf,
      { notifyId: 'n1', partition: 0, seq: 1, acceptedAt: 0 },
    );
    const [first, second] = plan.deliveries.map((d) => d.body);
    expect(first).toBeInstanceOf(PlannedBody);
    expect(first instanceof PlannedBody && second instanceof PlannedBody && first.encode === second.encode).toBe(true);
  });
});

describe('a body narrowed to some of its devices', () => {
  const keepPhone = (device: { readonly pushkey: string }) => device.pushkey === 'phone';
  const planned = plannedBody(gatewayBodyEncoder(aNotification()), aRecipient(), aPushedPlan(), {
    pushers: [PHONE, TABLET],
  });
  const expected = bodyText(
    plannedBody(gatewayBodyEncoder(aNotification()), aRecipient(), aPushedPlan(), { pushers: [PHONE] }),
  );

  it.each([
    ['planned here: stays planned', planned, 'object'],
    ['from the store: parsed and encoded again', bodyText(planned), 'string'],
  ])('%s', (_, body, kind) => {
    const narrowed = bodyFor(body, keepPhone);
    expect(typeof narrowed).toBe(kind);
    expect(bodyText(narrowed)).toBe(expected);
  });
});
