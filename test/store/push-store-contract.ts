import { beforeEach, describe, expect, it } from 'vitest';
import type { PusherDeletion } from '../../src/pushers/pusher-deletion.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import type { PushStore } from '../../src/store/push-store.js';
import { aConditionalRule, aRuleset, overridesWithUserRules } from '../support/builders.js';

export interface StoreFixture {
  readonly store: PushStore;
  /** Puts a raw push-rules entry in place, bypassing the port. */
  readonly putRaw: (
    userId: string,
    entry: { contentJson?: string | number; defaultsRevision?: string },
  ) => Promise<void>;
}

let counter = 0;
const aUser = () => `@contract${Date.now()}x${(counter += 1)}:example.org`;

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
 * What every PushStore adapter must do. Run by the in-memory unit test and
 * by the MongoDB integration test with the same expectations.
 */
export interface FixtureOptions {
  readonly recordedWritesWindow?: number;
}

export function pushStoreContract(
  name: string,
  makeFixture: (options?: FixtureOptions) => Promise<StoreFixture>,
): void {
  describe(`PushStore contract: ${name}`, () => {
    let fixture: StoreFixture;
    let user: string;
    beforeEach(async () => {
      fixture = await makeFixture();
      user = aUser();
    });
    /** The user's pushers without `ts`, which the store sets (its own cases below). */
    const valuesOf = async (userId: string) =>
      (await fixture.store.listPushers(userId)).map(({ ts: _ts, ...values }) => values);

    it('reports a user with nothing stored as absent at version 0', async () => {
      expect(await fixture.store.loadPushRules(user)).toEqual({ version: 0, lookup: { found: false } });
    });

    it('saves a first ruleset at version 0 and reads it back exactly', async () => {
      const ruleset = aRuleset({
        override: overridesWithUserRules(
          aConditionalRule({ actions: ['notify', { set_tweak: 'x.y', value: { $k: 1 } }] }),
        ),
      });
      expect(await fixture.store.savePushRules(user, 0, ruleset, 'v1.19')).toEqual({ saved: true, version: 1 });
      expect(await fixture.store.loadPushRules(user)).toEqual({
        version: 1,
        lookup: { found: true, event: { content: { global: ruleset } }, defaultsRevision: 'v1.19' },
        storedChars: JSON.stringify({ global: ruleset }).length,
      });
    });

    it('refuses a save at a stale version and keeps the newer ruleset', async () => {
      const first = serverDefaultRuleset(user);
      const second = aRuleset({ room: [] });
      await fixture.store.savePushRules(user, 0, first, 'v1.19');
      expect(await fixture.store.savePushRules(user, 1, second, 'v1.19')).toEqual({ saved: true, version: 2 });
      expect(await fixture.store.savePushRules(user, 1, first, 'v1.19')).toEqual({ saved: false });
      expect(await fixture.store.savePushRules(user, 0, first, 'v1.19')).toEqual({ saved: false });
      const loaded = await fixture.store.loadPushRules(user);
      expect(loaded.version).toBe(2);
    });

    it('lets exactly one of two concurrent first writes win', async () => {
      const results = await Promise.all([
        fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19'),
        fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19'),
      ]);
      expect(results.filter((r) => r.saved)).toHaveLength(1);
    });

    it('inserts if absent only when there is no push-rules entry', async () => {
      expect(await fixture.store.insertPushRulesIfAbsent(user, aRuleset(), 'v1.19')).toEqual({
        saved: true,
        version: 1,
      });
      expect(await fixture.store.insertPushRulesIfAbsent(user, serverDefaultRuleset('@x:y'), 'v1.19')).toEqual({
        saved: false,
      });
      const loaded = await fixture.store.loadPushRules(user);
      expect(loaded.lookup).toMatchObject({ found: true, event: { content: { global: aRuleset() } } });
    });

    it('never overwrites a corrupt entry through insert-if-absent', async () => {
      await fixture.putRaw(user, { contentJson: '{not json', defaultsRevision: 'v1.19' });
      expect((await fixture.store.loadPushRules(user)).lookup).toEqual({ found: 'failed' });
      expect(await fixture.store.insertPushRulesIfAbsent(user, aRuleset(), 'v1.19')).toEqual({ saved: false });
      expect((await fixture.store.loadPushRules(user)).lookup).toEqual({ found: 'failed' });
    });

    it('reads an entry without content as an event without content', async () => {
      await fixture.putRaw(user, { defaultsRevision: 'v1.19' });
      expect((await fixture.store.loadPushRules(user)).lookup).toEqual({
        found: true,
        event: {},
        defaultsRevision: 'v1.19',
      });
    });

    it('loads many users at once: each stored entry with its version, corrupt ones as failed, users without one left out', async () => {
      const [stored, corrupt, pushersOnly, nobody] = [user, aUser(), aUser(), aUser()];
      const ruleset = aRuleset({ room: [] });
      await fixture.store.savePushRules(stored, 0, serverDefaultRuleset(stored), 'v1.19');
      await fixture.store.savePushRules(stored, 1, ruleset, 'v1.19');
      await fixture.putRaw(corrupt, { contentJson: '{not json', defaultsRevision: 'v1.19' });
      await fixture.store.bumpPushersVersion(pushersOnly);
      const loaded = await fixture.store.loadManyPushRules([stored, corrupt, pushersOnly, nobody]);
      expect([...loaded.keys()].sort()).toEqual([stored, corrupt].sort());
      expect(loaded.get(stored)).toEqual({
        version: 2,
        lookup: { found: true, event: { content: { global: ruleset } }, defaultsRevision: 'v1.19' },
      });
      expect(loaded.get(corrupt)?.lookup).toEqual({ found: 'failed' });
      expect((await fixture.store.loadManyPushRules([])).size).toBe(0);
    });

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
        [
          'one moved to another gateway since',
          { url: 'https://new-gateway.example.org/_matrix/push/v1/notify' },
          false,
        ],
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
        expect(await fixture.store.upsertPusher(aPusher(user, { device_id: 'LAPTOP', enabled: false }))).toBe(
          'updated',
        );
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

    describe('erasing user data', () => {
      const record = (messageId: string) => ({ messageId, replyJson: '{"ok":true,"body":{}}' });

      it('erases the push rules entry, keeps the versions growing and the recorded writes', async () => {
        await fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19', record('before'));
        await fixture.store.savePushRules(user, 1, aRuleset({ room: [] }), 'v1.19');
        await fixture.store.bumpPushersVersion(user);
        expect(
          await fixture.store.eraseUserData(user, 2, { pushRules: true, pushers: true, record: record('erase') }),
        ).toEqual({
          saved: true,
          version: 3,
          pushersVersion: 2,
        });
        expect(await fixture.store.loadPushRules(user, 'erase')).toEqual({
          version: 3,
          lookup: { found: false },
          recorded: record('erase'),
        });
        expect(await fixture.store.findRecordedWrite(user, 'before')).toMatchObject(record('before'));
        expect((await fixture.store.loadManyPushRules([user])).size).toBe(0);
        // Read as a new user's, stored again past every version announced before.
        expect(await fixture.store.insertPushRulesIfAbsent(user, aRuleset(), 'v1.19')).toEqual({
          saved: true,
          version: 4,
        });
        expect(await fixture.store.bumpPushersVersion(user)).toBe(3);
      });

      it('erases a corrupt entry too', async () => {
        await fixture.putRaw(user, { contentJson: '{not json', defaultsRevision: 'v1.19' });
        expect(await fixture.store.eraseUserData(user, 1, { pushRules: true, pushers: false })).toEqual({
          saved: true,
          version: 2,
          pushersVersion: 0,
        });
        expect(await fixture.store.loadPushRules(user)).toEqual({ version: 2, lookup: { found: false } });
      });

      it('refuses at a stale version and changes nothing', async () => {
        await fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19');
        expect(
          await fixture.store.eraseUserData(user, 0, { pushRules: true, pushers: true, record: record('x') }),
        ).toEqual({ saved: false });
        expect(
          await fixture.store.eraseUserData(user, 2, { pushRules: true, pushers: true, record: record('x') }),
        ).toEqual({ saved: false });
        expect(await fixture.store.loadPushRules(user, 'x')).toMatchObject({ version: 1, lookup: { found: true } });
        expect(await fixture.store.loadPushRules(user, 'x')).not.toHaveProperty('recorded');
        expect(await fixture.store.bumpPushersVersion(user)).toBe(1);
      });

      it('leaves the push rules alone when told to, bumping the pushers version and recording', async () => {
        await fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19');
        expect(
          await fixture.store.eraseUserData(user, 1, { pushRules: false, pushers: true, record: record('p') }),
        ).toEqual({
          saved: true,
          version: 1,
          pushersVersion: 1,
        });
        expect(await fixture.store.loadPushRules(user, 'p')).toMatchObject({
          version: 1,
          lookup: { found: true },
          recorded: record('p'),
        });
      });

      it('records for a user without any document, who still reads as new', async () => {
        expect(
          await fixture.store.eraseUserData(user, 0, { pushRules: false, pushers: false, record: record('n') }),
        ).toEqual({
          saved: true,
          version: 0,
          pushersVersion: 0,
        });
        expect(await fixture.store.loadPushRules(user, 'n')).toEqual({
          version: 0,
          lookup: { found: false },
          recorded: record('n'),
        });
        expect(await fixture.store.insertPushRulesIfAbsent(user, aRuleset(), 'v1.19')).toEqual({
          saved: true,
          version: 1,
        });
      });
    });

    it('bumps the pushers version without disturbing the push rules version', async () => {
      expect(await fixture.store.bumpPushersVersion(user)).toBe(1);
      expect(await fixture.store.bumpPushersVersion(user)).toBe(2);
      expect(await fixture.store.loadPushRules(user)).toEqual({ version: 0, lookup: { found: false } });
      expect(await fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19')).toEqual({ saved: true, version: 1 });
    });

    describe('recorded writes', () => {
      const record = (messageId: string) => ({ messageId, replyJson: `{"ok":true,"body":{"n":"${messageId}"}}` });

      it('records a write in the same compare-and-set save and finds it by messageId', async () => {
        await fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19', record('m1'));
        expect(await fixture.store.findRecordedWrite(user, 'm1')).toMatchObject(record('m1'));
        expect((await fixture.store.loadPushRules(user, 'm1')).recorded).toEqual(record('m1'));
        expect((await fixture.store.loadPushRules(user, 'm2')).recorded).toBeUndefined();
        expect(await fixture.store.loadPushRules(user)).not.toHaveProperty('recorded');
      });

      it('keeps whether the recorded write changed nothing', async () => {
        await fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19', record('c1'));
        expect(await fixture.store.findRecordedWrite(user, 'c1')).not.toHaveProperty('unchanged');
        const noop = { ...record('n1'), unchanged: true as const };
        await fixture.store.recordWrite(user, noop);
        expect(await fixture.store.findRecordedWrite(user, 'n1')).toMatchObject(noop);
        expect((await fixture.store.loadPushRules(user, 'n1')).recorded).toEqual(noop);
      });

      it('records nothing when the save loses the compare-and-set', async () => {
        await fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19');
        expect(await fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19', record('lost'))).toEqual({
          saved: false,
        });
        expect(await fixture.store.findRecordedWrite(user, 'lost')).toBeUndefined();
      });

      it('records alone at the pushers version stored, which it returns and leaves as it is', async () => {
        expect(await fixture.store.recordWrite(user, record('first'))).toBe(0);
        await fixture.store.bumpPushersVersion(user);
        expect(await fixture.store.recordWrite(user, record('second'))).toBe(1);
        expect(await fixture.store.findRecordedWrite(user, 'second')).toEqual({
          ...record('second'),
          pushersVersion: 1,
        });
      });

      it('records with a pushers version bump, or alone, and keeps writes of other users apart', async () => {
        await fixture.store.bumpPushersVersion(user, record('p1'));
        expect(await fixture.store.recordWrite(user, record('p2'))).toBe(1);
        expect(await fixture.store.findRecordedWrite(user, 'p1')).toMatchObject(record('p1'));
        expect(await fixture.store.findRecordedWrite(user, 'p2')).toMatchObject(record('p2'));
        expect(await fixture.store.findRecordedWrite(aUser(), 'p1')).toBeUndefined();
        // Found with the user's pushers version now (what a replay of a pusher change announces).
        expect((await fixture.store.findRecordedWrite(user, 'p1'))?.pushersVersion).toBe(1);
        await fixture.store.bumpPushersVersion(user, record('p3'));
        expect(await fixture.store.findRecordedWrite(user, 'p3')).toEqual({ ...record('p3'), pushersVersion: 2 });
        expect(await fixture.store.findRecordedWrite(user, 'p1')).toEqual({ ...record('p1'), pushersVersion: 2 });
        // Recording never touches the push rules or their version.
        expect(await fixture.store.loadPushRules(user)).toEqual({ version: 0, lookup: { found: false } });
      });

      it('records at the current version without touching the push rules or their version', async () => {
        await fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19');
        const before = await fixture.store.loadPushRules(user);
        expect(await fixture.store.recordWriteAtVersion(user, 1, record('same'))).toBe(true);
        expect(await fixture.store.loadPushRules(user, 'same')).toEqual({ ...before, recorded: record('same') });
      });

      it('refuses to record at a stale version, or where there is no document', async () => {
        await fixture.store.savePushRules(user, 0, aRuleset(), 'v1.19');
        await fixture.store.savePushRules(user, 1, aRuleset({ room: [] }), 'v1.19');
        expect(await fixture.store.recordWriteAtVersion(user, 1, record('stale'))).toBe(false);
        expect(await fixture.store.recordWriteAtVersion(user, 0, record('stale'))).toBe(false);
        expect(await fixture.store.findRecordedWrite(user, 'stale')).toBeUndefined();
        expect((await fixture.store.loadPushRules(user)).version).toBe(2);
        const nobody = aUser();
        expect(await fixture.store.recordWriteAtVersion(nobody, 0, record('none'))).toBe(false);
        expect(await fixture.store.findRecordedWrite(nobody, 'none')).toBeUndefined();
      });

      it('records at version 0 on a document that has no push-rules version yet', async () => {
        await fixture.store.bumpPushersVersion(user);
        expect(await fixture.store.recordWriteAtVersion(user, 0, record('v0'))).toBe(true);
        expect(await fixture.store.findRecordedWrite(user, 'v0')).toMatchObject(record('v0'));
        expect(await fixture.store.loadPushRules(user)).toEqual({ version: 0, lookup: { found: false } });
      });

      it('keeps only the newest writes of the configured window', async () => {
        const small = (await makeFixture({ recordedWritesWindow: 3 })).store;
        await small.savePushRules(user, 0, aRuleset(), 'v1.19', record('w1'));
        await small.recordWrite(user, record('w2'));
        await small.savePushRules(user, 1, aRuleset(), 'v1.19', record('w3'));
        await small.bumpPushersVersion(user, record('w4'));
        expect(await small.findRecordedWrite(user, 'w1')).toBeUndefined();
        for (const id of ['w2', 'w3', 'w4']) expect(await small.findRecordedWrite(user, id)).toMatchObject(record(id));
        await small.recordWriteAtVersion(user, 2, record('w5'));
        expect(await small.findRecordedWrite(user, 'w2')).toBeUndefined();
        for (const id of ['w3', 'w4', 'w5']) expect(await small.findRecordedWrite(user, id)).toMatchObject(record(id));
      });
    });
  });
}
