import { beforeEach, describe, expect, it } from 'vitest';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { aConditionalRule, aRuleset, overridesWithUserRules } from '../support/builders.js';
import { aUser, type ContractCase, type FixtureOptions, type StoreFixture } from './push-store-fixture.js';

/**
 * The push rules cases of the PushStore contract (push-store-contract.ts):
 * saving and loading rulesets at versions, erasing user data, recorded writes.
 */
export function pushRulesCases(
  current: () => ContractCase,
  makeFixture: (options?: FixtureOptions) => Promise<StoreFixture>,
): void {
  let fixture: StoreFixture;
  let user: string;
  beforeEach(() => {
    ({ fixture, user } = current());
  });

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
}
