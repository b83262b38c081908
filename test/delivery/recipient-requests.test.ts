import { describe, expect, it } from 'vitest';
import type { DeliveryPusher } from '../../src/delivery/device-batches.js';
import type { NotifyNotification, NotifyRecipient } from '../../src/delivery/notification-plan.js';
import { planRecipientRequests } from '../../src/delivery/recipient-requests.js';
import {
  aDeliveryPusher,
  aNotification,
  aRecipient,
  GATEWAY_URL,
  OTHER_GATEWAY_URL,
  without,
} from '../support/notify-builders.js';

const PHONE = aDeliveryPusher({ pushkey: 'phone' });
const TABLET = aDeliveryPusher({ pushkey: 'tablet' });
const LAPTOP = aDeliveryPusher({ pushkey: 'laptop', data: { url: OTHER_GATEWAY_URL, format: 'event_id_only' } });
const MAIL = aDeliveryPusher({ kind: 'email', app_id: 'm.email', pushkey: 'alice@example.org', data: {} });
const BOBS_PHONE = aDeliveryPusher({ user_id: '@bob:example.org', pushkey: 'bobs-phone' });
const ALL = [PHONE, MAIL, TABLET, LAPTOP, BOBS_PHONE];

/** Each request as `url: pushkeys (prio, tweaks)`, and the e-mail pushers' pushkeys. */
function summary(notification: NotifyNotification, recipient: NotifyRecipient, pushers: readonly DeliveryPusher[]) {
  const { requests, emailPushers } = planRecipientRequests(notification, recipient, pushers);
  return {
    requests: requests.map(({ batch, body }) => {
      const keys = body.pushers.map((p) => p.pushkey).join(',');
      return `${batch.url}: ${keys} (${body.prio}, ${JSON.stringify(body.tweaks)})`;
    }),
    email: emailPushers.map((p) => p.pushkey),
  };
}

describe('what one recipient is sent', () => {
  it.each<[string, NotifyNotification, NotifyRecipient, string[], string[]]>([
    [
      'a pushed event: one request per gateway and format, Bob’s pusher ignored, e-mail handed back',
      aNotification(),
      aRecipient(),
      [
        `${GATEWAY_URL}: phone,tablet (high, {"sound":"default"})`,
        `${OTHER_GATEWAY_URL}: laptop (high, {"sound":"default"})`,
      ],
      ['alice@example.org'],
    ],
    [
      'an event not pushed: nothing, not even e-mail',
      aNotification(),
      aRecipient({ actions: ['dont_notify'] }),
      [],
      [],
    ],
    [
      'a counts-only update: every HTTP device, low, no tweaks, no e-mail',
      without(aNotification(), 'event_id'),
      aRecipient({ actions: [] }),
      [`${GATEWAY_URL}: phone,tablet (low, {})`, `${OTHER_GATEWAY_URL}: laptop (low, {})`],
      [],
    ],
  ])('%s', (_name, notification, recipient, requests, email) => {
    expect(summary(notification, recipient, ALL)).toEqual({ requests, email });
  });

  it('carries the batch, so that a rejected pushkey names its pusher', () => {
    const [request] = planRecipientRequests(aNotification(), aRecipient(), [PHONE, TABLET]).requests;
    expect(request?.batch.pushers).toEqual([PHONE, TABLET]);
    expect(request?.body.counts).toEqual({ unread: 3, missed_calls: 1 });
  });

  it('sends nothing to a recipient with no enabled HTTP pusher', () => {
    const disabled = aDeliveryPusher({ enabled: false });
    expect(planRecipientRequests(aNotification(), aRecipient(), [disabled, MAIL]).requests).toEqual([]);
  });
});
