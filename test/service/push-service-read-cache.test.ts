import { describe, expect, it } from 'vitest';
import { encodeReply, encodeReplyBytes } from '../../src/contract/reply.js';
import type { Command } from '../../src/service/command.js';
import { PushService, type PushServiceOptions } from '../../src/service/push-service.js';
import { RulesetCache } from '../../src/service/ruleset-cache.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import type { LoadedPushRules, PushStore } from '../../src/store/push-store.js';
import { ALICE } from '../support/builders.js';
import { DEFAULT_LIMITS } from '../support/default-config.js';
import { wrapStore } from '../support/store-doubles.js';

const MASTER = { scope: 'global', kind: 'override', ruleId: '.m.rule.master' } as const;
const getEnabled: Command = { op: 'get_pushrule_enabled', userId: ALICE, address: MASTER };
const setEnabled = (enabled: boolean): Command => ({
  op: 'set_pushrule_enabled',
  userId: ALICE,
  address: MASTER,
  enabled,
});

/** A read cache on a clock the test moves, an in-memory store that counts rule loads, and the service on both. */
async function world(overrides: { maxStalenessMs?: number; maxEntries?: number; maxBytes?: number } = {}) {
  const clock = { now: 1_000 };
  const store = new InMemoryPushStore();
  await store.savePushRules(ALICE, 0, serverDefaultRuleset(ALICE), 'v1.19');
  const loads = { count: 0, gate: undefined as Promise<void> | undefined };
  const counted: PushStore = wrapStore(store, {
    loadPushRules: async (userId, messageId) => {
      loads.count += 1;
      const loaded = await store.loadPushRules(userId, messageId);
      if (loads.gate !== undefined) await loads.gate;
      return loaded;
    },
  });
  const readCache = new RulesetCache<LoadedPushRules>({
    maxEntries: overrides.maxEntries ?? 100,
    maxBytes: overrides.maxBytes ?? 1 << 30,
    maxStalenessMs: overrides.maxStalenessMs ?? 10_000,
    now: () => clock.now,
  });
  const options: PushServiceOptions = {
    maxWriteAttempts: 4,
    backoff: { baseMs: 0, maxMs: 0 },
    pusherPolicy: { allowInsecureGateways: false },
    limits: DEFAULT_LIMITS,
    readCache,
  };
  return { clock, store, loads, readCache, service: new PushService(counted, options) };
}

const enabledOf = async (service: PushService) => (await service.handle(getEnabled)).reply;

