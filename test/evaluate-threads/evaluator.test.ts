import { describe, expect, it, vi } from 'vitest';
import type { Config } from '../../src/config/config-schema.js';
import type { EvaluateRun } from '../../src/consumer/evaluate-queue.js';
import type { EvaluatedOn } from '../../src/consumer/split-evaluate-runner.js';
import { encodeReply } from '../../src/contract/reply.js';
import type { EvaluatePoolOptions } from '../../src/evaluate-threads/evaluate-pool.js';
import { Evaluator, type ThreadPool } from '../../src/evaluate-threads/evaluator.js';
import { createLogger } from '../../src/logging/logger.js';
import { DEFAULT_RULES_REVISION, serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import type { PushStore } from '../../src/store/push-store.js';
import { wrapStore } from '../support/store-doubles.js';
import { aContentRule } from '../support/builders.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';
import { aBody, aRoom } from '../support/evaluation-builders.js';

const CAROL = '@carol:example.org';
const user = (n: number) => `@u${n}:example.org`;
const POOL_ANSWER: EvaluateRun = { reply: { ok: true, body: { from: 'the pool' } } };

/** A pool that records what it is told; `run` answers POOL_ANSWER. */
function aFakePool() {
  const told = {
    runs: 0,
    invalidated: [] as string[],
    clears: 0,
    options: undefined as EvaluatePoolOptions | undefined,
  };
  const create = (options: EvaluatePoolOptions): ThreadPool => {
    told.options = options;
    return {
      run: async () => {
        told.runs += 1;
        return Promise.resolve(POOL_ANSWER);
      },
      invalidate: (userId) => told.invalidated.push(userId),
      clear: () => (told.clears += 1),
      cache: {
        size: 7,
        bytes: 700,
        stats: { hits: 1, misses: 2, invalidations: 3, staleRefreshes: 4, evictions: 5 },
      },
      close: async () => Promise.resolve(),
    };
  };
  return { told, create };
}

function anEvaluator(evaluate: Partial<Config['evaluate']> = {}, store = new InMemoryPushStore(), read?: PushStore) {
  const pool = aFakePool();
  const where: EvaluatedOn[] = [];
  const evaluator = new Evaluator({
    // Never stale within a test: only a change event can make a write visible.
    evaluate: { ...DEFAULT_CONFIG.evaluate, threads: 1, maxStalenessMs: 600_000, ...evaluate },
    mongodb: DEFAULT_CONFIG.mongodb,
    maxJsonDepth: 32,
    store: read ?? store,
    logger: createLogger('silent'),
    observer: { evaluatedOn: (on) => where.push(on), storeOperationAbandoned: () => undefined },
    createPool: pool.create,
  });
  return { evaluator, store, pool: pool.told, where };
}

const body = (recipients: readonly string[]) =>
  Buffer.from(
    JSON.stringify({
      op: 'evaluate',
      event: aBody('pizza tonight?'),
      room: aRoom(),
      recipients: recipients.map((userId) => ({ user_id: userId })),
      explain: true,
    }),
  );

async function ruleOf(evaluator: Evaluator, userId: string): Promise<unknown> {
  const run = await evaluator.run(body([userId]), { deadline: undefined });
  const reply = JSON.parse(encodeReply(run.reply)) as { body: { rule_ids: Record<string, unknown> } };
  return reply.body.rule_ids[userId];
}

async function giveKeyword(store: InMemoryPushStore, userId: string): Promise<void> {
  const ruleset = serverDefaultRuleset(userId);
  const rule = aContentRule({ rule_id: 'kw-pizza', pattern: 'pizza', actions: ['notify'] });
  await store.savePushRules(userId, 0, { ...ruleset, content: [rule, ...ruleset.content] }, DEFAULT_RULES_REVISION);
}

describe('Evaluator: small requests on the event loop, the rest in the threads', () => {
  it('answers a small request on the event loop, never asking the pool, and hands a big one to the pool', async () => {
    const { evaluator, pool, where } = anEvaluator({ inlineMaxRecipients: 2 });
    expect(await ruleOf(evaluator, CAROL)).toBe('.m.rule.message');
    expect(pool.runs).toBe(0);
    const big = await evaluator.run(body([user(1), user(2), user(3)]), { deadline: undefined });
    expect(big).toBe(POOL_ANSWER);
    expect(pool.runs).toBe(1);
    expect(where).toEqual(['event_loop', 'thread']);
  });

  it("sees a write between two small evaluations once its change event arrives, in the event loop's cache and every thread's", async () => {
    const { evaluator, store, pool } = anEvaluator();
    expect(await ruleOf(evaluator, CAROL)).toBe('.m.rule.message');
    await giveKeyword(store, CAROL);
    // Cached, and no event yet: the write is not seen (so the next step is the event's doing).
    expect(await ruleOf(evaluator, CAROL)).toBe('.m.rule.message');
    evaluator.invalidate(CAROL);
    expect(await ruleOf(evaluator, CAROL)).toBe('kw-pizza');
    expect(pool.invalidated).toEqual([CAROL]);
  });

  it('empties every cache when change events may have been missed (clear)', async () => {
    const { evaluator, store, pool } = anEvaluator();
    expect(await ruleOf(evaluator, CAROL)).toBe('.m.rule.message');
    await giveKeyword(store, CAROL);
    evaluator.clear();
    expect(await ruleOf(evaluator, CAROL)).toBe('kw-pizza');
    expect(pool.clears).toBe(1);
  });

  it.each([
    // threads, inline bounds, each thread's cache bounds, whether the event loop caches
    [1, 32, { entries: 500, bytes: 5000 }, true],
    [3, 32, { entries: 250, bytes: 2500 }, true],
    [3, 0, { entries: 333, bytes: 3333 }, false],
  ])(
    'with %i threads and inlineMaxRecipients %i, each thread caches within %o',
    async (threads, inlineMaxRecipients, bounds, eventLoop) => {
      const { evaluator, pool } = anEvaluator({
        threads,
        inlineMaxRecipients,
        cacheMaxEntries: 1000,
        cacheMaxBytes: 10_000,
      });
      expect(pool.options?.threads).toBe(threads);
      // The pool shares out what it is given, one part per thread.
      expect(Math.floor((pool.options?.data.cacheMaxEntries ?? 0) / threads)).toBe(bounds.entries);
      expect(Math.floor((pool.options?.data.cacheMaxBytes ?? 0) / threads)).toBe(bounds.bytes);
      if (eventLoop) await ruleOf(evaluator, CAROL);
      // The metrics' view: the pool's counts, plus the event loop's one entry when it evaluates.
      expect(evaluator.cache.size).toBe(7 + (eventLoop ? 1 : 0));
      expect(evaluator.cache.stats.misses).toBe(2 + (eventLoop ? 1 : 0));
    },
  );

  it('makes no pool with evaluate.threads 0, and evaluates everything on the event loop', async () => {
    const { evaluator, pool, where } = anEvaluator({ threads: 0, inlineMaxRecipients: 1 });
    const recipients = Array.from({ length: 50 }, (_, i) => user(i));
    const run = await evaluator.run(body(recipients), { deadline: undefined });
    expect(run.reply.ok).toBe(true);
    expect(run.stats?.recipients).toBe(50);
    expect(pool.options).toBeUndefined();
    expect(where).toEqual(['event_loop']);
  });

  it.each([
    [
      'invalidate',
      (evaluator: Evaluator) => {
        evaluator.invalidate(CAROL);
      },
    ],
    [
      'clear',
      (evaluator: Evaluator) => {
        evaluator.clear();
      },
    ],
  ])('never lets an evaluation taken after %s join a store read started before it', async (_name, forget) => {
    const store = new InMemoryPushStore();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let reads = 0;
    // The first read takes what the store holds now, and answers once the gate opens.
    const slow = wrapStore(store, {
      loadManyPushRules: async (users) => {
        reads += 1;
        const loaded = await store.loadManyPushRules(users);
        if (reads === 1) await gate;
        return loaded;
      },
    });
    const { evaluator } = anEvaluator({ threads: 0 }, store, slow);
    const before = ruleOf(evaluator, CAROL);
    await vi.waitFor(() => {
      expect(reads).toBe(1);
    });
    await giveKeyword(store, CAROL);
    forget(evaluator);
    const after = ruleOf(evaluator, CAROL);
    release();
    expect(await before).toBe('.m.rule.message');
    expect(await after).toBe('kw-pizza');
    expect(reads).toBe(2);
  });

  it('caps the replies it builds on the event loop at evaluate.maxReplyBytes', async () => {
    const { evaluator } = anEvaluator({ threads: 0, maxReplyBytes: 4096 });
    const recipients = Array.from({ length: 200 }, (_, i) => user(i));
    const run = await evaluator.run(body(recipients), { deadline: undefined });
    expect(run.reply).toMatchObject({ ok: false, error: { kind: 'TooLarge', status: 413 } });
    expect(await ruleOf(evaluator, CAROL)).toBe('.m.rule.message');
  });
});
