import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CompiledRuleset } from '../../src/evaluation/compiled-ruleset.js';
import type { EvaluateRequest } from '../../src/evaluation/evaluate-request.js';
import { MESSAGES } from '../../src/errors/error-catalogue.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { StoreUnavailableError, type LoadedPushRules, type PushStore } from '../../src/store/push-store.js';
import type { AbandonReason } from '../../src/service/bounded-store.js';
import {
  EvaluateService,
  type EvaluateOutcome,
  type EvaluateServiceOptions,
} from '../../src/service/evaluate-service.js';
import { RulesetCache } from '../../src/service/ruleset-cache.js';
import { CONTRACT_KINDS } from '../support/expect-result.js';
import { aBody, aRoom } from '../support/evaluation-builders.js';
import { wrapStore } from '../support/store-doubles.js';

/**
 * `evaluate` under a deadline: no store read is started for an evaluation
 * once its deadline has passed, and it is answered `Unavailable` by then if
 * its reads have not come back. A read other evaluations joined is theirs
 * too, so it is bounded by the operation timeout, not by one deadline.
 * Fake clock and timers; stores are object literals.
 */
const T0 = Date.UTC(2026, 0, 1);
const DEADLINE_PASSED = {
  ok: false,
  error: { kind: 'Unavailable', ...CONTRACT_KINDS.Unavailable, error: MESSAGES.deadlinePassed },
};
const user = (n: number) => `@u${n}:example.org`;
const recipients = (count: number) => Array.from({ length: count }, (_, i) => ({ user_id: user(i) }));
const evaluation = (request: Partial<EvaluateRequest> = {}) =>
  ({
    op: 'evaluate',
    request: { event: aBody('lunch?'), room: aRoom(), recipients: recipients(3), ...request },
  }) as const;

/** A store whose bulk reads are recorded, and run `onRead` first. */
function reads(onRead: (users: readonly string[], index: number) => Promise<void> | void = () => undefined) {
  const inner = new InMemoryPushStore();
  const loads: (readonly string[])[] = [];
  const store: PushStore = wrapStore(inner, {
    loadManyPushRules: async (users): Promise<ReadonlyMap<string, LoadedPushRules>> => {
      loads.push(users);
      await onRead(users, loads.length - 1);
      return inner.loadManyPushRules(users);
    },
  });
  return { store, loads };
}

function aService(store: PushStore, overrides: Partial<EvaluateServiceOptions> = {}) {
  const cache = new RulesetCache<CompiledRuleset>({ maxEntries: 1000, maxBytes: 1 << 30, maxStalenessMs: 3_600_000 });
  const abandoned: [string, AbandonReason][] = [];
  const observer = {
    storeOperationAbandoned: (operation: string, reason: AbandonReason) => void abandoned.push([operation, reason]),
  };
  const service = new EvaluateService(store, { cache, loadChunkSize: 100, sliceMs: 1000, observer, ...overrides });
  return { service, cache, abandoned };
}

