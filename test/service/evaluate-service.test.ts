import { describe, expect, it } from 'vitest';
import type { CompiledRuleset } from '../../src/evaluation/compiled-ruleset.js';
import { sharedDefaultRuleset } from '../../src/evaluation/compile-ruleset.js';
import type { EvaluateRequest } from '../../src/evaluation/evaluate-request.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { DEFAULT_RULES_REVISION } from '../../src/push-rules/server-default-rules.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { StoreFailedError, StoreUnavailableError, type PushStore } from '../../src/store/push-store.js';
import { EvaluateService, type EvaluateServiceOptions } from '../../src/service/evaluate-service.js';
import { RulesetCache } from '../../src/service/ruleset-cache.js';
import { aBody, aRoom, SENDER } from '../support/evaluation-builders.js';
import { aContentRule } from '../support/builders.js';
import { wrapStore } from '../support/store-doubles.js';
import { encodeReply, type Reply } from '../../src/contract/reply.js';

/** The reply as it goes on the wire: the body is assembled as text. */
const wire = (outcome: { readonly reply: Reply }): Reply => JSON.parse(encodeReply(outcome.reply)) as Reply;
/** The success body as it goes on the wire (undefined for a failure). */
const bodyOf = (outcome: { readonly reply: Reply }) => {
  const reply = wire(outcome);
  return reply.ok ? (reply.body as { notify: Record<string, unknown>; evaluated: number }) : undefined;
};
const user = (n: number) => `@u${n}:example.org`;
const recipients = (count: number, from = 0) => Array.from({ length: count }, (_, i) => ({ user_id: user(from + i) }));

function aRequest(overrides: Partial<EvaluateRequest> = {}): EvaluateRequest {
  return { event: aBody('lunch at noon?'), room: aRoom(), recipients: recipients(3), ...overrides };
}

/** A store that counts bulk loads and the users they asked for. */
function countingStore(inner: PushStore = new InMemoryPushStore()) {
  const loads: (readonly string[])[] = [];
  const store = wrapStore(inner, {
    loadManyPushRules: async (users) => {
      loads.push(users);
      return inner.loadManyPushRules(users);
    },
  });
  return { store, loads };
}

function aService(store: PushStore, overrides: Partial<EvaluateServiceOptions> = {}) {
  const cache = new RulesetCache<CompiledRuleset>({ maxEntries: 100_000, maxBytes: 1 << 30, maxStalenessMs: 60_000 });
  return { cache, service: new EvaluateService(store, { cache, loadChunkSize: 100, sliceMs: 20, ...overrides }) };
}

/** Gives `userId` a content rule on `keyword` whose actions are `notify` and a tweak saying so. */
async function withKeyword(store: PushStore, userId: string, keyword: string) {
  const ruleset = serverDefaultRuleset(userId);
  const rule = aContentRule({
    rule_id: `kw-${keyword}`,
    pattern: keyword,
    actions: ['notify', { set_tweak: 'keyword', value: keyword }],
  });
  await store.savePushRules(userId, 0, { ...ruleset, content: [rule, ...ruleset.content] }, DEFAULT_RULES_REVISION);
}

