import { describe, expect, it } from 'vitest';
import type { CompiledRuleset } from '../../src/evaluation/compiled-ruleset.js';
import type { EvaluateRequest } from '../../src/evaluation/evaluate-request.js';
import { matrixError } from '../../src/errors/error-catalogue.js';
import { serverDefaultRuleset, DEFAULT_RULES_REVISION } from '../../src/push-rules/server-default-rules.js';
import { fail, ok } from '../../src/result/result.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { StoreUnavailableError, type PushStore } from '../../src/store/push-store.js';
import { EvaluateService, type EvaluateServiceOptions } from '../../src/service/evaluate-service.js';
import { RulesetCache } from '../../src/service/ruleset-cache.js';
import { aBody, aMessage, aRoom, SENDER } from '../support/evaluation-builders.js';
import { aContentRule } from '../support/builders.js';
import { wrapStore } from '../support/store-doubles.js';
import { encodeReply, type Reply } from '../../src/contract/reply.js';

const user = (n: number) => `@u${n}:example.org`;
const recipients = (...ns: number[]) => ns.map((n) => ({ user_id: user(n) }));
const wire = (outcome: { readonly reply: Reply }): unknown => JSON.parse(encodeReply(outcome.reply));

function aRequest(overrides: Partial<EvaluateRequest> = {}): EvaluateRequest {
  return {
    event: aBody('lunch at noon?'),
    room: aRoom(),
    recipients: recipients(0, 1, 2),
    explain: true,
    ...overrides,
  };
}

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
  return new EvaluateService(store, { cache, loadChunkSize: 100, sliceMs: 20, ...overrides });
}

async function withKeyword(store: PushStore, userId: string, keyword: string) {
  const ruleset = serverDefaultRuleset(userId);
  const rule = aContentRule({
    rule_id: `kw-${keyword}`,
    pattern: keyword,
    actions: ['notify', { set_tweak: 'keyword' }],
  });
  await store.savePushRules(userId, 0, { ...ruleset, content: [rule, ...ruleset.content] }, DEFAULT_RULES_REVISION);
}

describe('EvaluateService.handleBatch', () => {
  it("answers each event exactly as the single form does, in the request's order", async () => {
    const store = new InMemoryPushStore();
    await withKeyword(store, user(1), 'lunch');
    await withKeyword(store, user(3), 'meeting');
    const requests = [
      aRequest(),
      aRequest({ event: aBody('the meeting moved'), recipients: recipients(1, 3), compact: true }),
      // The sender of one event is a recipient of another.
      aRequest({
        event: aMessage({ sender: user(0) }, { body: 'lunch?' }),
        recipients: [...recipients(0, 1), { user_id: SENDER }],
      }),
    ];
    const batch = await aService(store).handleBatch({ op: 'evaluate_batch', events: requests.map((r) => ok(r)) });
    const single = aService(store);
    const alone = await Promise.all(requests.map(async (request) => single.handle({ op: 'evaluate', request })));
    expect(wire(batch)).toEqual({ ok: true, body: { results: alone.map(wire) } });
    expect(batch.stats).toMatchObject({ recipients: 8, notified: 7 });
  });

  it('reads the recipients of all its events once, as one list without repeats', async () => {
    const { store, loads } = countingStore();
    const service = aService(store, { loadChunkSize: 1000 });
    await service.handleBatch({
      op: 'evaluate_batch',
      events: [ok(aRequest({ recipients: recipients(0, 1) })), ok(aRequest({ recipients: recipients(1, 2, 3) }))],
    });
    expect(loads).toEqual([[user(0), user(1), user(2), user(3)]]);
  });

  it('keeps the error of an entry refused when parsing and evaluates the others', async () => {
    const service = aService(new InMemoryPushStore());
    const outcome = await service.handleBatch({
      op: 'evaluate_batch',
      events: [fail(matrixError('BadJson', 'room.member_count must be integer.')), ok(aRequest())],
    });
    expect(wire(outcome)).toMatchObject({
      ok: true,
      body: {
        results: [
          {
            ok: false,
            error: { kind: 'BadJson', errcode: 'M_BAD_JSON', error: 'room.member_count must be integer.', status: 400 },
          },
          { ok: true, body: { evaluated: 3 } },
        ],
      },
    });
  });

  it("answers every entry that needed the store's read with its failure, and keeps the refused entries' own errors", async () => {
    const store = wrapStore(new InMemoryPushStore(), {
      loadManyPushRules: async () => Promise.reject(new StoreUnavailableError('down')),
    });
    const outcome = await aService(store).handleBatch({
      op: 'evaluate_batch',
      events: [ok(aRequest()), fail(matrixError('TooLarge', 'The event is larger than 65536 bytes.')), ok(aRequest())],
    });
    const unavailable = { ok: false, error: { kind: 'Unavailable', status: 503 } };
    expect(wire(outcome)).toMatchObject({
      ok: true,
      body: { results: [unavailable, { ok: false, error: { kind: 'TooLarge' } }, unavailable] },
    });
    expect(outcome.cause).toBe('down');
  });
});
