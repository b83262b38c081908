import { beforeEach, describe, expect, it } from 'vitest';
import type { PusherDeletion } from '../../src/pushers/pusher-deletion.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import { aUser, counter, type ContractCase, type StoreFixture } from './push-store-fixture.js';

function aPusher(userId: string, overrides: Partial<StoredPusher> = {}): StoredPusher {
  return {
    user_id: userId,
    kind: 'http',
    app_id: 'org.example.app',
    pushkey: 'key',
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: 'https://push.example.org/_matrix/push/v1/notify', 'org.example.$weird.key': [1, { a: null }] },
    enabled: true,
    ...overrides,
  };
}

/**
 * The pusher cases of the PushStore contract (push-store-contract.ts):
 * upserts and deletions, pushkey times, pushers of devices.
 */
export function pusherCases(current: () => ContractCase): void {
  let fixture: StoreFixture;
  let user: string;
  beforeEach(() => {
    ({ fixture, user } = current());
  });
  /** The user's pushers without `ts`, which the store sets (its own cases below). */
  const valuesOf = async (userId: string) =>
    (await fixture.store.listPushers(userId)).map(({ ts: _ts, ...values }) => values);

  it('creates, updates, lists and deletes pushers by (user, app_id, pushkey)', async () => {
    expect(await fixture.store.upsertPusher(aPusher(user))).toBe('created');
    expect(await fixture.store.upsertPusher(aPusher(user, { lang: 'de' }))).toBe('updated');
    expect(await fixture.store.upsertPusher(aPusher(user, { pushkey: 'other', profile_tag: 'p' }))).toBe('created');
    expect(await valuesOf(user)).toEqual([
      aPusher(user, { lang: 'de' }),
      aPusher(user, { pushkey: 'other', profile_tag: 'p' }),
    ]);
    expect(await fixture.store.deletePusher({ userId: user, appId: 'org.example.app', pushkey: 'key' })).toBe(true);
    expect(await fixture.store.deletePusher({ userId: user, appId: 'org.example.app', pushkey: 'key' })).toBe(false);
    expect(await valuesOf(user)).toEqual([aPusher(user, { pushkey: 'other', profile_tag: 'p' })]);
  });

  it('reports an upsert with exactly the stored values as unchanged, and leaves the pusher as it is', async () => {
    expect(await fixture.store.upsertPusher(aPusher(user))).toBe('created');
    expect(await fixture.store.upsertPusher(aPusher(user))).toBe('unchanged');
    expect(await fixture.store.upsertPusher(structuredClone(aPusher(user)))).toBe('unchanged');
    expect(await valuesOf(user)).toEqual([aPusher(user)]);
  });

  it.each<[string, Partial<StoredPusher>]>([
    ['kind', { kind: 'email' }],
    ['app_display_name', { app_display_name: 'Other' }],
    ['device_display_name', { device_display_name: 'Tablet' }],
    ['lang', { lang: 'de' }],
    ['a profile_tag added', { profile_tag: 'p' }],
    [
      'a data value',
      { data: { url: 'https://push.example.org/_matrix/push/v1/notify', 'org.example.$weird.key': [1, { a: 0 }] } },
    ],
    [
      'data keys in another order (data is kept as sent)',
      {
        data: { 'org.example.$weird.key': [1, { a: null }], url: 'https://push.example.org/_matrix/push/v1/notify' },
      },
    ],
  ])('reports an upsert that changes %s as updated, and a repeat of it as unchanged', async (_field, change) => {
    await fixture.store.upsertPusher(aPusher(user));
    expect(await fixture.store.upsertPusher(aPusher(user, change))).toBe('updated');
    expect(await fixture.store.upsertPusher(aPusher(user, change))).toBe('unchanged');
    expect(await valuesOf(user)).toEqual([aPusher(user, change)]);
  });

  it('treats a profile_tag removed as a change, and its absence on both sides as none', async () => {
    await fixture.store.upsertPusher(aPusher(user, { profile_tag: 'p' }));
    expect(await fixture.store.upsertPusher(aPusher(user, { profile_tag: 'p' }))).toBe('unchanged');
    expect(await fixture.store.upsertPusher(aPusher(user))).toBe('updated');
    expect(await fixture.store.upsertPusher(aPusher(user))).toBe('unchanged');
  });

  it('an update without profile_tag removes the old one', async () => {
    await fixture.store.upsertPusher(aPusher(user, { profile_tag: 'p' }));
    await fixture.store.upsertPusher(aPusher(user));
    expect(await valuesOf(user)).toEqual([aPusher(user)]);
  });

  it("deletes other users' pushers with the same app_id and pushkey only", async () => {
    const other = aUser();
    // The store is shared between tests: a key of this test's own.
    const appId = `app.${counter}`;
    await fixture.store.upsertPusher(aPusher(user, { app_id: appId }));
    await fixture.store.upsertPusher(aPusher(other, { app_id: appId }));
    await fixture.store.upsertPusher(aPusher(other, { app_id: appId, pushkey: 'different' }));
    expect(await fixture.store.deletePushersOfOtherUsers({ userId: user, appId, pushkey: 'key' })).toEqual([other]);
    expect(await fixture.store.listPushers(user)).toHaveLength(1);
    expect(await valuesOf(other)).toEqual([aPusher(other, { app_id: appId, pushkey: 'different' })]);
  });

  it('returns each other owner it removed a pusher from, once, and none when the writer alone holds it', async () => {
    const [second, third] = [aUser(), aUser()];
    const appId = `app.${counter}`;
    for (const owner of [second, user, third]) await fixture.store.upsertPusher(aPusher(owner, { app_id: appId }));
    const key = { userId: user, appId, pushkey: 'key' };
    expect([...(await fixture.store.deletePushersOfOtherUsers(key))].sort()).toEqual([second, third].sort());
    expect(await fixture.store.deletePushersOfOtherUsers(key)).toEqual([]);
    expect(await fixture.store.listPushers(second)).toEqual([]);
    expect(await fixture.store.listPushers(third)).toEqual([]);
  });

  describe('deleting the pusher a gateway rejected', () => {
    const REJECTED_URL = 'https://old-gateway.example.org/_matrix/push/v1/notify';
    const storedTs = async () => (await fixture.store.listPushers(user))[0]?.ts ?? 0;

    it.each<[string, { url?: string; setAtMost?: (ts: number) => number }, boolean]>([
      ['the registration the request was sent for', {}, true],
      ['one sent later than it was set (a pushkey_ts of an older second)', { setAtMost: (ts) => ts + 999 }, true],
      ['one moved to another gateway since', { url: 'https://new-gateway.example.org/_matrix/push/v1/notify' }, false],
      ['one registered again since the request was planned', { setAtMost: (ts) => ts - 1 }, false],
    ])('%s: deleted %s', async (_case, rejected, deleted) => {
      await fixture.store.upsertPusher(aPusher(user, { data: { url: REJECTED_URL } }));
      const ts = await storedTs();
      const registration = {
        userId: user,
        appId: 'org.example.app',
        pushkey: 'key',
        url: rejected.url ?? REJECTED_URL,
        setAtMost: rejected.setAtMost?.(ts) ?? ts,
      };
      expect(await fixture.store.deleteRejectedPusher(registration)).toBe(deleted);
      expect(await fixture.store.listPushers(user)).toHaveLength(deleted ? 0 : 1);
      if (deleted) expect(await fixture.store.deleteRejectedPusher(registration)).toBe(false);
    });

    it("never deletes another user's pusher, or another pushkey of the user", async () => {
      const other = aUser();
      await fixture.store.upsertPusher(aPusher(other, { data: { url: REJECTED_URL } }));
      await fixture.store.upsertPusher(aPusher(user, { pushkey: 'other-key', data: { url: REJECTED_URL } }));
      const now = Date.now() + 60_000;
      const rejected = { userId: user, appId: 'org.example.app', pushkey: 'key', url: REJECTED_URL, setAtMost: now };
      expect(await fixture.store.deleteRejectedPusher(rejected)).toBe(false);
      expect(await fixture.store.listPushers(other)).toHaveLength(1);
      expect(await fixture.store.listPushers(user)).toHaveLength(1);
    });
  });

  it("reads many users' pushers at once as each user's own read gives them", async () => {
    const other = aUser();
    const nobody = aUser();
    await fixture.store.upsertPusher(aPusher(user, { pushkey: 'zeta', app_id: 'b.app' }));
    await fixture.store.upsertPusher(aPusher(user, { pushkey: 'alpha', app_id: 'b.app' }));
    await fixture.store.upsertPusher(aPusher(user, { pushkey: 'omega', app_id: 'a.app' }));
    await fixture.store.upsertPusher(aPusher(other, { pushkey: 'other' }));
    const many = await fixture.store.listPushersOfUsers([user, nobody, other]);
    expect([...many.keys()]).toEqual([user, nobody, other]);
    expect(many.get(user)).toEqual(await fixture.store.listPushers(user));
    expect(many.get(user)).toHaveLength(3);
    expect(many.get(other)).toEqual(await fixture.store.listPushers(other));
    expect(many.get(nobody)).toEqual([]);
  });

  describe('when a pusher was created or last changed (ts, for pushkey_ts)', () => {
    const tsOf = async () => (await fixture.store.listPushers(user))[0]?.ts;
    /** The store's clock moves on between two writes. */
    const tick = async () => new Promise((resolve) => setTimeout(resolve, 3));

    it.each<[string, Partial<StoredPusher>, 'updated' | 'unchanged', boolean]>([
      ['the same values', {}, 'unchanged', false],
      ['the same values with a time of its own (the store’s to set)', { ts: 5 }, 'unchanged', false],
      ['a change', { lang: 'de' }, 'updated', true],
      ['a change with a time of its own', { lang: 'de', ts: 5 }, 'updated', true],
      ['the device of a pusher that had none', { device_id: 'PHONE' }, 'updated', true],
    ])('dates a new pusher; an upsert of %s is %s', async (_case, change, outcome, redated) => {
      const before = Date.now();
      expect(await fixture.store.upsertPusher(aPusher(user))).toBe('created');
      const created = await tsOf();
      expect(created).toBeGreaterThanOrEqual(before);
      expect(created).toBeLessThanOrEqual(Date.now());
      await tick();
      const beforeUpsert = Date.now();
      expect(await fixture.store.upsertPusher(aPusher(user, change))).toBe(outcome);
      const after = await tsOf();
      if (redated) expect(after).toBeGreaterThanOrEqual(beforeUpsert);
      else expect(after).toBe(created);
    });

    it('compares a pusher read back, time included, as unchanged', async () => {
      await fixture.store.upsertPusher(aPusher(user));
      const [read] = await fixture.store.listPushers(user);
      if (read === undefined) throw new Error('no pusher stored');
      expect(read.ts).toEqual(expect.any(Number));
      await tick();
      expect(await fixture.store.upsertPusher({ ...read, ts: (read.ts ?? 0) + 1_000 })).toBe('unchanged');
      expect(await fixture.store.listPushers(user)).toEqual([read]);
    });
  });

  describe('pushers of devices', () => {
    const key = (pushkey = 'key') => ({ userId: user, appId: 'org.example.app', pushkey });

    it('records the device of a new pusher, and enabled as given', async () => {
      await fixture.store.upsertPusher(aPusher(user, { device_id: 'PHONE', enabled: false }));
      expect(await valuesOf(user)).toEqual([aPusher(user, { device_id: 'PHONE', enabled: false })]);
    });

    it('keeps the device of a pusher updated from another device, and reports a change of other values only', async () => {
      await fixture.store.upsertPusher(aPusher(user, { device_id: 'PHONE' }));
      expect(await fixture.store.upsertPusher(aPusher(user, { device_id: 'LAPTOP', enabled: false }))).toBe('updated');
      expect(await valuesOf(user)).toEqual([aPusher(user, { device_id: 'PHONE', enabled: false })]);
      expect(await fixture.store.upsertPusher(aPusher(user, { device_id: 'LAPTOP', enabled: false }))).toBe(
        'unchanged',
      );
      expect(await fixture.store.upsertPusher(aPusher(user, { enabled: false }))).toBe('unchanged');
      expect(await valuesOf(user)).toEqual([aPusher(user, { device_id: 'PHONE', enabled: false })]);
    });

    it('gives a pusher of an unknown device the device of its next update that has one', async () => {
      expect(await fixture.store.upsertPusher(aPusher(user))).toBe('created');
      expect(await fixture.store.upsertPusher(aPusher(user, { lang: 'de' }))).toBe('updated');
      expect(await valuesOf(user)).toEqual([aPusher(user, { lang: 'de' })]);
      expect(await fixture.store.upsertPusher(aPusher(user, { lang: 'fr', device_id: 'PHONE' }))).toBe('updated');
      expect(await fixture.store.upsertPusher(aPusher(user, { lang: 'fr', device_id: 'LAPTOP' }))).toBe('unchanged');
      expect(await valuesOf(user)).toEqual([aPusher(user, { lang: 'fr', device_id: 'PHONE' })]);
    });

    async function seed(): Promise<string> {
      const other = aUser();
      await fixture.store.upsertPusher(aPusher(user, { pushkey: 'phone', device_id: 'PHONE' }));
      await fixture.store.upsertPusher(aPusher(user, { pushkey: 'phone-2', device_id: 'PHONE' }));
      await fixture.store.upsertPusher(aPusher(user, { pushkey: 'laptop', device_id: 'LAPTOP' }));
      await fixture.store.upsertPusher(aPusher(user, { pushkey: 'legacy' }));
      await fixture.store.upsertPusher(
        aPusher(user, { kind: 'email', app_id: 'm.email', pushkey: 'a@example.org', data: {} }),
      );
      await fixture.store.upsertPusher(aPusher(other, { pushkey: 'phone', device_id: 'PHONE' }));
      return other;
    }
    const pushkeys = async (userId: string) => (await fixture.store.listPushers(userId)).map((p) => p.pushkey).sort();

    it.each<[string, PusherDeletion['devices'], boolean, number, string[]]>([
      [
        'the pushers of some devices',
        { deviceIds: ['PHONE', 'GONE'] },
        false,
        2,
        ['a@example.org', 'laptop', 'legacy'],
      ],
      ['no devices', { deviceIds: [] }, false, 0, ['a@example.org', 'laptop', 'legacy', 'phone', 'phone-2']],
      [
        'all but one device, unknown ones included',
        { exceptDeviceId: 'LAPTOP' },
        false,
        3,
        ['a@example.org', 'laptop'],
      ],
      ['all but e-mail', { all: true }, false, 4, ['a@example.org']],
      ['all with e-mail', { all: true }, true, 5, []],
      [
        'some devices with e-mail (which has no device)',
        { deviceIds: ['PHONE'] },
        true,
        2,
        ['a@example.org', 'laptop', 'legacy'],
      ],
      ['all but one device with e-mail', { exceptDeviceId: 'LAPTOP' }, true, 4, ['laptop']],
    ])('deletes %s, and no other user’s', async (_case, devices, includeEmail, deleted, left) => {
      const other = await seed();
      expect(await fixture.store.deletePushers({ userId: user, devices, includeEmail })).toBe(deleted);
      expect(await pushkeys(user)).toEqual(left);
      expect(await pushkeys(other)).toEqual(['phone']);
      expect(await fixture.store.deletePushers({ userId: user, devices, includeEmail })).toBe(0);
    });

    it('deletes pushers of a user who has none: 0', async () => {
      expect(await fixture.store.deletePushers({ userId: user, devices: { all: true }, includeEmail: true })).toBe(0);
      expect(await fixture.store.deletePusher(key())).toBe(false);
    });
  });
}