describe('EvaluateService', () => {
  it("evaluates every recipient with their own rules, or the defaults when they have none, and never the sender's", async () => {
    const { store, loads } = countingStore();
    await withKeyword(store, user(1), 'lunch');
    const { service } = aService(store);
    const outcome = await service.handle({
      op: 'evaluate',
      request: aRequest({ recipients: [...recipients(3), { user_id: SENDER }], explain: true }),
    });
    expect(wire(outcome)).toEqual({
      ok: true,
      body: {
        notify: {
          [user(0)]: ['notify'],
          [user(1)]: ['notify', { set_tweak: 'keyword', value: 'lunch' }],
          [user(2)]: ['notify'],
        },
        evaluated: 4,
        rule_ids: { [user(0)]: '.m.rule.message', [user(1)]: 'kw-lunch', [user(2)]: '.m.rule.message', [SENDER]: null },
      },
    });
    expect(loads).toEqual([[user(0), user(1), user(2)]]);
    expect(outcome.stats).toEqual({ recipients: 4, notified: 3, cacheHits: 0, loaded: 3, storeQueries: 1 });
  });

  it.each([
    [5000, 1000, 5],
    [5000, 999, 6],
    [1, 1000, 1],
    [0, 1000, 0],
  ])('reads %i uncached recipients in chunks of %i: %i store queries', async (count, loadChunkSize, queries) => {
    const { store, loads } = countingStore();
    const { service } = aService(store, { loadChunkSize });
    const outcome = await service.handle({ op: 'evaluate', request: aRequest({ recipients: recipients(count) }) });
    expect(loads).toHaveLength(queries);
    expect(loads.every((chunk) => chunk.length <= loadChunkSize)).toBe(true);
    expect(new Set(loads.flat()).size).toBe(count);
    expect(bodyOf(outcome)?.evaluated).toBe(count);
  });

  it('serves cached recipients from the cache and reads only the others', async () => {
    const { store, loads } = countingStore();
    const { service } = aService(store);
    await service.handle({ op: 'evaluate', request: aRequest({ recipients: recipients(3) }) });
    loads.length = 0;
    const outcome = await service.handle({ op: 'evaluate', request: aRequest({ recipients: recipients(5) }) });
    expect(loads).toEqual([[user(3), user(4)]]);
    expect(outcome.stats).toMatchObject({ cacheHits: 3, loaded: 2, storeQueries: 1 });
  });

  it('evaluations arriving while others read the same users join those reads instead of reading again', async () => {
    const { store, loads } = countingStore();
    const { service } = aService(store, { loadChunkSize: 1000 });
    const request = { op: 'evaluate', request: aRequest({ recipients: recipients(3000) }) } as const;
    const outcomes = await Promise.all([service.handle(request), service.handle(request), service.handle(request)]);
    expect(loads).toHaveLength(3);
    expect(new Set(loads.flat()).size).toBe(3000);
    for (const outcome of outcomes)
      expect(bodyOf(outcome)?.notify).toEqual(expect.objectContaining({ [user(2999)]: ['notify'] }));
    expect(outcomes.map((o) => Object.keys(bodyOf(o)?.notify ?? {}).length)).toEqual([3000, 3000, 3000]);
  });

  it('a failed read fails every evaluation that joined it, and the next one reads again', async () => {
    let fail = true;
    const inner = new InMemoryPushStore();
    const store = wrapStore(inner, {
      loadManyPushRules: async (users) => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        if (fail) throw new StoreUnavailableError('down');
        return inner.loadManyPushRules(users);
      },
    });
    const { service } = aService(store);
    const request = { op: 'evaluate', request: aRequest() } as const;
    const outcomes = await Promise.all([service.handle(request), service.handle(request)]);
    expect(outcomes.map((o) => !o.reply.ok && o.reply.error.kind)).toEqual(['Unavailable', 'Unavailable']);
    fail = false;
    expect((await service.handle(request)).reply.ok).toBe(true);
  });

  it('users without rules of their own share one compiled default ruleset in the cache', async () => {
    const { store } = countingStore();
    await withKeyword(store, user(1), 'lunch');
    const { service, cache } = aService(store);
    await service.handle({ op: 'evaluate', request: aRequest() });
    expect(cache.get(user(0))).toBe(sharedDefaultRuleset());
    expect(cache.get(user(2))).toBe(sharedDefaultRuleset());
    expect(cache.get(user(1))).not.toBe(sharedDefaultRuleset());
  });

  it('sees a change once the cache entry is invalidated', async () => {
    const { store } = countingStore();
    const { service, cache } = aService(store);
    const notifyOf = async () => {
      const outcome = await service.handle({
        op: 'evaluate',
        request: aRequest({ recipients: [{ user_id: user(1) }] }),
      });
      return bodyOf(outcome)?.notify[user(1)];
    };
    expect(await notifyOf()).toEqual(['notify']);
    await withKeyword(store, user(1), 'lunch');
    expect(await notifyOf()).toEqual(['notify']);
    cache.invalidate(user(1));
    expect(await notifyOf()).toEqual(['notify', { set_tweak: 'keyword', value: 'lunch' }]);
  });

  it('evaluates a stored ruleset that cannot be decoded as the defaults, and reports it', async () => {
    const inner = new InMemoryPushStore();
    inner.putRawPushRules(user(0), { contentJson: '{"global": 7}', defaultsRevision: DEFAULT_RULES_REVISION });
    inner.putRawPushRules(user(1), { contentJson: '{not json', defaultsRevision: DEFAULT_RULES_REVISION });
    const undecodable: string[] = [];
    const { service } = aService(inner, { onUndecodable: (userId) => undecodable.push(userId) });
    const outcome = await service.handle({
      op: 'evaluate',
      request: aRequest({ recipients: recipients(2), explain: true }),
    });
    expect(wire(outcome)).toMatchObject({
      ok: true,
      body: { rule_ids: { [user(0)]: '.m.rule.message', [user(1)]: '.m.rule.message' } },
    });
    expect(undecodable).toEqual([user(0)]);
  });

  it('answers Unavailable when the store is, with the cause for the log', async () => {
    const store = wrapStore(new InMemoryPushStore(), {
      loadManyPushRules: async () => Promise.reject(new StoreUnavailableError('server selection timed out')),
    });
    const outcome = await aService(store).service.handle({ op: 'evaluate', request: aRequest() });
    expect(wire(outcome)).toMatchObject({ ok: false, error: { kind: 'Unavailable', status: 503 } });
    expect(outcome.cause).toBe('server selection timed out');
  });

  it.each<[string, Error, string]>([
    ['a storage failure for good', new StoreFailedError('MongoDB failed: boom'), 'Database'],
    ['a bug', new TypeError('boom'), 'Internal'],
  ])('answers %s with %s (500), with the failure for the log', async (_case, boom, kind) => {
    const store = wrapStore(new InMemoryPushStore(), { loadManyPushRules: async () => Promise.reject(boom) });
    const outcome = await aService(store).service.handle({ op: 'evaluate', request: aRequest() });
    expect(wire(outcome)).toMatchObject({ ok: false, error: { kind, status: 500 } });
    expect(outcome.failure).toBe(boom);
  });

  it('yields to the event loop between slices, so other work runs during a large fan-out', async () => {
    // A clock that moves 1 ms per reading: a 20 ms slice ends after about 20 readings.
    let now = 0;
    const { store } = countingStore();
    const { service } = aService(store, { clock: () => (now += 1), loadChunkSize: 10_000 });
    let ranDuring = 0;
    const interval = setInterval(() => (ranDuring += 1), 0);
    const ticks: Promise<void>[] = [];
    const outcome = service.handle({ op: 'evaluate', request: aRequest({ recipients: recipients(5000) }) });
    // Work queued now runs only if the evaluation yields.
    for (let i = 0; i < 5; i += 1) ticks.push(new Promise((resolve) => setImmediate(resolve)));
    const result = await outcome;
    clearInterval(interval);
    await Promise.all(ticks);
    expect(wire(result).ok).toBe(true);
    expect(ranDuring).toBeGreaterThan(0);
  });
});
