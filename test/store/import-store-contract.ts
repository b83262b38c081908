import { describe, expect, it } from 'vitest';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import type { ImportStore, UserImport } from '../../src/store/import-store.js';
import type { PushStore } from '../../src/store/push-store.js';
import { aConditionalRule, aRuleset, overridesWithUserRules } from '../support/builders.js';

/** What the import cases need of a store fixture, beside the worker's port. */
export interface ImportFixture {
  readonly store: PushStore & ImportStore;
  /** Leaves the user as an import stopped between its claim and its pushers. */
  readonly markImportUnfinished: (userId: string) => Promise<void>;
}

let counter = 0;
const aUser = () => `@import${Date.now()}x${(counter += 1)}:example.org`;

function aPusher(userId: string, overrides: Partial<StoredPusher> = {}): StoredPusher {
  return {
    user_id: userId,
    kind: 'http',
    app_id: 'org.example.app',
    pushkey: 'key',
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
    enabled: true,
    ts: 1_700_000_000_123,
    ...overrides,
  };
}

function anImport(userId: string, overrides: Partial<UserImport> = {}): UserImport {
  return {
    userId,
    ruleset: aRuleset({ override: overridesWithUserRules(aConditionalRule({ rule_id: 'imported' })) }),
    defaultsRevision: 'v1.19',
    pushers: [
      aPusher(userId),
      aPusher(userId, { kind: 'email', app_id: 'm.email', pushkey: 'a@example.org', data: {}, enabled: false }),
    ],
    ...overrides,
  };
}

const WRITE = { overwrite: false };
const OVERWRITE = { overwrite: true };

