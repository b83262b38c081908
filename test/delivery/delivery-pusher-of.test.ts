import { describe, expect, it } from 'vitest';
import { deliveryPusherOf } from '../../src/delivery/delivery-pusher-of.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import { ALICE } from '../support/builders.js';

function aStoredPusher(overrides: Partial<StoredPusher> = {}): StoredPusher {
  return {
    user_id: ALICE,
    kind: 'http',
    app_id: 'org.example.app',
    pushkey: 'phone',
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
    enabled: true,
    ...overrides,
  };
}

describe('a stored pusher as delivery plans with it', () => {
  it.each<[string, Partial<StoredPusher>, number]>([
    ['carries when its pushkey was set', { ts: 1_700_000_000_000 }, 1_700_000_000_000],
    ['is sent pushkey_ts 0 when stored before the time was recorded', {}, 0],
  ])('%s', (_name, overrides, pushkeyTsMs) => {
    const stored = aStoredPusher(overrides);
    expect(deliveryPusherOf(stored)).toEqual({
      user_id: ALICE,
      kind: 'http',
      app_id: 'org.example.app',
      pushkey: 'phone',
      data: stored.data,
      enabled: true,
      pushkeyTsMs,
    });
  });

  it('is one object per stored pusher object: what the pusher cache hands every notify', () => {
    const stored = aStoredPusher();
    expect(deliveryPusherOf(stored)).toBe(deliveryPusherOf(stored));
  });

  it('is made afresh for a pusher read again (a change in the store is a new object)', () => {
    const before = deliveryPusherOf(aStoredPusher());
    const after = deliveryPusherOf(aStoredPusher({ enabled: false }));
    expect(after).not.toBe(before);
    expect(after.enabled).toBe(false);
  });
});
