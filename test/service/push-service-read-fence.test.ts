import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/service/command.js';
import { PushService, type PushServiceOptions } from '../../src/service/push-service.js';
import { RulesetCache } from '../../src/service/ruleset-cache.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import type { LoadedPushRules, PushStore } from '../../src/store/push-store.js';
import { ALICE } from '../support/builders.js';
import { DEFAULT_LIMITS } from '../support/default-config.js';
import { wrapStore } from '../support/store-doubles.js';

/**
 * A read answered from the read cache waits until the change events queued
 * for the worker are applied (`RequestContext.changesApplied`): the broker
 * keeps no order between the event queue and the read queue, so a read sent
 * after another worker's write may reach this one before that write's event.
 */
const MASTER = { scope: 'global', kind: 'override', ruleId: '.m.rule.master' } as const;
const getEnabled: Command = { op: 'get_pushrule_enabled', userId: ALICE, address: MASTER };

const SERVICE: Omit<PushServiceOptions, 'readCache'> = {
  maxWriteAttempts: 4,
  backoff: { baseMs: 0, maxMs: 0 },
  pusherPolicy: { allowInsecureGateways: false },
  limits: DEFAULT_LIMITS,
};

/** A worker with a read cache, another worker with none on the same store, and the loads of the first counted. */
async function aPool() {
  const store = new InMemoryPushStore();
  await store.savePushRules(ALICE, 0, serverDefaultRuleset(ALICE), 'v1.19');
  const loads = { count: 0 };
  const counted: PushStore = wrapStore(store, {
    loadPushRules: async (userId, messageId) => {
      loads.count += 1;
      return store.loadPushRules(userId, messageId);
    },
  });
  const readCache = new RulesetCache<LoadedPushRules>({ maxEntries: 100, maxBytes: 1 << 30, maxStalenessMs: 60_000 });
  const reader = new PushService(counted, { ...SERVICE, readCache });
  const writer = new PushService(store, SERVICE);
  // The reader keeps ALICE's rules (master disabled); then the other worker enables master.
  await reader.handle(getEnabled);
  await writer.handle({ op: 'set_pushrule_enabled', userId: ALICE, address: MASTER, enabled: true });
  return { loads, readCache, reader };
}

/** A `changesApplied` that counts its calls and does `then` before it settles. */
function changes(then: () => Promise<void> = async () => Promise.resolve()) {
  const waited = { count: 0 };
  const changesApplied = async () => {
    waited.count += 1;
    await then();
  };
  return { waited, changesApplied };
}

describe('PushService: a read of kept rules waits for the change events queued before it', () => {
  it('reads the store when one of them named the user: the answer has the write', async () => {
    const { loads, readCache, reader } = await aPool();
    const { waited, changesApplied } = changes(async () => {
      readCache.invalidate(ALICE);
      return Promise.resolve();
    });
    const { misses, hits } = readCache.stats;
    const { reply } = await reader.handle(getEnabled, { changesApplied });
    expect(reply).toEqual({ ok: true, body: { enabled: true } });
    expect({ waited: waited.count, loads: loads.count }).toEqual({ waited: 1, loads: 2 });
    // One read, one miss: the metrics count reads, not the looks before and after the wait.
    expect({ misses: readCache.stats.misses - misses, hits: readCache.stats.hits - hits }).toEqual({
      misses: 1,
      hits: 0,
    });
  });

  it('answers from memory when none named the user, counting one hit', async () => {
    const { loads, readCache, reader } = await aPool();
    const { waited, changesApplied } = changes();
    const hits = readCache.stats.hits;
    const { reply } = await reader.handle(getEnabled, { changesApplied });
    // What it kept: no event said otherwise (and the staleness bound is not reached).
    expect(reply).toEqual({ ok: true, body: { enabled: false } });
    expect({ waited: waited.count, loads: loads.count, hits: readCache.stats.hits - hits }).toEqual({
      waited: 1,
      loads: 1,
      hits: 1,
    });
  });

  it('reads the store when they cannot be waited for (the subscription ended)', async () => {
    const { loads, reader } = await aPool();
    const { waited, changesApplied } = changes(async () =>
      Promise.reject(new Error('change-event subscription closed')),
    );
    const { reply } = await reader.handle(getEnabled, { changesApplied });
    expect(reply).toEqual({ ok: true, body: { enabled: true } });
    expect({ waited: waited.count, loads: loads.count }).toEqual({ waited: 1, loads: 2 });
  });

  it.each<[string, Command]>([
    ['a read of a user not kept', { op: 'get_pushrules', userId: '@bob:example.org' }],
    ['a write', { op: 'set_pushrule_enabled', userId: ALICE, address: MASTER, enabled: false }],
    ['get_pushers', { op: 'get_pushers', userId: ALICE }],
  ])('%s does not wait: the store answers it', async (_, command) => {
    const { reader, readCache } = await aPool();
    const { waited, changesApplied } = changes();
    const { misses } = readCache.stats;
    const { reply } = await reader.handle(command, { changesApplied });
    expect(reply.ok).toBe(true);
    expect(waited.count).toBe(0);
    // A read of a user not kept is a miss of the read cache; a write or get_pushers is not a read of it.
    expect(readCache.stats.misses - misses).toBe(command.op === 'get_pushrules' ? 1 : 0);
  });
});
