import { describe, expect, it } from 'vitest';
import { applyPusherSet } from '../../src/pushers/apply-pusher-set.js';
import type { PusherSetPlan } from '../../src/pushers/decide-pusher-set.js';
import { toWirePusher, type StoredPusher } from '../../src/pushers/pusher.js';
import { deletionSelects, type PusherDeletion } from '../../src/pushers/pusher-deletion.js';
import { ALICE } from '../support/builders.js';

const BOB = '@bob:example.org';

function aPusher(overrides: Partial<StoredPusher> = {}): StoredPusher {
  return {
    user_id: ALICE,
    kind: 'http',
    app_id: 'org.example.app',
    pushkey: 'key-1',
    app_display_name: 'Example',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
    enabled: true,
    ...overrides,
  };
}

function upsert(pusher: StoredPusher, removeFromOtherUsers = true): PusherSetPlan {
  const { user_id: userId, ...wire } = pusher;
  return {
    type: 'upsert',
    key: { userId, appId: pusher.app_id, pushkey: pusher.pushkey },
    pusher: wire,
    removeFromOtherUsers,
  };
}

describe('applying a pusher set', () => {
  it('creates a pusher that does not exist', () => {
    const outcome = applyPusherSet([], upsert(aPusher()));
    expect(outcome).toEqual({ pushers: [aPusher()], effect: 'created', removedFromOtherUsers: 0 });
  });

  it('updates the pusher with the same user, app_id and pushkey', () => {
    const updated = aPusher({ lang: 'de', data: { url: 'https://other.example.org/_matrix/push/v1/notify', x: 1 } });
    const outcome = applyPusherSet([aPusher()], upsert(updated));
    expect(outcome).toEqual({ pushers: [updated], effect: 'updated', removedFromOtherUsers: 0 });
  });

  it('leaves a pusher that already has exactly these values as it is', () => {
    const stored = aPusher({ profile_tag: 'p' });
    const outcome = applyPusherSet([stored], upsert(structuredClone(stored)));
    expect(outcome).toEqual({ pushers: [stored], effect: 'unchanged', removedFromOtherUsers: 0 });
    expect(outcome.pushers[0]).toBe(stored);
  });

  it("still removes other users' pushers when its own is unchanged (append: false)", () => {
    const bobs = aPusher({ user_id: BOB });
    const outcome = applyPusherSet([aPusher(), bobs], upsert(aPusher()));
    expect(outcome).toEqual({ pushers: [aPusher()], effect: 'unchanged', removedFromOtherUsers: 1 });
  });

  it('treats another app_id or pushkey as another pusher', () => {
    const other = aPusher({ app_id: 'org.example.other' });
    const outcome = applyPusherSet([other], upsert(aPusher()));
    expect(outcome.pushers).toEqual([other, aPusher()]);
    expect(outcome.effect).toBe('created');
  });

  it("append: false removes other users' pushers with the same app_id and pushkey", () => {
    const bobs = aPusher({ user_id: BOB });
    const bobsOther = aPusher({ user_id: BOB, pushkey: 'key-2' });
    const outcome = applyPusherSet([bobs, bobsOther], upsert(aPusher()));
    expect(outcome).toEqual({ pushers: [bobsOther, aPusher()], effect: 'created', removedFromOtherUsers: 1 });
  });

  it("append: true keeps other users' pushers", () => {
    const bobs = aPusher({ user_id: BOB });
    const outcome = applyPusherSet([bobs], upsert(aPusher(), false));
    expect(outcome.pushers).toEqual([bobs, aPusher()]);
  });

  it("deletes only the user's own pusher", () => {
    const bobs = aPusher({ user_id: BOB });
    const plan: PusherSetPlan = { type: 'delete', key: { userId: ALICE, appId: 'org.example.app', pushkey: 'key-1' } };
    expect(applyPusherSet([aPusher(), bobs], plan)).toEqual({
      pushers: [bobs],
      effect: 'deleted',
      removedFromOtherUsers: 0,
    });
  });

  it('deleting a pusher that does not exist succeeds and changes nothing', () => {
    const plan: PusherSetPlan = { type: 'delete', key: { userId: ALICE, appId: 'nope', pushkey: 'nope' } };
    expect(applyPusherSet([aPusher()], plan)).toEqual({
      pushers: [aPusher()],
      effect: 'unchanged',
      removedFromOtherUsers: 0,
    });
  });

  it('an update keeps the device the pusher was created by', () => {
    const stored = aPusher({ device_id: 'PHONE' });
    const fromLaptop = aPusher({ device_id: 'LAPTOP', enabled: false });
    const outcome = applyPusherSet([stored], upsert(fromLaptop));
    expect(outcome).toEqual({
      pushers: [aPusher({ device_id: 'PHONE', enabled: false })],
      effect: 'updated',
      removedFromOtherUsers: 0,
    });
  });

  it('an update from another device that changes nothing else is unchanged', () => {
    const stored = aPusher({ device_id: 'PHONE' });
    expect(applyPusherSet([stored], upsert(aPusher({ device_id: 'LAPTOP' }))).effect).toBe('unchanged');
  });

  it('a pusher of an unknown device takes the device of its next update; one without a device keeps it unknown', () => {
    expect(applyPusherSet([aPusher()], upsert(aPusher({ device_id: 'PHONE' })))).toMatchObject({
      pushers: [aPusher({ device_id: 'PHONE' })],
      effect: 'updated',
    });
    expect(applyPusherSet([aPusher()], upsert(aPusher()))).toMatchObject({ pushers: [aPusher()], effect: 'unchanged' });
  });

  it('a toggle of enabled alone is an update', () => {
    expect(applyPusherSet([aPusher()], upsert(aPusher({ enabled: false }))).effect).toBe('updated');
  });

  it('the wire form drops the owner and gives enabled and device_id under both names', () => {
    const { user_id: _owner, ...wire } = aPusher({ profile_tag: 't', device_id: 'PHONE', enabled: false });
    expect(toWirePusher(aPusher({ profile_tag: 't', device_id: 'PHONE', enabled: false }))).toEqual({
      ...wire,
      'org.matrix.msc3881.enabled': false,
      'org.matrix.msc3881.device_id': 'PHONE',
    });
  });

  it('the wire form never shows when the pusher was stored (ts)', () => {
    const wire = toWirePusher(aPusher({ profile_tag: 't', device_id: 'PHONE', ts: 1_700_000_000_000 }));
    expect(wire).not.toHaveProperty('ts');
    expect(wire).toEqual(toWirePusher(aPusher({ profile_tag: 't', device_id: 'PHONE' })));
  });

  it('a pusher that differs only in when it was stored (ts) is unchanged, and keeps its time', () => {
    const stored = aPusher({ ts: 1 });
    expect(applyPusherSet([stored], upsert(aPusher({ ts: 2 })))).toEqual({
      pushers: [stored],
      effect: 'unchanged',
      removedFromOtherUsers: 0,
    });
  });

  it('the wire form of an e-mail pusher has no device_id, even if one was stored (it belongs to the account)', () => {
    const wire = toWirePusher(aPusher({ kind: 'email', device_id: 'PHONE', data: {} }));
    expect(wire).not.toHaveProperty('device_id');
    expect(wire).not.toHaveProperty('org.matrix.msc3881.device_id');
  });

  it('the wire form of a pusher of an unknown device has no device_id under either name', () => {
    const wire = toWirePusher(aPusher());
    expect(wire).toMatchObject({ enabled: true, 'org.matrix.msc3881.enabled': true });
    expect(wire).not.toHaveProperty('device_id');
    expect(wire).not.toHaveProperty('org.matrix.msc3881.device_id');
  });
});

