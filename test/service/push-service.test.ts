import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/service/command.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { StoreFailedError, StoreUnavailableError, type PushStore } from '../../src/store/push-store.js';
import { PushService } from '../../src/service/push-service.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { ALICE } from '../support/builders.js';
import { DEFAULT_LIMITS } from '../support/default-config.js';
import { CONTRACT_KINDS } from '../support/expect-result.js';
import { OPTIONS, withDefaults } from '../support/push-service-world.js';
import { wrapStore } from '../support/store-doubles.js';

// A write redelivered with the same messageId is in push-service-redelivery.test.ts.

const setEnabled: Command = {
  op: 'set_pushrule_enabled',
  userId: ALICE,
  address: { scope: 'global', kind: 'override', ruleId: '.m.rule.master' },
  enabled: true,
};

/** A store whose next `conflicts` saves lose to a concurrent writer. */
function racing(store: InMemoryPushStore, conflicts: number): PushStore {
  let left = conflicts;
  return wrapStore(store, {
    savePushRules: async (u, version, ruleset, revision, record) => {
      if (left > 0) {
        left -= 1;
        const current = await store.loadPushRules(u);
        // Another writer bumps the version in between.
        const other = serverDefaultRuleset(u);
        await store.savePushRules(u, current.version, other, revision);
      }
      return store.savePushRules(u, version, ruleset, revision, record);
    },
  });
}

describe('PushService: compare-and-set retries', () => {
  it('re-reads and re-applies after a conflict, and reports the conflicts', async () => {
    const store = await withDefaults();
    const outcome = await new PushService(racing(store, 2), OPTIONS).handle(setEnabled);
    expect(outcome).toMatchObject({
      reply: { ok: true, body: {} },
      conflicts: 2,
      changes: [{ type: 'm.push_rules', version: 4 }],
    });
    const loaded = await store.loadPushRules(ALICE);
    const stored =
      loaded.lookup.found === true
        ? (loaded.lookup.event as { content: { global: { override: { enabled: boolean }[] } } })
        : undefined;
    expect(stored?.content.global.override[0]?.enabled).toBe(true);
  });

  it('answers Unavailable when the budget is spent, without writing', async () => {
    const store = await withDefaults();
    const outcome = await new PushService(racing(store, 10), OPTIONS).handle(setEnabled);
    expect(outcome.reply).toEqual({
      ok: false,
      error: {
        kind: 'Unavailable',
        ...CONTRACT_KINDS.Unavailable,
        error: "Too many concurrent changes to this user's push rules; try again.",
      },
    });
    expect(outcome.conflicts).toBe(4);
  });
});

describe('PushService: storage failures are replies', () => {
  const failing = (error: Error): PushStore =>
    wrapStore(new InMemoryPushStore(), { loadPushRules: async () => Promise.reject(error) });

  it('a transient failure → Unavailable (503)', async () => {
    const outcome = await new PushService(failing(new StoreUnavailableError('down')), OPTIONS).handle(setEnabled);
    expect(outcome.reply).toEqual({
      ok: false,
      error: {
        kind: 'Unavailable',
        ...CONTRACT_KINDS.Unavailable,
        error: 'The push rules store is unavailable; try again.',
      },
    });
  });

  it('a storage failure for good → Database (500), with the cause kept for the log', async () => {
    const cause = new StoreFailedError('MongoDB failed: disk on fire');
    const outcome = await new PushService(failing(cause), OPTIONS).handle(setEnabled);
    expect(outcome.reply).toEqual({
      ok: false,
      error: { kind: 'Database', ...CONTRACT_KINDS.Database, error: 'The push rules store failed.' },
    });
    expect(outcome.failure).toBe(cause);
  });

  it.each([
    ['not JSON', '{"ok": tru'],
    ['JSON but not a reply', '{"status": 200}'],
  ])('a recorded reply gone bad (%s) is stored data gone bad → Database (500), not a bug', async (_case, replyJson) => {
    const store = wrapStore(new InMemoryPushStore(), {
      findRecordedWrite: async () => Promise.resolve({ messageId: 'm1', replyJson, pushersVersion: 1 }),
    });
    const outcome = await new PushService(store, OPTIONS).handle(
      { op: 'delete_user_data', userId: ALICE },
      { messageId: 'm1' },
    );
    expect(outcome.reply).toMatchObject({ ok: false, error: { kind: 'Database', status: 500 } });
    expect(outcome.failure).toBeInstanceOf(StoreFailedError);
  });

  it('anything else (a bug) → Internal (500), with the cause kept for the log', async () => {
    const bug = new TypeError('cannot read properties of undefined');
    const outcome = await new PushService(failing(bug), OPTIONS).handle(setEnabled);
    expect(outcome.reply).toEqual({
      ok: false,
      error: { kind: 'Internal', ...CONTRACT_KINDS.Internal, error: 'Internal error.' },
    });
    expect(outcome.failure).toBe(bug);
  });
});

