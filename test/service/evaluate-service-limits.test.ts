import { describe, expect, it } from 'vitest';
import type { CompiledRuleset } from '../../src/evaluation/compiled-ruleset.js';
import type { EvaluateRequest } from '../../src/evaluation/evaluate-request.js';
import { MESSAGES, matrixError } from '../../src/errors/error-catalogue.js';
import { fail, ok } from '../../src/result/result.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { EvaluateService, type EvaluateServiceOptions } from '../../src/service/evaluate-service.js';
import { RulesetCache } from '../../src/service/ruleset-cache.js';
import { encodeReply, type Reply } from '../../src/contract/reply.js';
import { aBody, aRoom } from '../support/evaluation-builders.js';

/*
 * What bounds the work and the reply of one evaluate message once it is
 * parsed: the encoded reply's bytes (`maxReplyBytes`, TooLarge, and the
 * service keeps serving), and the deadline, checked between slices of
 * evaluation as well as before each store read.
 */

const user = (n: number) => `@u${n}:example.org`;
const recipients = (count: number) => Array.from({ length: count }, (_, i) => ({ user_id: user(i) }));
const wire = (outcome: { readonly reply: Reply }): unknown => JSON.parse(encodeReply(outcome.reply));
const replyBytes = (outcome: { readonly reply: Reply }) => Buffer.byteLength(encodeReply(outcome.reply));

function aRequest(overrides: Partial<EvaluateRequest> = {}): EvaluateRequest {
  // The default form names every notified recipient: its reply grows with the room.
  return { event: aBody('lunch at noon?'), room: aRoom(), recipients: recipients(3), ...overrides };
}

function aService(overrides: Partial<EvaluateServiceOptions> = {}) {
  const cache = new RulesetCache<CompiledRuleset>({ maxEntries: 100_000, maxBytes: 1 << 30, maxStalenessMs: 60_000 });
  return new EvaluateService(new InMemoryPushStore(), { cache, loadChunkSize: 100, sliceMs: 20, ...overrides });
}

const REPLY_TOO_LARGE = (max: number) => ({
  ok: false,
  error: {
    kind: 'TooLarge',
    errcode: 'M_TOO_LARGE',
    status: 413,
    error: `The reply would be larger than ${max} bytes: ask for the compact form (runs), or name fewer recipients or events per request.`,
  },
});

describe('EvaluateService: the reply cap (maxReplyBytes)', () => {
  it('answers a reply as large as the cap, and TooLarge for one a byte larger, then keeps serving', async () => {
    const large = { op: 'evaluate', request: aRequest({ recipients: recipients(200) }) } as const;
    const size = replyBytes(await aService().handle(large));
    expect(wire(await aService({ maxReplyBytes: size }).handle(large))).toMatchObject({ ok: true });
    const capped = aService({ maxReplyBytes: size - 1 });
    expect(wire(await capped.handle(large))).toEqual(REPLY_TOO_LARGE(size - 1));
    expect(wire(await capped.handle({ op: 'evaluate', request: aRequest() }))).toMatchObject({ ok: true });
  });

  it('in a batch, fails alone an event whose own reply is over the cap, and answers the others', async () => {
    const service = aService({ maxReplyBytes: 2_000 });
    const outcome = await service.handleBatch({
      op: 'evaluate_batch',
      events: [ok(aRequest()), ok(aRequest({ recipients: recipients(200) })), ok(aRequest())],
    });
    expect(wire(outcome)).toMatchObject({
      ok: true,
      body: { results: [{ ok: true }, REPLY_TOO_LARGE(2_000), { ok: true }] },
    });
    expect(replyBytes(outcome)).toBeLessThanOrEqual(2_000);
  });

  it('refuses a batch whose results together are over the cap, each within it', async () => {
    const service = aService({ maxReplyBytes: 2_000 });
    const each = aRequest({ recipients: recipients(20) });
    const alone = replyBytes(await service.handle({ op: 'evaluate', request: each }));
    const events = Array.from({ length: Math.ceil(2_000 / alone) + 1 }, () => ok(each));
    expect(wire(await service.handleBatch({ op: 'evaluate_batch', events }))).toEqual({
      ok: false,
      error: {
        kind: 'TooLarge',
        errcode: 'M_TOO_LARGE',
        status: 413,
        error:
          'The reply would be larger than 2000 bytes: ask for the compact form (runs), or name fewer recipients or events per request.',
      },
    });
    // Errors count too: a reply is capped whatever it holds.
    const refused = Array.from({ length: 40 }, () => fail(matrixError('BadJson', 'x'.repeat(100))));
    expect(wire(await service.handleBatch({ op: 'evaluate_batch', events: refused }))).toMatchObject({
      ok: false,
      error: { kind: 'TooLarge' },
    });
  });
});

describe('EvaluateService: the deadline between slices of evaluation', () => {
  /** A slice clock that ends every slice at once, and a wall clock that passes the deadline after `turns` slices. */
  function clocks(turns: number) {
    let slices = 0;
    let tick = 0;
    return {
      clock: () => (tick += 1000),
      now: () => (slices >= turns ? 2_000 : 1_000),
      counted: () => {
        slices += 1;
      },
    };
  }

  it.each([
    ['the single form', 'handle'],
    ['the batch form', 'handleBatch'],
  ] as const)('in %s, stops at the deadline once the rules are read, answering Unavailable', async (_name, method) => {
    const time = clocks(2);
    const service = aService({
      sliceMs: 1,
      clock: () => {
        time.counted();
        return time.clock();
      },
      now: time.now,
    });
    const request = aRequest({ recipients: recipients(50) });
    const outcome =
      method === 'handle'
        ? await service.handle({ op: 'evaluate', request }, { deadline: 1_500 })
        : await service.handleBatch({ op: 'evaluate_batch', events: [ok(request), ok(request)] }, { deadline: 1_500 });
    const unavailable = {
      ok: false,
      error: { kind: 'Unavailable', errcode: 'M_UNKNOWN', status: 503, error: MESSAGES.deadlinePassed },
    };
    if (method === 'handle') expect(wire(outcome)).toEqual(unavailable);
    else expect(wire(outcome)).toEqual({ ok: true, body: { results: [unavailable, unavailable] } });
    expect(outcome.deadlinePassed).toBe(true);
  });

  it('finishes an evaluation whose deadline does not pass', async () => {
    const time = clocks(Infinity);
    const service = aService({ sliceMs: 1, clock: time.clock, now: time.now });
    const outcome = await service.handle(
      { op: 'evaluate', request: aRequest({ recipients: recipients(50) }) },
      { deadline: 1_500 },
    );
    expect(wire(outcome)).toMatchObject({ ok: true, body: { evaluated: 50 } });
  });
});
