import { describe, expect, it } from 'vitest';
import { recheckDevices, type RecheckVerdict } from '../../src/delivery/pusher-recheck.js';
import { ALICE } from '../support/builders.js';
import { aStoredPusher, GATEWAY_URL, OTHER_GATEWAY_URL } from '../support/notify-builders.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import { bodyText } from '../../src/delivery/request-body.js';

const APP = 'org.example.app';
const REQUEST = {
  url: GATEWAY_URL,
  body: JSON.stringify({
    notification: {
      event_id: '$e',
      devices: [
        { app_id: APP, pushkey: 'phone', pushkey_ts: 1, data: {}, tweaks: {} },
        { app_id: APP, pushkey: 'tablet', pushkey_ts: 1, data: {}, tweaks: {} },
      ],
    },
  }),
  devices: [
    { appId: APP, pushkey: 'phone' },
    { appId: APP, pushkey: 'tablet' },
  ],
};

const aPusher = (overrides: Partial<StoredPusher> = {}): StoredPusher =>
  aStoredPusher(ALICE, { app_id: APP, pushkey: 'phone', ...overrides });

const PHONE = aPusher();
const TABLET = aPusher({ pushkey: 'tablet' });

function pushkeysOf(verdict: RecheckVerdict): string[] | string {
  if (verdict.kind !== 'narrowed') return verdict.kind;
  const body = JSON.parse(bodyText(verdict.body)) as { notification: { devices: { pushkey: string }[] } };
  const sent = body.notification.devices.map((device) => device.pushkey);
  expect(verdict.devices.map((device) => device.pushkey)).toEqual(sent);
  return sent;
}

describe('a pending request checked against the pushers now', () => {
  it.each<[string, StoredPusher[], string[] | string]>([
    ['both pushers still there: sent as planned', [PHONE, TABLET], 'unchanged'],
    ['one logged out: sent to the other only', [TABLET], ['tablet']],
    ['one disabled', [PHONE, { ...TABLET, enabled: false }], ['phone']],
    ['one moved to another gateway', [PHONE, { ...TABLET, data: { url: OTHER_GATEWAY_URL } }], ['phone']],
    ['one turned into an e-mail pusher', [PHONE, { ...TABLET, kind: 'email' }], ['phone']],
    ['the same pushkey under another app', [PHONE, { ...TABLET, app_id: 'other.app' }], ['phone']],
    ['all gone: nothing is sent', [], 'none'],
  ])('%s', (_name, pushers, expected) => {
    expect(pushkeysOf(recheckDevices(REQUEST, pushers))).toEqual(expected);
  });
});