describe('PushService: change events', () => {
  it('deleting a pusher that does not exist changes nothing and announces nothing', async () => {
    const outcome = await new PushService(new InMemoryPushStore(), OPTIONS).handle({
      op: 'set_pusher',
      userId: ALICE,
      action: { kind: null, app_id: 'a', pushkey: 'k' },
    });
    expect(outcome).toEqual({ reply: { ok: true, body: {} }, conflicts: 0, unchanged: true });
  });

  it('a read announces nothing', async () => {
    const outcome = await new PushService(await withDefaults(), OPTIONS).handle({ op: 'get_pushrules', userId: ALICE });
    expect(outcome.changes).toBeUndefined();
  });
});

describe('PushService: writes of one user within one process', () => {
  it('run one at a time, so concurrent writes in a process never conflict', async () => {
    const store = await withDefaults();
    const service = new PushService(store, OPTIONS);
    const ruleIds = Array.from({ length: 20 }, (_, i) => `r${i}`);
    const outcomes = await Promise.all(
      ruleIds.map(async (ruleId) =>
        service.handle({
          op: 'set_pushrule',
          userId: ALICE,
          request: { scope: 'global', kind: 'underride', ruleId, body: { actions: [], conditions: [] } },
        }),
      ),
    );
    expect(outcomes.map((o) => o.reply.ok)).toEqual(ruleIds.map(() => true));
    expect(outcomes.reduce((sum, o) => sum + o.conflicts, 0)).toBe(0);
    expect((await store.loadPushRules(ALICE)).version).toBe(1 + ruleIds.length);
  });
});

describe('PushService: limits on what a user accumulates', () => {
  const tight = { ...OPTIONS, limits: { ...DEFAULT_LIMITS, maxUserRules: 2, maxPushersPerUser: 2 } };
  const roomRule = (ruleId: string): Command => ({
    op: 'set_pushrule',
    userId: ALICE,
    request: { scope: 'global', kind: 'room', ruleId, body: { actions: ['notify'] } },
  });
  const pusher = (pushkey: string, lang = 'en'): Command => ({
    op: 'set_pusher',
    userId: ALICE,
    action: {
      kind: 'http',
      app_id: 'a',
      pushkey,
      app_display_name: 'A',
      device_display_name: 'D',
      lang,
      data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
    },
  });

  it('refuses a rule past maxUserRules with TooLarge and stores nothing', async () => {
    const store = await withDefaults();
    const service = new PushService(store, tight);
    await service.handle(roomRule('!a:x'));
    await service.handle(roomRule('!b:x'));
    const version = (await store.loadPushRules(ALICE)).version;
    expect((await service.handle(roomRule('!c:x'))).reply).toEqual({
      ok: false,
      error: {
        kind: 'TooLarge',
        ...CONTRACT_KINDS.TooLarge,
        error: 'Too many push rules: a user may have at most 2 of their own.',
      },
    });
    expect((await store.loadPushRules(ALICE)).version).toBe(version);
    // Replacing an existing rule does not add one.
    expect((await service.handle(roomRule('!b:x'))).reply).toEqual({ ok: true, body: {} });
  });

  it('refuses a pusher past maxPushersPerUser, but lets existing ones be updated', async () => {
    const store = new InMemoryPushStore();
    const service = new PushService(store, tight);
    await service.handle(pusher('k1'));
    await service.handle(pusher('k2'));
    expect((await service.handle(pusher('k3'))).reply).toEqual({
      ok: false,
      error: { kind: 'TooLarge', ...CONTRACT_KINDS.TooLarge, error: 'Too many pushers: a user may have at most 2.' },
    });
    expect((await service.handle(pusher('k2', 'de'))).reply).toEqual({ ok: true, body: {} });
    expect((await store.listPushers(ALICE)).map((p) => [p.pushkey, p.lang])).toEqual([
      ['k1', 'en'],
      ['k2', 'de'],
    ]);
  });
});

describe('PushService: rule writes weighed by their stored text', () => {
  it('processes at most rulesetCharsInFlight characters of stored rulesets at once, and every write still applies', async () => {
    const users = ['@a:example.org', '@b:example.org', '@c:example.org'];
    const inner = new InMemoryPushStore();
    for (const u of users) await inner.savePushRules(u, 0, serverDefaultRuleset(u), 'v1.19');
    const chars = (await inner.loadPushRules(users[0] ?? '')).storedChars ?? 0;
    expect(chars).toBeGreaterThan(1000);
    const saving = { now: 0, max: 0 };
    const store = wrapStore(inner, {
      savePushRules: async (u, version, ruleset, revision, record) => {
        saving.now += 1;
        saving.max = Math.max(saving.max, saving.now);
        await new Promise((resolve) => setTimeout(resolve, 5));
        saving.now -= 1;
        return inner.savePushRules(u, version, ruleset, revision, record);
      },
    });
    // Room for two of these rulesets at once, not three.
    const service = new PushService(store, { ...OPTIONS, rulesetCharsInFlight: chars * 2 + chars / 2 });
    const outcomes = await Promise.all(users.map(async (userId) => service.handle({ ...setEnabled, userId })));
    expect(outcomes.map((o) => o.reply)).toEqual(users.map(() => ({ ok: true, body: {} })));
    expect(saving.max).toBe(2);
    const unbounded = new PushService(store, OPTIONS);
    await Promise.all(users.map(async (userId) => unbounded.handle({ ...setEnabled, userId, enabled: false })));
    expect(saving.max).toBe(3);
  });
});