describe('PushService: push-rule reads answered from the read cache', () => {
  it.each<[string, Command]>([
    ['get_pushrules', { op: 'get_pushrules', userId: ALICE }],
    ['get_pushrule', { op: 'get_pushrule', userId: ALICE, address: MASTER }],
    ['get_pushrule_actions', { op: 'get_pushrule_actions', userId: ALICE, address: MASTER }],
    ['get_pushrule_enabled', getEnabled],
  ])('%s: a second read of the user reads nothing from the store, and answers the same', async (_, command) => {
    const { service, loads } = await world();
    const first = await service.handle(command);
    const second = await service.handle(command);
    expect(loads.count).toBe(1);
    expect(second.reply).toEqual(first.reply);
  });

  it('get_pushrules from memory sends byte for byte what the read of the store sent, encoded once', async () => {
    const { service } = await world();
    const command: Command = { op: 'get_pushrules', userId: ALICE };
    const fromStore = (await service.handle(command)).reply;
    const kept = (await service.handle(command)).reply;
    const again = (await service.handle(command)).reply;
    expect(encodeReplyBytes(kept).toString('utf8')).toBe(encodeReply(fromStore));
    // The same reply object, whose bytes are already encoded.
    expect(again).toBe(kept);
  });

  it("weighs an entry with the get_pushrules reply kept for it: at least the reply's bytes more", async () => {
    const { service, readCache } = await world();
    const command: Command = { op: 'get_pushrules', userId: ALICE };
    await service.handle(command);
    const ruleset = readCache.bytes;
    const kept = (await service.handle(command)).reply;
    expect(readCache.bytes).toBeGreaterThanOrEqual(ruleset + 2 * encodeReplyBytes(kept).byteLength);
    // Its bytes are a copy of their own, not a slice of a shared pool slab that it would pin.
    expect(encodeReplyBytes(kept).buffer.byteLength).toBe(encodeReplyBytes(kept).byteLength);
  });

  it('stays under maxBytes counting the kept replies: the least recently used users go', async () => {
    const users = ['@a:example.org', '@b:example.org', '@c:example.org'];
    const { service, store, readCache } = await world();
    for (const user of users) await store.savePushRules(user, 0, serverDefaultRuleset(user), 'v1.19');
    for (const user of users) await service.handle({ op: 'get_pushrules', userId: user });
    const rulesetsOnly = readCache.bytes;
    const maxBytes = rulesetsOnly + 100;
    const bounded = await world({ maxBytes });
    for (const user of users) await bounded.store.savePushRules(user, 0, serverDefaultRuleset(user), 'v1.19');
    // Read twice each: the second read answers from memory and keeps its encoded reply.
    for (const user of users) {
      await bounded.service.handle({ op: 'get_pushrules', userId: user });
      await bounded.service.handle({ op: 'get_pushrules', userId: user });
    }
    expect(bounded.readCache.bytes).toBeLessThanOrEqual(maxBytes);
    expect(bounded.readCache.size).toBeLessThan(users.length);
    expect(bounded.readCache.stats.evictions).toBeGreaterThan(0);
  });

  it("drops the user when the service's own write of their rules completes", async () => {
    const { service, loads } = await world();
    expect(await enabledOf(service)).toEqual({ ok: true, body: { enabled: false } });
    await service.handle(setEnabled(true));
    expect(await enabledOf(service)).toEqual({ ok: true, body: { enabled: true } });
    // The read, the write's own load, and the read again after it.
    expect(loads.count).toBe(3);
  });

  it("drops the user on another worker's change event (invalidate), and everyone on a lost subscription (clear)", async () => {
    const { service, store, readCache } = await world();
    await enabledOf(service);
    // Another worker writes: this one only hears of it through the event.
    await new PushService(store, {
      maxWriteAttempts: 4,
      backoff: { baseMs: 0, maxMs: 0 },
      pusherPolicy: { allowInsecureGateways: false },
      limits: DEFAULT_LIMITS,
    }).handle(setEnabled(true));
    expect(await enabledOf(service)).toEqual({ ok: true, body: { enabled: false } });
    readCache.invalidate(ALICE);
    expect(await enabledOf(service)).toEqual({ ok: true, body: { enabled: true } });
    await store.savePushRules(ALICE, (await store.loadPushRules(ALICE)).version, serverDefaultRuleset(ALICE), 'v1.19');
    readCache.clear();
    expect(await enabledOf(service)).toEqual({ ok: true, body: { enabled: false } });
  });

  it('reads the store again once what it kept is older than maxStalenessMs, event or not', async () => {
    const { service, store, clock, loads } = await world({ maxStalenessMs: 5_000 });
    await enabledOf(service);
    const { version } = await store.loadPushRules(ALICE);
    const enabled = serverDefaultRuleset(ALICE);
    await store.savePushRules(
      ALICE,
      version,
      {
        ...enabled,
        override: enabled.override.map((r) => (r.rule_id === '.m.rule.master' ? { ...r, enabled: true } : r)),
      },
      'v1.19',
    );
    clock.now += 5_000;
    expect(await enabledOf(service)).toEqual({ ok: true, body: { enabled: false } });
    clock.now += 1;
    expect(await enabledOf(service)).toEqual({ ok: true, body: { enabled: true } });
    expect(loads.count).toBe(2);
  });

  it('does not keep a read that a change event overtook while it was reading', async () => {
    const { service, store, loads, readCache } = await world();
    let open = (): void => undefined;
    loads.gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const racing = service.handle(getEnabled);
    // The read has what the store held; a write lands and its event arrives before the read is answered.
    await new Promise((resolve) => setImmediate(resolve));
    const { version } = await store.loadPushRules(ALICE);
    const rules = serverDefaultRuleset(ALICE);
    await store.savePushRules(
      ALICE,
      version,
      { ...rules, override: rules.override.map((r) => (r.rule_id === '.m.rule.master' ? { ...r, enabled: true } : r)) },
      'v1.19',
    );
    readCache.invalidate(ALICE);
    open();
    expect((await racing).reply).toEqual({ ok: true, body: { enabled: false } });
    loads.gate = undefined;
    expect(await enabledOf(service)).toEqual({ ok: true, body: { enabled: true } });
  });

  it('does not keep a load whose stored rules are bad (it answers Database and reads again next time)', async () => {
    const { store, loads } = await world();
    const failing = new PushService(
      wrapStore(store, {
        loadPushRules: async () => {
          loads.count += 1;
          return Promise.resolve({ version: 3, lookup: { found: 'failed' } });
        },
      }),
      {
        maxWriteAttempts: 4,
        backoff: { baseMs: 0, maxMs: 0 },
        pusherPolicy: { allowInsecureGateways: false },
        limits: DEFAULT_LIMITS,
        readCache: new RulesetCache<LoadedPushRules>({ maxEntries: 10, maxBytes: 1 << 20, maxStalenessMs: 10_000 }),
      },
    );
    const first = await failing.handle(getEnabled);
    await failing.handle(getEnabled);
    expect(first.reply.ok).toBe(false);
    expect(loads.count).toBe(2);
  });

  it('get_pushers is never answered from it (a pusher can leave a user without an event for that user)', async () => {
    const { service, readCache } = await world();
    await service.handle({ op: 'get_pushers', userId: ALICE });
    await service.handle({ op: 'get_pushers', userId: ALICE });
    expect(readCache.size).toBe(0);
  });
});
