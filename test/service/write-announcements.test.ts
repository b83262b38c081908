import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging/logger.js';
import { CachedPusherLookup } from '../../src/delivery-service/cached-pusher-lookup.js';
import { RejectedPushers } from '../../src/delivery-service/rejected-pushers.js';
import { Evaluator } from '../../src/evaluate-threads/evaluator.js';
import type { SynapseUserRows } from '../../src/import/map-user.js';
import { runImport } from '../../src/import-io/run-import.js';
import type { SynapseReader } from '../../src/import-io/synapse-reader.js';
import type { ChangeEvent } from '../../src/service/change-event.js';
import type { Command } from '../../src/service/command.js';
import { PushService } from '../../src/service/push-service.js';
import { RulesetCache } from '../../src/service/ruleset-cache.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { StoreUnavailableError, type LoadedPushRules, type PushStore } from '../../src/store/push-store.js';
import { ALICE, aPusherSetAction } from '../support/builders.js';
import { DEFAULT_CONFIG, DEFAULT_LIMITS } from '../support/default-config.js';
import { aBody, aRoom } from '../support/evaluation-builders.js';
import { wrapStore } from '../support/store-doubles.js';
import { aPusherRow, aRuleRow } from '../support/synapse-rows.js';

/**
 * The invariant of docs/architecture.md#caches-and-change-events, as one
 * table: every write path that changes a user's rules or pushers announces
 * them (which users, which types), and those events drop the user from
 * every cache a worker keeps (the read cache, the evaluate cache, the
 * delivery pusher cache), routed as `worker-process.ts` routes them.
 */
const BOB = '@bob:example.org';
const CAROL = '@carol:example.org';
const IMPORTED = '@imported:example.org';
const MASTER = { scope: 'global', kind: 'override', ruleId: '.m.rule.master' } as const;
const MY_RULE = { scope: 'global', kind: 'override', ruleId: 'my.rule' } as const;
const SERVICE = {
  maxWriteAttempts: 4,
  backoff: { baseMs: 0, maxMs: 0 },
  pusherPolicy: { allowInsecureGateways: false },
  limits: DEFAULT_LIMITS,
};
const phone = (pushkey: string) => aPusherSetAction({ pushkey });

async function world() {
  const store = new InMemoryPushStore();
  const seed = new PushService(store, SERVICE);
  for (const user of [ALICE, BOB]) await seed.handle({ op: 'get_pushrules', userId: user });
  await seed.handle({
    op: 'set_pushrule',
    userId: ALICE,
    request: { ...MY_RULE, body: { actions: ['notify'], conditions: [] } },
  });
  await seed.handle({ op: 'set_pusher', userId: ALICE, action: phone('alice-phone'), deviceId: 'PHONE' });
  await seed.handle({ op: 'set_pusher', userId: BOB, action: phone('bob-phone'), deviceId: 'PHONE' });
  const late: ChangeEvent[] = [];
  let heardLate: (() => void) | undefined;
  const readCache = new RulesetCache<LoadedPushRules>({ maxEntries: 100, maxBytes: 1 << 30, maxStalenessMs: 600_000 });
  const service = (on: PushStore = store, operationTimeoutMs?: number) =>
    new PushService(on, {
      ...SERVICE,
      readCache,
      ...(operationTimeoutMs === undefined ? {} : { operationTimeoutMs }),
      announceLate: async (changes) => {
        late.push(...changes);
        heardLate?.();
        return Promise.resolve();
      },
    });
  const evaluator = new Evaluator({
    evaluate: { ...DEFAULT_CONFIG.evaluate, threads: 0, maxStalenessMs: 600_000 },
    mongodb: DEFAULT_CONFIG.mongodb,
    maxJsonDepth: 32,
    store,
    logger: createLogger('silent'),
  });
  const pushers = new CachedPusherLookup(store, { maxBytes: 1 << 30, maxEntries: 100, maxStalenessMs: 60_000 });
  /** Each cache holds the user: read and evaluated once, their pushers listed. */
  const fill = async (users: readonly string[]) => {
    const reader = service();
    for (const userId of users) await reader.handle({ op: 'get_pushrule_enabled', userId, address: MASTER });
    const body = {
      op: 'evaluate',
      event: aBody('hello'),
      room: aRoom(),
      recipients: users.map((u) => ({ user_id: u })),
    };
    await evaluator.run(Buffer.from(JSON.stringify(body)), { deadline: undefined });
    await pushers.listPushersOfUsers(users);
  };
  /** What a worker does on each change event it hears (worker-process.ts, `changes`). */
  const hear = (events: readonly ChangeEvent[]) => {
    for (const event of events) {
      if (event.type === 'm.push_rules') {
        readCache.invalidate(event.user_id);
        evaluator.invalidate(event.user_id);
      } else pushers.pushersChanged(event.user_id);
    }
  };
  const whenLate = async () =>
    new Promise<void>((resolve) => {
      heardLate = resolve;
    });
  return { store, service, late, whenLate, readCache, evaluator, pushers, fill, hear };
}

