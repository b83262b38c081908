import { describe, expect, it } from 'vitest';
import { mapPushers, type PusherSkipReason } from '../../src/import/map-pushers.js';
import type { SynapsePusherRow } from '../../src/import/synapse-rows.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import { ALICE } from '../support/builders.js';
import { aPusherRow } from '../support/synapse-rows.js';

const STRICT = { allowInsecureGateways: false };
const URL = 'https://push.example.org/_matrix/push/v1/notify';

const EXPECTED: StoredPusher = {
  user_id: ALICE,
  pushkey: 'pushkey-1',
  kind: 'http',
  app_id: 'org.example.app',
  app_display_name: 'Example',
  device_display_name: 'Phone',
  profile_tag: '',
  lang: 'en',
  data: { url: URL, format: 'event_id_only' },
  enabled: true,
  device_id: 'DEVICE1',
};

function mapOne(row: SynapsePusherRow, policy = STRICT) {
  return mapPushers([row], policy);
}

describe('mapPushers: rows that are imported', () => {
  it('maps every column of an HTTP pusher, and returns ts beside it', () => {
    expect(mapOne(aPusherRow())).toEqual({
      pushers: [{ pusher: EXPECTED, pushkeyTs: 1_700_000_000_000, langWasNull: false }],
      skipped: [],
    });
  });

  it.each([
    ['1', 1, true],
    ['0', 0, false],
    ['true', true, true],
    ['false', false, false],
    ['NULL (Synapse reads it as enabled)', null, true],
    ['no column (before Synapse 1.69)', undefined, true],
  ] as const)('enabled %s', (_name, enabled, expected) => {
    expect(mapOne(aPusherRow({ enabled })).pushers[0]?.pusher.enabled).toBe(expected);
  });

  it.each([
    ['a number', 1_700_000_000_000],
    ['a string (node-postgres bigint)', '1700000000000'],
    ['a bigint', 1_700_000_000_000n],
  ] as const)('reads ts given as %s', (_name, ts) => {
    expect(mapOne(aPusherRow({ ts })).pushers[0]?.pushkeyTs).toBe(1_700_000_000_000);
  });

  it.each([
    ['an HTTP pusher without a device', aPusherRow({ device_id: null }), { ...withoutDevice(EXPECTED) }],
    [
      'an e-mail pusher (the account\u2019s, never a device\u2019s)',
      aPusherRow({ kind: 'email', pushkey: 'alice@example.org', data: '{}', device_id: 'DEVICE1' }),
      { ...withoutDevice(EXPECTED), kind: 'email', pushkey: 'alice@example.org', data: {} },
    ],
    ['a profile tag', aPusherRow({ profile_tag: 'work' }), { ...EXPECTED, profile_tag: 'work' }],
    [
      'data with custom keys, in their order',
      aPusherRow({ data: `{"z":1,"url":"${URL}","default_payload":{"aps":{}}}` }),
      { ...EXPECTED, data: { z: 1, url: URL, default_payload: { aps: {} } } },
    ],
  ] as const)('%s', (_name, row, expected) => {
    const { pushers, skipped } = mapOne(row);
    expect(skipped).toEqual([]);
    expect(pushers[0]?.pusher).toEqual(expected);
    expect(JSON.stringify(pushers[0]?.pusher.data)).toBe(JSON.stringify(expected.data));
  });

  it('stores a NULL lang as "" and says so', () => {
    expect(mapOne(aPusherRow({ lang: null })).pushers).toEqual([
      { pusher: { ...EXPECTED, lang: '' }, pushkeyTs: 1_700_000_000_000, langWasNull: true },
    ]);
  });

  it('accepts an http:// gateway when the policy does', () => {
    const row = aPusherRow({ data: '{"url":"http://push.example.org/_matrix/push/v1/notify"}' });
    expect(mapOne(row, { allowInsecureGateways: true }).skipped).toEqual([]);
  });
});

describe('mapPushers: rows that are skipped, with their reason', () => {
  it.each([
    ['NULL data', aPusherRow({ data: null }), 'unparsable-json'],
    ['data that is not JSON', aPusherRow({ data: '{"url":' }), 'unparsable-json'],
    ['data with a prototype key', aPusherRow({ data: `{"url":"${URL}","__proto__":{}}` }), 'unparsable-json'],
    ['data that is not an object', aPusherRow({ data: '[]' }), 'invalid-pusher'],
    ['an unknown kind', aPusherRow({ kind: 'sms' }), 'invalid-pusher'],
    ['an HTTP pusher without a URL', aPusherRow({ data: '{}' }), 'invalid-pusher'],
    [
      'an http:// gateway',
      aPusherRow({ data: '{"url":"http://push.example.org/_matrix/push/v1/notify"}' }),
      'invalid-pusher',
    ],
    [
      'a gateway URL with another path',
      aPusherRow({ data: '{"url":"https://push.example.org/push"}' }),
      'invalid-pusher',
    ],
    ['a pushkey over 512 bytes', aPusherRow({ pushkey: 'k'.repeat(513) }), 'invalid-pusher'],
    ['an app ID over 64 characters', aPusherRow({ app_id: 'a'.repeat(65) }), 'invalid-pusher'],
    ['a ts that is not a number', aPusherRow({ ts: 'soon' }), 'invalid-timestamp'],
    ['a negative ts', aPusherRow({ ts: -1 }), 'invalid-timestamp'],
  ] as const satisfies readonly (readonly [string, SynapsePusherRow, PusherSkipReason])[])(
    '%s',
    (_name, row, reason) => {
      const { pushers, skipped } = mapOne(row);
      expect(pushers).toEqual([]);
      expect(skipped).toEqual([
        { userId: ALICE, appId: row.app_id, pushkey: row.pushkey, reason, detail: expect.any(String) as string },
      ]);
    },
  );

  it('imports the other rows', () => {
    const { pushers, skipped } = mapPushers([aPusherRow({ data: null }), aPusherRow({ pushkey: 'other' })], STRICT);
    expect(pushers.map((p) => p.pusher.pushkey)).toEqual(['other']);
    expect(skipped.map((s) => s.pushkey)).toEqual(['pushkey-1']);
  });
});

function withoutDevice({ device_id: _device, ...pusher }: StoredPusher): StoredPusher {
  return pusher;
}
