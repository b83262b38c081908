import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/rpc/command.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { StoreUnavailableError, type PushStore } from '../../src/store/push-store.js';
import { PushService, type PushServiceOptions } from '../../src/worker/push-service.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { ALICE } from '../support/builders.js';
import { CONTRACT_KINDS } from '../support/expect-result.js';

const OPTIONS: PushServiceOptions = {
  maxWriteAttempts: 4,
  backoff: { baseMs: 0, maxMs: 0 },
  pusherPolicy: { allowInsecureGateways: false },
};

const setEnabled: Command = {
  op: 'set_pushrule_enabled',
  userId: ALICE,
  address: { scope: 'global', kind: 'override', ruleId: '.m.rule.master' },
  enabled: true,
};

async function withDefaults(): Promise<InMemoryPushStore> {
  const store = new InMemoryPushStore();
  await store.savePushRules(ALICE, 0, serverDefaultRuleset(ALICE), 'v1.19');
  return store;
}

/** A store whose next `conflicts` saves lose to a concurrent writer. */
function racing(store: InMemoryPushStore, conflicts: number): PushStore {
  let left = conflicts;
  return {
    loadPushRules: async (u) => store.loadPushRules(u),
    savePushRules: async (u, version, ruleset, revision) => {
      if (left > 0) {
        left -= 1;
        const current = await store.loadPushRules(u);
        // Another writer bumps the version in between.
        const other = serverDefaultRuleset(u);
        await store.savePushRules(u, current.version, other, revision);
        return store.savePushRules(u, version, ruleset, revision);
      }
      return store.savePushRules(u, version, ruleset, revision);
    },
    insertPushRulesIfAbsent: async (u, r, v) => store.insertPushRulesIfAbsent(u, r, v),
    listPushers: async (u) => store.listPushers(u),
    upsertPusher: async (p) => store.upsertPusher(p),
    deletePusher: async (k) => store.deletePusher(k),
    deletePushersOfOtherUsers: async (k) => store.deletePushersOfOtherUsers(k),
    bumpPushersVersion: async (u) => store.bumpPushersVersion(u),
  };
}

describe('PushService: compare-and-set retries', () => {
  it('re-reads and re-applies after a conflict, and reports the conflicts', async () => {
    const store = await withDefaults();
    const outcome = await new PushService(racing(store, 2), OPTIONS).handle(setEnabled);
    expect(outcome).toMatchObject({ reply: { ok: true, body: {} }, conflicts: 2, change: { type: 'm.push_rules', version: 4 } });
    const loaded = await store.loadPushRules(ALICE);
    const stored = loaded.lookup.found === true ? (loaded.lookup.event as { content: { global: { override: { enabled: boolean }[] } } }) : undefined;
    expect(stored?.content.global.override[0]?.enabled).toBe(true);
  });

  it('answers Unavailable when the budget is spent, without writing', async () => {
    const store = await withDefaults();
    const outcome = await new PushService(racing(store, 10), OPTIONS).handle(setEnabled);
    expect(outcome.reply).toEqual({
      ok: false,
      error: { kind: 'Unavailable', ...CONTRACT_KINDS.Unavailable, error: "Too many concurrent changes to this user's push rules; try again." },
    });
    expect(outcome.conflicts).toBe(4);
  });
});

describe('PushService: storage failures are replies', () => {
  const failing = (error: Error): PushStore => ({
    ...racing(new InMemoryPushStore(), 0),
    loadPushRules: async () => Promise.reject(error),
  });

  it('a transient failure → Unavailable (503)', async () => {
    const outcome = await new PushService(failing(new StoreUnavailableError('down')), OPTIONS).handle(setEnabled);
    expect(outcome.reply).toEqual({
      ok: false,
      error: { kind: 'Unavailable', ...CONTRACT_KINDS.Unavailable, error: 'The push rules store is unavailable; try again.' },
    });
  });

  it('any other failure → Database (500), with the cause kept for the log', async () => {
    const cause = new Error('disk on fire');
    const outcome = await new PushService(failing(cause), OPTIONS).handle(setEnabled);
    expect(outcome.reply).toEqual({
      ok: false,
      error: { kind: 'Database', ...CONTRACT_KINDS.Database, error: 'The push rules store failed.' },
    });
    expect(outcome.failure).toBe(cause);
  });
});

describe('PushService: change events', () => {
  it('deleting a pusher that does not exist changes nothing and announces nothing', async () => {
    const outcome = await new PushService(new InMemoryPushStore(), OPTIONS).handle({
      op: 'set_pusher',
      userId: ALICE,
      action: { kind: null, app_id: 'a', pushkey: 'k' },
    });
    expect(outcome).toEqual({ reply: { ok: true, body: {} }, conflicts: 0 });
  });

  it('a read announces nothing', async () => {
    const outcome = await new PushService(await withDefaults(), OPTIONS).handle({ op: 'get_pushrules', userId: ALICE });
    expect(outcome.change).toBeUndefined();
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
