import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { PushRulesClient } from '../../src/client/push-rules-client.js';
import type { ContractReply } from './support/rpc-caller.js';
import { startEvaluatingWorker, useEvaluateWorld, type EvaluatingWorker } from './support/evaluate-harness.js';
import { wrapStore } from '../support/store-doubles.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';
import type { Config } from '../../src/config/config-schema.js';
import type { EvaluatedOn } from '../../src/consumer/split-evaluate-runner.js';

const ALICE = '@alice:example.org';
/** Every request to a thread, when there are threads. */
const NO_INLINE = { inlineMaxRecipients: 0, inlineMaxBytes: 0 };
const BOB = '@bob:example.org';
const SENDER = '@sender:example.org';
/** Each mode's tests get users of their own (the modes share the database). */
let offset = 0;
const user = (n: number) => `@u${n + offset}:example.org`;

const world = useEvaluateWorld();

/** Where the workers of the tests running now evaluate: on the event loop (0) or in that many threads. */
let threads = 0;
/** With threads: the bounds of the requests evaluated on the event loop all the same (0: none). */
let inline: Pick<Config['evaluate'], 'inlineMaxRecipients' | 'inlineMaxBytes'> = NO_INLINE;
/** Where the workers of the tests running now evaluated each request. */
let evaluatedOn: EvaluatedOn[] = [];

async function aWorker(options: Omit<Parameters<typeof startEvaluatingWorker>[0], 'db'> = {}) {
  const worker = await startEvaluatingWorker({
    db: world.db,
    threads,
    ...options,
    evaluate: { ...inline, ...options.evaluate },
    observer: {
      evaluatedOn: (where) => evaluatedOn.push(where),
      storeOperationAbandoned: () => undefined,
    },
  });
  world.workers.push(worker);
  return worker;
}

function anEvaluate(body: string, recipients: readonly string[], extra: Record<string, unknown> = {}) {
  return {
    op: 'evaluate',
    event: {
      event_id: '$e',
      type: 'm.room.message',
      room_id: '!room:example.org',
      sender: SENDER,
      content: { msgtype: 'm.text', body },
    },
    room: { member_count: 12, sender_power_level: 0, notification_power_levels: { room: 50 } },
    recipients: recipients.map((userId) => ({ user_id: userId })),
    explain: true,
    ...extra,
  };
}

const keywordRule = (keyword: string) => ({
  op: 'set_pushrule',
  scope: 'global',
  kind: 'content',
  rule_id: `kw-${keyword}`,
  rule: { pattern: keyword, actions: ['notify', { set_tweak: 'highlight' }] },
});

async function evaluate(worker: EvaluatingWorker, request: unknown): Promise<ContractReply> {
  return world.caller.call(worker.evaluateQueueName, request);
}

async function write(worker: EvaluatingWorker, userId: string, request: Record<string, unknown>): Promise<void> {
  const reply = await world.caller.call(worker.names.queue, { ...request, user_id: userId });
  expect(reply).toEqual({ ok: true, body: {} });
}

function ruleOf(reply: ContractReply, userId: string): unknown {
  return (reply.body as { rule_ids: Record<string, unknown> }).rule_ids[userId];
}

