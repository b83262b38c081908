import { describe, expect, it } from 'vitest';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import type { ChangeEvent } from '../../src/service/change-event.js';
import type { Command } from '../../src/service/command.js';
import { PushService } from '../../src/service/push-service.js';
import { RulesetCache } from '../../src/service/ruleset-cache.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import type { LoadedPushRules, PushStore } from '../../src/store/push-store.js';
import { ALICE, aPusherSetAction } from '../support/builders.js';
import { DEFAULT_LIMITS } from '../support/default-config.js';
import { wrapStore } from '../support/store-doubles.js';

/**
 * A write answered Unavailable (its deadline came, or a store operation
 * outlasted `operationTimeoutMs`) whose store operation the database applies
 * afterwards: the writer's read cache drops the user at once, and once the
 * operation settles the change is announced (every worker's caches hear it).
 * The gated operation is held until the test lets it through, after the reply.
 */
const MASTER = { scope: 'global', kind: 'override', ruleId: '.m.rule.master' } as const;
const enableMaster: Command = { op: 'set_pushrule_enabled', userId: ALICE, address: MASTER, enabled: true };
const readMaster: Command = { op: 'get_pushrule_enabled', userId: ALICE, address: MASTER };
const newPusher: Command = {
  op: 'set_pusher',
  userId: ALICE,
  action: aPusherSetAction({ pushkey: 'new-phone' }),
  deviceId: 'PHONE',
};

type Gated = keyof PushStore;

/** Store, read cache, a service whose `gated` operation waits for `release()`, and what it announced late. */
async function world(gated: Gated, bound: { operationTimeoutMs?: number; deadlineInMs?: number }) {
  const store = new InMemoryPushStore();
  await store.savePushRules(ALICE, 0, serverDefaultRuleset(ALICE), 'v1.19');
  await store.upsertPusher({ ...aPusherSetAction({ pushkey: 'old-phone' }), user_id: ALICE } as never);
  await store.bumpPushersVersion(ALICE);
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const held: PushStore = wrapStore(store, {
    [gated]: async (...args: unknown[]) => {
      await gate;
      return (store[gated] as (...a: unknown[]) => Promise<unknown>).apply(store, args);
    },
  });
  const readCache = new RulesetCache<LoadedPushRules>({ maxEntries: 100, maxBytes: 1 << 30, maxStalenessMs: 60_000 });
  const announced: ChangeEvent[][] = [];
  let heard: (() => void) | undefined;
  const service = new PushService(held, {
    maxWriteAttempts: 4,
    backoff: { baseMs: 0, maxMs: 0 },
    pusherPolicy: { allowInsecureGateways: false },
    limits: DEFAULT_LIMITS,
    readCache,
    ...(bound.operationTimeoutMs === undefined ? {} : { operationTimeoutMs: bound.operationTimeoutMs }),
    announceLate: async (changes) => {
      announced.push([...changes]);
      heard?.();
      return Promise.resolve();
    },
  });
  const handle = async (command: Command) =>
    service.handle(command, {
      messageId: 'm1',
      ...(bound.deadlineInMs === undefined ? {} : { deadline: Date.now() + bound.deadlineInMs }),
    });
  /** Lets the held operation through and waits until something is announced. */
  const releaseAndHear = async () => {
    const heardNow = new Promise<void>((resolve) => {
      heard = resolve;
    });
    release();
    await heardNow;
  };
  /** Lets it through and lets every turn of the in-memory store run (for a case that announces nothing). */
  const releaseAndSettle = async () => {
    release();
    for (let turn = 0; turn < 20; turn += 1) await new Promise((resolve) => setImmediate(resolve));
  };
  return { store, service, readCache, announced, handle, releaseAndHear, releaseAndSettle };
}

describe('PushService: a write given up at its deadline or timeout but applied afterwards', () => {
  it.each([
    ['operationTimeoutMs', { operationTimeoutMs: 5 }],
    ['the deadline', { deadlineInMs: 5 }],
  ])(
    'a rule write (given up at %s): the same worker reads it back once applied, and it is announced',
    async (_, bound) => {
      const { service, handle, announced, releaseAndHear } = await world('savePushRules', bound);
      expect((await service.handle(readMaster)).reply).toEqual({ ok: true, body: { enabled: false } });
      const outcome = await handle(enableMaster);
      expect(outcome.reply).toMatchObject({ ok: false, error: { kind: 'Unavailable' } });
      await releaseAndHear();
      expect(announced).toEqual([[{ user_id: ALICE, type: 'm.push_rules', version: 2 }]]);
      expect((await service.handle(readMaster)).reply).toEqual({ ok: true, body: { enabled: true } });
    },
  );

  it('drops the user from the read cache at once, before the write settles', async () => {
    const { service, readCache, handle } = await world('savePushRules', { operationTimeoutMs: 5 });
    await service.handle(readMaster);
    expect(readCache.size).toBe(1);
    await handle(enableMaster);
    expect(readCache.size).toBe(0);
  });

  it.each<[string, Gated, Command, ChangeEvent[]]>([
    // The pusher is written, its version bump and record never were: the version is bumped for the event.
    ['set_pusher, its upsert', 'upsertPusher', newPusher, [{ user_id: ALICE, type: 'm.pushers', version: 2 }]],
    // Its own bump lands late (2), the spare event's bump after it (3).
    [
      'set_pusher, its version bump',
      'bumpPushersVersion',
      newPusher,
      [{ user_id: ALICE, type: 'm.pushers', version: 3 }],
    ],
    [
      'delete_pushers, its delete',
      'deletePushers',
      { op: 'delete_pushers', userId: ALICE, devices: { all: true }, includeEmail: true },
      [{ user_id: ALICE, type: 'm.pushers', version: 2 }],
    ],
    [
      'delete_user_data, its erasure',
      'eraseUserData',
      { op: 'delete_user_data', userId: ALICE },
      [
        { user_id: ALICE, type: 'm.push_rules', version: 2 },
        { user_id: ALICE, type: 'm.pushers', version: 3 },
      ],
    ],
  ])('%s given up under way: the user is announced once it settles', async (_, gated, command, expected) => {
    const { handle, announced, releaseAndHear } = await world(gated, { operationTimeoutMs: 5 });
    expect((await handle(command)).reply).toMatchObject({ ok: false, error: { kind: 'Unavailable' } });
    await releaseAndHear();
    expect(announced).toEqual([expected]);
  });

  it.each<[string, Gated, Command]>([
    ['a read', 'loadPushRules', readMaster],
    ['a write given up while it read, before it wrote anything', 'loadPushRules', enableMaster],
  ])('%s: nothing is announced', async (_, gated, command) => {
    const { handle, announced, releaseAndSettle } = await world(gated, { operationTimeoutMs: 5 });
    expect((await handle(command)).reply).toMatchObject({ ok: false, error: { kind: 'Unavailable' } });
    await releaseAndSettle();
    expect(announced).toEqual([]);
  });
});