/** The import cases of the store contract (`ImportStore`), for every adapter. */
export function importStoreContract(name: string, makeFixture: () => Promise<ImportFixture>): void {
  describe(`ImportStore contract: ${name}`, () => {
    it('imports new users whole: rules, pushers with their pushkey time, versions to announce', async () => {
      const { store } = await makeFixture();
      const [a, b] = [aUser(), aUser()];
      const outcomes = await store.importUsers([anImport(a), anImport(b, { pushers: [] })], WRITE);
      expect(outcomes).toEqual([
        { userId: a, status: 'imported', pushRulesVersion: 1, pushersVersion: 1 },
        { userId: b, status: 'imported', pushRulesVersion: 1 },
      ]);
      const loaded = await store.loadPushRules(a);
      expect(loaded.version).toBe(1);
      expect(loaded.lookup).toEqual({
        found: true,
        event: { content: { global: anImport(a).ruleset } },
        defaultsRevision: 'v1.19',
      });
      expect(sorted(await store.listPushers(a))).toEqual(sorted(anImport(a).pushers));
      expect(await store.listPushers(b)).toEqual([]);
    });

    it('is idempotent: the same import again changes nothing, with or without overwrite', async () => {
      const { store } = await makeFixture();
      const user = aUser();
      await store.importUsers([anImport(user)], WRITE);
      expect(await store.importUsers([anImport(user)], WRITE)).toEqual([{ userId: user, status: 'unchanged' }]);
      expect(await store.importUsers([anImport(user)], OVERWRITE)).toEqual([{ userId: user, status: 'unchanged' }]);
      expect((await store.loadPushRules(user)).version).toBe(1);
      expect(sorted(await store.listPushers(user))).toEqual(sorted(anImport(user).pushers));
    });

    it('leaves a user with push rules of their own alone unless overwriting', async () => {
      const { store } = await makeFixture();
      const user = aUser();
      const own = serverDefaultRuleset(user);
      await store.savePushRules(user, 0, own, 'v1.19');
      expect(await store.importUsers([anImport(user)], WRITE)).toEqual([{ userId: user, status: 'present' }]);
      expect((await store.loadPushRules(user)).lookup).toMatchObject({ event: { content: { global: own } } });
      expect(await store.listPushers(user)).toEqual([]);

      expect(await store.importUsers([anImport(user)], OVERWRITE)).toEqual([
        { userId: user, status: 'imported', pushRulesVersion: 2, pushersVersion: 1 },
      ]);
      expect((await store.loadPushRules(user)).lookup).toMatchObject({
        event: { content: { global: anImport(user).ruleset } },
      });
    });

    it('leaves a user with only pushers of their own alone; overwriting replaces them exactly', async () => {
      const { store } = await makeFixture();
      const user = aUser();
      const own = aPusher(user, { pushkey: 'own', profile_tag: 'tag', device_id: 'DEV' });
      // As the service sets them: each pusher write bumps the user's pushers version.
      await store.upsertPusher(own);
      await store.bumpPushersVersion(user);
      await store.upsertPusher(aPusher(user, { lang: 'fr' }));
      await store.bumpPushersVersion(user);
      expect(await store.importUsers([anImport(user)], WRITE)).toEqual([{ userId: user, status: 'present' }]);
      expect(await store.importUsers([anImport(user)], OVERWRITE)).toEqual([
        { userId: user, status: 'imported', pushRulesVersion: 1, pushersVersion: 3 },
      ]);
      expect(sorted(await store.listPushers(user))).toEqual(sorted(anImport(user).pushers));
    });

    it('overwrites only what differs: same rules keep their version, other pushers (or only another ts) bump theirs', async () => {
      const { store } = await makeFixture();
      const user = aUser();
      await store.importUsers([anImport(user)], WRITE);
      const moved = anImport(user, { pushers: [aPusher(user, { ts: 5 })] });
      expect(await store.importUsers([moved], OVERWRITE)).toEqual([
        { userId: user, status: 'imported', pushersVersion: 2 },
      ]);
      expect((await store.loadPushRules(user)).version).toBe(1);
      expect(await store.listPushers(user)).toEqual([aPusher(user, { ts: 5 })]);
    });

    it('completes an unfinished import of a user, announcing both types again', async () => {
      const { store, markImportUnfinished } = await makeFixture();
      const user = aUser();
      await store.importUsers([anImport(user, { pushers: [] })], WRITE);
      await markImportUnfinished(user);
      expect(await store.importUsers([anImport(user)], WRITE)).toEqual([
        { userId: user, status: 'imported', pushRulesVersion: 1, pushersVersion: 1 },
      ]);
      expect(sorted(await store.listPushers(user))).toEqual(sorted(anImport(user).pushers));
      // Finished now: the next run sees the user as imported.
      expect(await store.importUsers([anImport(user)], WRITE)).toEqual([{ userId: user, status: 'unchanged' }]);
    });

    it('with keepMarks, leaves the users unfinished until finishImports (a run stopped before its events re-announces them)', async () => {
      const { store } = await makeFixture();
      const user = aUser();
      expect(await store.importUsers([anImport(user)], { ...WRITE, keepMarks: true })).toEqual([
        { userId: user, status: 'imported', pushRulesVersion: 1, pushersVersion: 1 },
      ]);
      // Not finished: imported and announced again, at the versions stored.
      expect(await store.importUsers([anImport(user)], { ...WRITE, keepMarks: true })).toEqual([
        { userId: user, status: 'imported', pushRulesVersion: 1, pushersVersion: 1 },
      ]);
      await store.finishImports([user]);
      expect(await store.importUsers([anImport(user)], WRITE)).toEqual([{ userId: user, status: 'unchanged' }]);
    });

    it('keeps Synapse\u2019s ts as the pusher\u2019s ts, until a change through the service dates it anew', async () => {
      const { store } = await makeFixture();
      const user = aUser();
      await store.importUsers([anImport(user, { pushers: [aPusher(user)] })], WRITE);
      expect((await store.listPushers(user))[0]?.ts).toBe(1_700_000_000_123);
      expect(await store.upsertPusher(aPusher(user))).toBe('unchanged');
      expect((await store.listPushers(user))[0]?.ts).toBe(1_700_000_000_123);
      expect(await store.upsertPusher(aPusher(user, { device_display_name: 'New phone' }))).toBe('updated');
      expect((await store.listPushers(user))[0]?.ts).toBeGreaterThan(1_700_000_000_123);
    });

    it('takes the users of one batch independently, in the order given', async () => {
      const { store } = await makeFixture();
      const [fresh, own, again] = [aUser(), aUser(), aUser()];
      await store.savePushRules(own, 0, serverDefaultRuleset(own), 'v1.19');
      await store.importUsers([anImport(again)], WRITE);
      const outcomes = await store.importUsers([anImport(fresh), anImport(own), anImport(again)], WRITE);
      expect(outcomes.map((outcome) => [outcome.userId, outcome.status])).toEqual([
        [fresh, 'imported'],
        [own, 'present'],
        [again, 'unchanged'],
      ]);
    });
  });
}

function sorted(pushers: readonly StoredPusher[]): StoredPusher[] {
  return [...pushers].sort((a, b) => a.pushkey.localeCompare(b.pushkey));
}