/** Evaluates until `userId`'s matched rule is `ruleId`; the milliseconds it took, or undefined past `withinMs`. */
async function msUntilRule(
  worker: EvaluatingWorker,
  userId: string,
  ruleId: string,
  withinMs: number,
): Promise<number | undefined> {
  const started = Date.now();
  for (;;) {
    const reply = await evaluate(worker, anEvaluate('pizza tonight?', [userId]));
    if (ruleOf(reply, userId) === ruleId) return Date.now() - started;
    if (Date.now() - started > withinMs) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const MODES = [
  ['on the event loop', 0, NO_INLINE, 'event_loop', 'event_loop'],
  ['in an evaluation thread', 1, NO_INLINE, 'thread', 'thread'],
  [
    'in an evaluation thread, small requests on the event loop',
    1,
    {
      inlineMaxRecipients: DEFAULT_CONFIG.evaluate.inlineMaxRecipients,
      inlineMaxBytes: DEFAULT_CONFIG.evaluate.inlineMaxBytes,
    },
    'event_loop',
    'thread',
  ],
] as const;

describe.each(MODES)('evaluate through a real worker, %s', (_mode, modeThreads, modeInline, smallOn, bigOn) => {
  beforeAll(() => {
    threads = modeThreads;
    inline = modeInline;
    offset = 100_000 * MODES.findIndex((mode) => mode[0] === _mode);
    evaluatedOn = [];
  });
  afterAll(() => {
    threads = 0;
    inline = NO_INLINE;
    offset = 0;
  });

  it("answers with each recipient's actions, the sender left out, and names the rules with explain", async () => {
    const worker = await aWorker();
    await world.caller.call(worker.names.queue, { op: 'get_pushrules', user_id: ALICE });
    await write(worker, ALICE, keywordRule('pizza'));
    const reply = await evaluate(worker, anEvaluate('Pizza tonight?', [ALICE, BOB, SENDER]));
    expect(reply).toEqual({
      ok: true,
      body: {
        notify: { [ALICE]: ['notify', { set_tweak: 'highlight' }], [BOB]: ['notify'] },
        evaluated: 3,
        rule_ids: { [ALICE]: 'kw-pizza', [BOB]: '.m.rule.message', [SENDER]: null },
      },
    });
    const quiet = await evaluate(worker, anEvaluate('Pizza tonight?', [ALICE], { explain: false }));
    expect(quiet).toEqual({
      ok: true,
      body: { notify: { [ALICE]: ['notify', { set_tweak: 'highlight' }] }, evaluated: 1 },
    });
  });

  it(`answers a small request (${smallOn}) and one over the inline bounds (${bigOn}) from the same rules`, async () => {
    const worker = await aWorker({ evaluate: { maxStalenessMs: 600_000 } });
    const frank = user(104);
    const crowd = Array.from({ length: DEFAULT_CONFIG.evaluate.inlineMaxRecipients + 8 }, (_, i) => user(200 + i));
    await world.caller.call(worker.names.queue, { op: 'get_pushrules', user_id: frank });
    await write(worker, frank, keywordRule('pizza'));
    evaluatedOn = [];
    const small = await evaluate(worker, anEvaluate('pizza tonight?', [frank]));
    const big = await evaluate(worker, anEvaluate('pizza tonight?', [...crowd, frank]));
    expect(evaluatedOn).toEqual([smallOn, bigOn]);
    expect(ruleOf(small, frank)).toBe('kw-pizza');
    expect(ruleOf(big, frank)).toBe('kw-pizza');
    expect(ruleOf(big, crowd[0] ?? '')).toBe('.m.rule.message');
    // A write between the two: both paths see it at once (the change event reached every cache).
    await write(worker, frank, { op: 'delete_pushrule', scope: 'global', kind: 'content', rule_id: 'kw-pizza' });
    expect(ruleOf(await evaluate(worker, anEvaluate('pizza tonight?', [frank])), frank)).toBe('.m.rule.message');
    expect(ruleOf(await evaluate(worker, anEvaluate('pizza tonight?', [...crowd, frank])), frank)).toBe(
      '.m.rule.message',
    );
  });

  it('reflects a write at once on the worker that made it (its cache was warm)', async () => {
    const worker = await aWorker({ evaluate: { maxStalenessMs: 600_000 } });
    const carol = user(100);
    await world.caller.call(worker.names.queue, { op: 'get_pushrules', user_id: carol });
    expect(ruleOf(await evaluate(worker, anEvaluate('pizza tonight?', [carol])), carol)).toBe('.m.rule.message');
    await write(worker, carol, keywordRule('pizza'));
    expect(ruleOf(await evaluate(worker, anEvaluate('pizza tonight?', [carol])), carol)).toBe('kw-pizza');
  });

  it("reflects delete_user_data at once on its worker and by its change event on another: the user's rules are the defaults again", async () => {
    const trust = { trustedPublishers: ['guest'], evaluate: { maxStalenessMs: 600_000 } };
    const a = await aWorker(trust);
    const b = await aWorker({ ...trust, eventsExchange: a.names.amqp.eventsExchange });
    const gone = user(103);
    const asGuest = { userId: 'guest' };
    await world.caller.call(a.names.queue, { op: 'get_pushrules', user_id: gone }, asGuest);
    expect(await world.caller.call(a.names.queue, { ...keywordRule('pizza'), user_id: gone }, asGuest)).toEqual({
      ok: true,
      body: {},
    });
    for (const worker of [a, b]) {
      expect(
        ruleOf(await world.caller.call(worker.evaluateQueueName, anEvaluate('pizza tonight?', [gone]), asGuest), gone),
      ).toBe('kw-pizza');
    }
    expect(await world.caller.call(a.names.queue, { op: 'delete_user_data', user_id: gone }, asGuest)).toEqual({
      ok: true,
      body: {},
    });
    expect(
      ruleOf(await world.caller.call(a.evaluateQueueName, anEvaluate('pizza tonight?', [gone]), asGuest), gone),
    ).toBe('.m.rule.message');
    for (let i = 0; i < 250; i += 1) {
      if (
        ruleOf(await world.caller.call(b.evaluateQueueName, anEvaluate('pizza tonight?', [gone]), asGuest), gone) ===
        '.m.rule.message'
      )
        break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(
      ruleOf(await world.caller.call(b.evaluateQueueName, anEvaluate('pizza tonight?', [gone]), asGuest), gone),
    ).toBe('.m.rule.message');
  });

  it("reflects a write through worker A on worker B by A's change event, long before the staleness bound", async () => {
    const a = await aWorker();
    const b = await aWorker({ eventsExchange: a.names.amqp.eventsExchange, evaluate: { maxStalenessMs: 600_000 } });
    const dave = user(101);
    await world.caller.call(a.names.queue, { op: 'get_pushrules', user_id: dave });
    expect(ruleOf(await evaluate(b, anEvaluate('pizza tonight?', [dave])), dave)).toBe('.m.rule.message');
    await write(a, dave, keywordRule('pizza'));
    const ms = await msUntilRule(b, dave, 'kw-pizza', 5_000);
    expect(ms).toBeDefined();
    console.log(
      `[evaluate] a write through worker A reached worker B's evaluation after ${String(ms)} ms (change event)`,
    );
  });

  it('without change events, reflects the write once maxStalenessMs has passed, and not before', async () => {
    const a = await aWorker();
    // B listens on another exchange: A's events never reach it.
    const b = await aWorker({ evaluate: { maxStalenessMs: 1_500 } });
    const erin = user(102);
    await world.caller.call(a.names.queue, { op: 'get_pushrules', user_id: erin });
    expect(ruleOf(await evaluate(b, anEvaluate('pizza tonight?', [erin])), erin)).toBe('.m.rule.message');
    const written = Date.now();
    await write(a, erin, keywordRule('pizza'));
    const stale = await evaluate(b, anEvaluate('pizza tonight?', [erin]));
    // Served from the cache: the bound is what makes the write visible, not a re-read on every request.
    if (Date.now() - written < 1_000) expect(ruleOf(stale, erin)).toBe('.m.rule.message');
    // Every evaluation that starts once the bound has passed sees the write;
    // one that started before it may still be served the old rules. Judged
    // by when each request started, so that a slow machine cannot fail it.
    let lastStaleStart = written;
    const deadline = written + 1_500 + 5_000;
    let seen = false;
    while (!seen && Date.now() < deadline) {
      const startedAt = Date.now();
      seen = ruleOf(await evaluate(b, anEvaluate('pizza tonight?', [erin])), erin) === 'kw-pizza';
      if (!seen) lastStaleStart = startedAt;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(seen).toBe(true);
    expect(lastStaleStart - written).toBeLessThan(1_500);
  });

  // The store is counted through a wrapper: on the event loop only (a thread reads its own store).
  it.skipIf(modeThreads > 0)(
    'reads 5,000 uncached recipients in ceil(5000 / loadChunkSize) store queries',
    async () => {
      let queries = 0;
      const worker = await aWorker({
        // The second request must find them all cached, however slow the first was on a loaded machine.
        evaluate: { loadChunkSize: 1_000, maxStalenessMs: 600_000 },
        wrapStore: (inner) =>
          wrapStore(inner, {
            loadManyPushRules: async (users) => {
              queries += 1;
              return inner.loadManyPushRules(users);
            },
          }),
      });
      const recipients = Array.from({ length: 5_000 }, (_, i) => user(10_000 + i));
      const reply = await evaluate(worker, anEvaluate('hello everyone', recipients, { explain: false }));
      expect(reply.ok).toBe(true);
      expect((reply.body as { evaluated: number }).evaluated).toBe(5_000);
      expect(Object.keys((reply.body as { notify: object }).notify)).toHaveLength(5_000);
      expect(queries).toBe(5);
      await evaluate(worker, anEvaluate('hello again', recipients, { explain: false }));
      expect(queries).toBe(5);
    },
  );
});

describe.each(MODES)('PushRulesClient.evaluate through a real worker, %s', (_mode, modeThreads, modeInline) => {
  beforeAll(() => {
    threads = modeThreads;
    inline = modeInline;
  });
  afterAll(() => {
    threads = 0;
    inline = NO_INLINE;
  });

  it('resolves with the reply body, and rejects with PushRulesError for bad input', async () => {
    const worker = await aWorker({ evaluate: { maxRecipients: 2 } });
    const client = new PushRulesClient({
      url: inject('amqpUrl'),
      queue: worker.names.queue,
      readQueue: worker.names.amqp.readQueue,
      evaluateQueue: worker.evaluateQueueName,
    });
    try {
      const request = anEvaluate('hi @bob', [BOB]);
      const body = await client.evaluate(request.event, request.room, request.recipients, { explain: true });
      expect(body).toEqual({ notify: { [BOB]: ['notify'] }, evaluated: 1, rule_ids: { [BOB]: '.m.rule.message' } });
      await expect(
        client.evaluate(request.event, request.room, [{ user_id: BOB }, { user_id: ALICE }, { user_id: SENDER }]),
      ).rejects.toMatchObject({
        kind: 'TooLarge',
        status: 413,
      });
    } finally {
      await client.close();
    }
  });
});

describe('evaluate with bad input', () => {
  let worker: EvaluatingWorker;
  beforeAll(async () => {
    worker = await aWorker({ evaluate: { maxRecipients: 10, maxEventBytes: 2048, maxRequestBytes: 8192 } });
  });

  it.each([
    [
      'a missing event',
      { ...anEvaluate('x', [BOB]), event: undefined },
      'BadJson',
      "request must have required property 'event'.",
    ],
    [
      'an event that is not an object',
      { ...anEvaluate('x', [BOB]), event: 'm.room.message' },
      'BadJson',
      'event must be object.',
    ],
    [
      'a missing room',
      { ...anEvaluate('x', [BOB]), room: undefined },
      'BadJson',
      "request must have required property 'room'.",
    ],
    [
      'an invalid recipient',
      anEvaluate('x', [BOB, 'carol']),
      'BadJson',
      'recipients.1.user_id is not a valid Matrix user ID.',
    ],
    ['a duplicate recipient', anEvaluate('x', [BOB, ALICE, BOB]), 'BadJson', `recipients.2.user_id repeats ${BOB}.`],
    [
      'too many recipients',
      anEvaluate(
        'x',
        Array.from({ length: 11 }, (_, i) => user(i)),
      ),
      'TooLarge',
      'Too many recipients: an evaluate request may name at most 10.',
    ],
    [
      'an event over maxEventBytes',
      anEvaluate('x'.repeat(2100), [BOB]),
      'TooLarge',
      'The event is larger than 2048 bytes.',
    ],
    [
      'a body over maxRequestBytes',
      anEvaluate(
        'x'.repeat(1000),
        Array.from({ length: 10 }, (_, i) => `@${'u'.repeat(700)}${i}:example.org`),
      ),
      'TooLarge',
      'Request body is larger than 8192 bytes.',
    ],
    [
      'a user op',
      { op: 'get_pushrules', user_id: BOB },
      'Unrecognized',
      'Only evaluate is served on this queue, not "get_pushrules".',
    ],
  ])('%s: %s, and the worker keeps serving', async (_name, request, kind, message) => {
    const reply = await evaluate(worker, request);
    expect(reply).toMatchObject({ ok: false, error: { kind, error: message } });
    expect((await evaluate(worker, anEvaluate('hello', [BOB]))).ok).toBe(true);
  });

  it('is refused on the request queue, with a message naming the evaluate queue', async () => {
    const reply = await world.caller.call(worker.names.queue, anEvaluate('hello', [BOB]));
    expect(reply).toMatchObject({
      ok: false,
      error: {
        kind: 'Unrecognized',
        error:
          'evaluate is served on its own queue (evaluate.queue, matrix.push.evaluate by default), not on the request queue.',
      },
    });
  });

  it('refuses an untrusted publisher like every other op', async () => {
    const trusting = await aWorker({ trustedPublishers: ['front'] });
    const reply = await evaluate(trusting, anEvaluate('hello', [BOB]));
    expect(reply).toMatchObject({ ok: false, error: { kind: 'Forbidden' } });
  });
});