describe('which pushers a deletion selects', () => {
  const phone = aPusher({ pushkey: 'phone', device_id: 'PHONE' });
  const laptop = aPusher({ pushkey: 'laptop', device_id: 'LAPTOP' });
  const unknown = aPusher({ pushkey: 'legacy' });
  const email = aPusher({ kind: 'email', app_id: 'm.email', pushkey: 'alice@example.org', data: {} });
  const bobsPhone = aPusher({ user_id: BOB, pushkey: 'bob', device_id: 'PHONE' });
  const all = [phone, laptop, unknown, email, bobsPhone];
  const selected = (deletion: Omit<PusherDeletion, 'userId'>) =>
    all.filter((p) => deletionSelects({ userId: ALICE, ...deletion }, p)).map((p) => p.pushkey);

  it.each<[string, Omit<PusherDeletion, 'userId'>, string[]]>([
    [
      'the pushers of the given devices (logout)',
      { devices: { deviceIds: ['PHONE'] }, includeEmail: false },
      ['phone'],
    ],
    [
      'several devices',
      { devices: { deviceIds: ['PHONE', 'LAPTOP', 'GONE'] }, includeEmail: false },
      ['phone', 'laptop'],
    ],
    ['no devices', { devices: { deviceIds: [] }, includeEmail: false }, []],
    [
      'all but one device, unknown devices included (password change)',
      { devices: { exceptDeviceId: 'PHONE' }, includeEmail: false },
      ['laptop', 'legacy'],
    ],
    ['all (log out everywhere)', { devices: { all: true }, includeEmail: false }, ['phone', 'laptop', 'legacy']],
    [
      'e-mail too when asked (deactivation)',
      { devices: { all: true }, includeEmail: true },
      ['phone', 'laptop', 'legacy', 'alice@example.org'],
    ],
    [
      'not e-mail by device, even when asked: it has none',
      { devices: { deviceIds: ['PHONE'] }, includeEmail: true },
      ['phone'],
    ],
    [
      'e-mail with all but a device when asked',
      { devices: { exceptDeviceId: 'LAPTOP' }, includeEmail: true },
      ['phone', 'legacy', 'alice@example.org'],
    ],
  ])('%s', (_case, deletion, pushkeys) => {
    expect(selected(deletion)).toEqual(pushkeys);
  });
});