type World = Awaited<ReturnType<typeof world>>;

/** A write path: what it changes, run; the change events it announced. */
interface Row {
  readonly path: string;
  readonly run: (w: World) => Promise<readonly ChangeEvent[]>;
  readonly announces: readonly (readonly [string, ChangeEvent['type']])[];
}

const served = (command: Command, messageId?: string) => async (w: World) =>
  (await w.service().handle(command, { messageId })).changes ?? [];

/** A reader over one Synapse user, as the importer reads it. */
function oneUserReader(rows: SynapseUserRows): SynapseReader {
  return {
    countUsers: async () => Promise.resolve(1),
    async *batches() {
      await Promise.resolve();
      yield [rows];
    },
    close: async () => Promise.resolve(),
  };
}

const ROWS: readonly Row[] = [
  {
    path: 'set_pushrule',
    run: served({ op: 'set_pushrule', userId: ALICE, request: { ...MY_RULE, ruleId: 'new', body: { actions: [] } } }),
    announces: [[ALICE, 'm.push_rules']],
  },
  {
    path: 'delete_pushrule',
    run: served({ op: 'delete_pushrule', userId: ALICE, address: MY_RULE }),
    announces: [[ALICE, 'm.push_rules']],
  },
  {
    path: 'set_pushrule_actions',
    run: served({ op: 'set_pushrule_actions', userId: ALICE, address: MASTER, actions: ['notify'] }),
    announces: [[ALICE, 'm.push_rules']],
  },
  {
    path: 'set_pushrule_enabled',
    run: served({ op: 'set_pushrule_enabled', userId: ALICE, address: MASTER, enabled: true }),
    announces: [[ALICE, 'm.push_rules']],
  },
  {
    path: "get_pushrules storing a new user's defaults",
    run: served({ op: 'get_pushrules', userId: CAROL }),
    announces: [[CAROL, 'm.push_rules']],
  },
  {
    path: 'set_pusher',
    run: served({ op: 'set_pusher', userId: ALICE, action: phone('new-phone'), deviceId: 'PHONE' }),
    announces: [[ALICE, 'm.pushers']],
  },
  {
    path: "set_pusher taking another user's pushkey (append false)",
    run: served({ op: 'set_pusher', userId: BOB, action: phone('alice-phone'), deviceId: 'PHONE' }),
    announces: [
      [ALICE, 'm.pushers'],
      [BOB, 'm.pushers'],
    ],
  },
  {
    path: 'set_pusher retried after its version bump failed (its record missing)',
    run: async (w) => {
      let failed = false;
      const flaky = wrapStore(w.store, {
        bumpPushersVersion: async (userId, record) => {
          if (!failed) {
            failed = true;
            throw new StoreUnavailableError('primary stepped down');
          }
          return w.store.bumpPushersVersion(userId, record);
        },
      });
      const command: Command = { op: 'set_pusher', userId: ALICE, action: phone('new-phone'), deviceId: 'PHONE' };
      await w.service(flaky).handle(command, { messageId: 'm1' });
      return (await w.service(flaky).handle(command, { messageId: 'm1' })).changes ?? [];
    },
    announces: [[ALICE, 'm.pushers']],
  },
  {
    path: 'delete_pushers',
    run: served({ op: 'delete_pushers', userId: ALICE, devices: { all: true }, includeEmail: false }),
    announces: [[ALICE, 'm.pushers']],
  },
  {
    path: 'delete_user_data',
    run: served({ op: 'delete_user_data', userId: ALICE }, 'erase'),
    announces: [
      [ALICE, 'm.push_rules'],
      [ALICE, 'm.pushers'],
    ],
  },
  {
    path: 'delete_user_data answered from its record',
    run: async (w) => {
      await w.service().handle({ op: 'delete_user_data', userId: ALICE }, { messageId: 'erase' });
      return (
        (await w.service().handle({ op: 'delete_user_data', userId: ALICE }, { messageId: 'erase' })).changes ?? []
      );
    },
    announces: [
      [ALICE, 'm.push_rules'],
      [ALICE, 'm.pushers'],
    ],
  },
  {
    path: 'a rule write applied after its Unavailable (operationTimeoutMs)',
    run: async (w) => {
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const slow = wrapStore(w.store, {
        savePushRules: async (...args) => {
          await gate;
          return w.store.savePushRules(...args);
        },
      });
      const command: Command = { op: 'set_pushrule_enabled', userId: ALICE, address: MASTER, enabled: true };
      const outcome = await w.service(slow, 5).handle(command);
      expect(outcome.reply).toMatchObject({ ok: false, error: { kind: 'Unavailable' } });
      const heard = w.whenLate();
      release();
      await heard;
      return w.late;
    },
    announces: [[ALICE, 'm.push_rules']],
  },
  {
    path: 'the import (published before its import_pending marks are cleared)',
    run: async (w) => {
      const order: string[] = [];
      const published: ChangeEvent[] = [];
      const store = w.store;
      await runImport({
        reader: oneUserReader({
          userId: IMPORTED,
          known: true,
          rules: [aRuleRow({ user_name: IMPORTED })],
          enables: [],
          pushers: [aPusherRow({ user_name: IMPORTED })],
        }),
        store: {
          importUsers: async (users, options) => store.importUsers(users, options),
          finishImports: async (userIds) => {
            order.push('marks cleared');
            return store.finishImports(userIds);
          },
        },
        events: {
          publish: async (events) => {
            order.push('published');
            published.push(...events);
            return Promise.resolve();
          },
          close: async () => Promise.resolve(),
        },
        report: { write: async () => Promise.resolve(), close: async () => Promise.resolve() },
        progress: { update: () => undefined, done: () => undefined },
        policy: { allowInsecureGateways: false },
        batchSize: 10,
        overwrite: false,
        stop: new AbortController().signal,
      });
      expect(order).toEqual(['published', 'marks cleared']);
      return published;
    },
    announces: [
      [IMPORTED, 'm.push_rules'],
      [IMPORTED, 'm.pushers'],
    ],
  },
  {
    path: 'a pusher a gateway rejected, removed',
    run: async (w) => {
      const announced: ChangeEvent[] = [];
      const remover = new RejectedPushers(
        w.store,
        async (change) => {
          announced.push(change);
          return Promise.resolve(true);
        },
        createLogger('silent'),
      );
      // The registration the rejected request was sent for: the one stored (its URL, set before now).
      const { url } = phone('alice-phone').data;
      await remover.removeRejected({
        userId: ALICE,
        appId: 'org.example.app',
        pushkey: 'alice-phone',
        url,
        setAtMost: Date.now(),
      });
      return announced;
    },
    announces: [[ALICE, 'm.pushers']],
  },
];