beforeEach(() => {
  vi.useFakeTimers({ now: T0, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('EvaluateService under a deadline', () => {
  it.each<[string, boolean, object, number]>([
    ['recipients to read: Unavailable, nothing read', false, DEADLINE_PASSED, 0],
    ['every recipient cached: served, nothing to read', true, { ok: true }, 0],
  ])('a deadline already passed, %s', async (_case, cached, reply, storeReads) => {
    const { store, loads } = reads();
    const { service, abandoned } = aService(store);
    if (cached) await service.handle(evaluation());
    const before = loads.length;
    const outcome = await service.handle(evaluation(), { deadline: Date.now() });
    expect(outcome.reply).toMatchObject(reply);
    expect(loads.length - before).toBe(storeReads);
    expect(abandoned).toEqual(cached ? [] : [['loadManyPushRules', 'not-started']]);
  });

  it('chunks not read by the deadline are not read at all', async () => {
    // Each read takes 600 ms; the deadline is at 1 s.
    const { store, loads } = reads(() => void vi.setSystemTime(Date.now() + 600));
    const { service } = aService(store, { loadChunkSize: 1, loadConcurrency: 1 });
    const outcome = await service.handle(evaluation({ recipients: recipients(5) }), { deadline: T0 + 1000 });
    expect(outcome).toMatchObject({ reply: DEADLINE_PASSED, deadlinePassed: true });
    expect(loads).toEqual([[user(0)], [user(1)]]);
  });

  it('a read that stalls: answered at the deadline; the read itself is given up at the operation timeout', async () => {
    const { store } = reads(async () => new Promise<never>(() => undefined));
    const { service, abandoned } = aService(store, { operationTimeoutMs: 4000 });
    let outcome: EvaluateOutcome | undefined;
    void service.handle(evaluation(), { deadline: T0 + 1000 }).then((o) => {
      outcome = o;
    });
    await vi.advanceTimersByTimeAsync(999);
    expect(outcome).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(outcome).toMatchObject({ reply: DEADLINE_PASSED, deadlinePassed: true });
    expect(abandoned).toEqual([]);
    await vi.advanceTimersByTimeAsync(3000);
    expect(abandoned).toEqual([['loadManyPushRules', 'timeout']]);
  });

  it("a read joined by a later evaluation is not cut short by the first one's deadline", async () => {
    let release: () => void = () => undefined;
    const { store, loads } = reads(async () => new Promise<void>((resolve) => (release = resolve)));
    const { service } = aService(store, { operationTimeoutMs: 4000 });
    const outcomes: Record<string, EvaluateOutcome> = {};
    void service.handle(evaluation(), { deadline: T0 + 1000 }).then((o) => (outcomes['first'] = o));
    void service.handle(evaluation(), { deadline: T0 + 3000 }).then((o) => (outcomes['joined'] = o));
    await vi.advanceTimersByTimeAsync(1000);
    expect(outcomes['first']).toMatchObject({ reply: DEADLINE_PASSED });
    expect(outcomes['joined']).toBeUndefined();
    release();
    await vi.advanceTimersByTimeAsync(0);
    expect(outcomes['joined']?.reply).toMatchObject({ ok: true });
    expect(loads).toHaveLength(1);
  });

  it('an evaluation that joined a read its deadline-passed owner will not start reads those users itself', async () => {
    let release: () => void = () => undefined;
    const { store, loads } = reads(async (_users, index) => {
      if (index === 0) await new Promise<void>((resolve) => (release = resolve));
    });
    const { service } = aService(store, { loadChunkSize: 1, loadConcurrency: 1 });
    const outcomes: Record<string, EvaluateOutcome> = {};
    void service
      .handle(evaluation({ recipients: recipients(2) }), { deadline: T0 + 1000 })
      .then((o) => (outcomes['owner'] = o));
    // Joins both of the owner's reads: the one under way and the one to come.
    void service.handle(evaluation({ recipients: recipients(2) })).then((o) => (outcomes['joiner'] = o));
    await vi.advanceTimersByTimeAsync(1000);
    expect(outcomes['owner']).toMatchObject({ reply: DEADLINE_PASSED });
    release();
    await vi.advanceTimersByTimeAsync(0);
    // The owner's deadline does not fail the joiner: the read it never started is the joiner's own.
    expect(loads).toEqual([[user(0)], [user(1)]]);
    expect(outcomes['joiner']?.reply).toMatchObject({ ok: true });
    expect(outcomes['joiner']?.stats).toMatchObject({ recipients: 2, loaded: 1, storeQueries: 1 });
  });

  it('an evaluation that joined a read which failed answers that failure (Unavailable: try again)', async () => {
    let fail: (error: Error) => void = () => undefined;
    const { store } = reads(async () => new Promise<void>((_resolve, reject) => (fail = reject)));
    const { service } = aService(store);
    const outcomes: EvaluateOutcome[] = [];
    void service.handle(evaluation()).then((o) => outcomes.push(o));
    void service.handle(evaluation()).then((o) => outcomes.push(o));
    await vi.advanceTimersByTimeAsync(0);
    fail(new StoreUnavailableError('gone'));
    await vi.advanceTimersByTimeAsync(0);
    expect(outcomes.map((o) => o.reply)).toMatchObject([
      { ok: false, error: { kind: 'Unavailable', error: MESSAGES.storeUnavailable } },
      { ok: false, error: { kind: 'Unavailable', error: MESSAGES.storeUnavailable } },
    ]);
  });
});
