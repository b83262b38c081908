import { describe, expect, it } from 'vitest';
import { gatewayBodyEncoder } from '../../src/delivery/gateway-payload.js';
import { plannedBody, type RequestBody } from '../../src/delivery/request-body.js';
import { sentRegistration } from '../../src/delivery/sent-registration.js';
import { aDeliveryPusher, aNotification, aPushedPlan, aRecipient } from '../support/notify-builders.js';

const URL = 'https://push.example.org/_matrix/push/v1/notify';
const DEVICE = { appId: 'org.example.app', pushkey: 'phone' };
const ACCEPTED_AT = 1_800_000_000_000;
const bodyWith = (devices: unknown) => JSON.stringify({ notification: { event_id: '$e', devices } });
/** A body planned here, not encoded yet: its pushers say what the text would. */
const planned = (pushkeyTsMs: number, pushkey = 'phone') =>
  plannedBody(gatewayBodyEncoder(aNotification()), aRecipient(), aPushedPlan(), {
    pushers: [aDeliveryPusher({ app_id: 'org.example.app', pushkey, pushkeyTsMs })],
  });

describe('sentRegistration: the registration a rejected request was sent for', () => {
  it.each<[string, RequestBody, number]>([
    [
      "the device's pushkey_ts (seconds), to the end of that second",
      bodyWith([
        { app_id: 'other.app', pushkey: 'phone', pushkey_ts: 1 },
        { app_id: 'org.example.app', pushkey: 'phone', pushkey_ts: 1_700_000_000 },
      ]),
      1_700_000_000_999,
    ],
    [
      'a pusher stored before its time was kept (pushkey_ts 0)',
      bodyWith([{ app_id: 'org.example.app', pushkey: 'phone', pushkey_ts: 0 }]),
      999,
    ],
    ['a body without the device: when the notify was accepted', bodyWith([]), ACCEPTED_AT],
    [
      'a device without pushkey_ts: when the notify was accepted',
      bodyWith([{ app_id: 'org.example.app', pushkey: 'phone' }]),
      ACCEPTED_AT,
    ],
    ['a body that is not JSON: when the notify was accepted', '{', ACCEPTED_AT],
    [
      "planned, not encoded: its pusher's time, to the end of that second",
      planned(1_700_000_000_500),
      1_700_000_000_999,
    ],
    ['planned, without the device: when the notify was accepted', planned(1_700_000_000_500, 'tablet'), ACCEPTED_AT],
    ['a body without a notification: when the notify was accepted', 'null', ACCEPTED_AT],
  ])('%s', (_case, body, setAtMost) => {
    expect(sentRegistration({ userId: '@a:x.org', url: URL, body, acceptedAt: ACCEPTED_AT }, DEVICE)).toEqual({
      userId: '@a:x.org',
      appId: 'org.example.app',
      pushkey: 'phone',
      url: URL,
      setAtMost,
    });
  });
});