const sortedPairs = (pairs: readonly (readonly [string, string])[]) => [...pairs].map((p) => p.join(' ')).sort();

describe('every write path announces what it changed, and its events drop the user from every cache', () => {
  for (const row of ROWS) {
    it(`${row.path}: announces ${row.announces.map(([u, t]) => `${t} of ${u}`).join(', ')}`, async () => {
      const w = await world();
      const users = [...new Set(row.announces.map(([user]) => user))];
      await w.fill(users);
      expect(w.readCache.size).toBe(users.length);
      expect(w.evaluator.cache.size).toBe(users.length);
      expect(w.pushers.stats.size).toBe(users.length);
      const events = await row.run(w);
      expect(sortedPairs(events.map((event) => [event.user_id, event.type]))).toEqual(sortedPairs(row.announces));
      w.hear(events);
      const rulesChanged = row.announces.some(([, type]) => type === 'm.push_rules');
      const pushersChanged = row.announces.some(([, type]) => type === 'm.pushers');
      // Dropped from the caches of what changed (the others keep what is still true).
      if (rulesChanged) expect([w.readCache.size, w.evaluator.cache.size]).toEqual([0, 0]);
      if (pushersChanged) expect(w.pushers.stats.size).toBe(0);
    });
  }

  it('a lost subscription drops everyone from every cache', async () => {
    const w = await world();
    await w.fill([ALICE, BOB]);
    // What `subscriptionReset` does (worker-process.ts).
    w.readCache.clear();
    w.evaluator.clear();
    w.pushers.clear();
    expect([w.readCache.size, w.evaluator.cache.size, w.pushers.stats.size]).toEqual([0, 0, 0]);
  });
});
