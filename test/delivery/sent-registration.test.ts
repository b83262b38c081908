import { describe, expect, it } from 'vitest';
import { sentRegistration } from '../../src/delivery/sent-registration.js';

const URL = 'https://push.example.org/_matrix/push/v1/notify';
const DEVICE = { appId: 'org.example.app', pushkey: 'phone' };
const ACCEPTED_AT = 1_800_000_000_000;
const bodyWith = (devices: unknown) => JSON.stringify({ notification: { event_id: '$e', devices } });

describe('sentRegistration: the registration a rejected request was sent for', () => {
  it.each<[string, string, number]>([
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
    ['a body without a notification: when the notify was accepted', 'null', ACCEPTED_AT],
  ])('%s', (_case, bodyJson, setAtMost) => {
    expect(sentRegistration({ userId: '@a:x.org', url: URL, bodyJson, acceptedAt: ACCEPTED_AT }, DEVICE)).toEqual({
      userId: '@a:x.org',
      appId: 'org.example.app',
      pushkey: 'phone',
      url: URL,
      setAtMost,
    });
  });
});
