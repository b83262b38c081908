import { afterEach, describe, expect, it } from 'vitest';
import {
  PushRulesClient,
  PushRulesError,
  type EvaluateCoalescing,
  type RpcTransport,
} from '../../src/client/push-rules-client.js';
import { EncodedBody } from '../../src/client/encoded-body.js';
import { RpcTransportError } from '../../src/client/rpc-errors.js';
import type { RequestOptions } from '../../src/client/rpc-client-options.js';
import type { Reply } from '../../src/contract/reply.js';
import type { JsonValue } from '../../src/matrix/json.js';
import { eventually } from '../support/eventually.js';

interface Held {
  /** The body as it would go on the wire, parsed. */
  readonly wire: Record<string, unknown>;
  /** Whether the transport was handed an object (the single form, as before coalescing) rather than text. */
  readonly asObject: boolean;
  readonly options: RequestOptions;
  answer(reply: Reply): void;
  fail(error: Error): void;
}

const clients: PushRulesClient[] = [];
afterEach(async () => {
  // Calls left waiting fail with `closed`, and their timers go.
  await Promise.all(clients.splice(0).map(async (client) => client.close()));
});
/** A call whose outcome the test does not look at. */
const ignore = (call: Promise<unknown>) => {
  call.catch(() => undefined);
};

/** A transport whose replies the test gives, one message at a time. */
function heldTransport(coalescing?: EvaluateCoalescing | false) {
  const sent: Held[] = [];
  const transport: RpcTransport = {
    request: async (body, options) =>
      new Promise<Reply>((resolve, reject) => {
        const asObject = !(body instanceof EncodedBody);
        const wire = JSON.parse(body instanceof EncodedBody ? body.json : JSON.stringify(body)) as Record<
          string,
          unknown
        >;
        sent.push({ wire, asObject, options, answer: resolve, fail: reject });
      }),
    publish: async () => Promise.resolve(),
    close: async () => Promise.resolve(),
  };
  const client = new PushRulesClient(
    { url: 'amqp://unused', ...(coalescing === undefined ? {} : { evaluateCoalescing: coalescing }) },
    transport,
  );
  clients.push(client);
  return { client, sent };
}

const ROOM = { member_count: 2 };
const eventOf = (n: number) => ({ type: 'm.room.message', room_id: '!r:x.org', sender: '@s:x.org', content: { n } });
const recipients = [{ user_id: '@a:x.org' }];
/** The entry of `events` the client sends for `evaluate(eventOf(n), ROOM, recipients)`. */
const entry = (n: number) => ({ event: eventOf(n), room: ROOM, recipients, compact: true, runs: true });
/** What `evaluate(eventOf(n), …)` resolves with in these tests, and the reply envelope that carries it. */
const valueOf = (n: number) => ({ notify: { '@a:x.org': [`notify-${n}`] }, evaluated: 1 });
const answerOf = (n: number): Reply => ({ ok: true, body: valueOf(n) });
/** The `n`th message sent, once it has been. */
const nth = async (sent: readonly Held[], n: number): Promise<Held> => {
  await eventually(() => {
    expect(sent.length).toBeGreaterThan(n);
  });
  return sent[n] as Held;
};
const QUIET: EvaluateCoalescing = { windowMs: 60_000 };
/** An event whose content nests `levels` arrays: its entry is `levels + 3` deep (29: 32 alone, 34 in a batch). */
const deepEvent = (levels: number) => ({
  ...eventOf(9),
  content: { n: JSON.parse('['.repeat(levels) + ']'.repeat(levels)) as JsonValue },
});

describe('PushRulesClient.evaluate, coalesced', () => {
  it('sends a call made while nothing is out at once, alone, in the single form', async () => {
    const { client, sent } = heldTransport(QUIET);
    const call = client.evaluate(eventOf(1), ROOM, recipients);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.asObject).toBe(true);
    expect(sent[0]?.wire).toEqual({ op: 'evaluate', ...entry(1) });
    sent[0]?.answer(answerOf(1));
    await expect(call).resolves.toEqual(valueOf(1));
  });

  it("holds the calls made while a message is out and sends them as one message once it is answered, each caller getting its own event's answer", async () => {
    const { client, sent } = heldTransport(QUIET);
    const first = client.evaluate(eventOf(1), ROOM, recipients);
    const others = [2, 3, 4].map(async (n) => client.evaluate(eventOf(n), ROOM, recipients, { explain: n === 3 }));
    expect(sent).toHaveLength(1);
    sent[0]?.answer(answerOf(1));
    await expect(first).resolves.toEqual(valueOf(1));
    const batch = await nth(sent, 1);
    expect(batch.wire).toEqual({
      op: 'evaluate',
      events: [
        entry(2),
        { event: eventOf(3), room: ROOM, recipients, explain: true, compact: true, runs: true },
        entry(4),
      ],
    });
    batch.answer({
      ok: true,
      body: {
        results: [
          answerOf(2),
          {
            ok: false,
            error: { kind: 'BadJson', errcode: 'M_BAD_JSON', error: 'event.sender must be string.', status: 400 },
          },
          { ok: true, body: { notify_groups: [{ actions: ['notify'], user_ids: ['@a:x.org'] }], evaluated: 1 } },
        ],
      },
    });
    const settled = await Promise.allSettled(others);
    expect(settled[0]).toEqual({ status: 'fulfilled', value: valueOf(2) });
    expect(settled[1]).toMatchObject({
      status: 'rejected',
      reason: { kind: 'BadJson', message: 'event.sender must be string.' },
    });
    expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(PushRulesError);
    expect(settled[2]).toEqual({ status: 'fulfilled', value: { notify: { '@a:x.org': ['notify'] }, evaluated: 1 } });
  });

  it('also sends the next calls of the callers a batch answered together, in one message', async () => {
    const { client, sent } = heldTransport(QUIET);
    ignore(client.evaluate(eventOf(0), ROOM, recipients));
    const batch = [1, 2].map(async (n) => client.evaluate(eventOf(n), ROOM, recipients));
    sent[0]?.answer(answerOf(0));
    const firstBatch = await nth(sent, 1);
    // Each caller answered calls again at once, as a closed loop does.
    const next = batch.map(async (call, i) =>
      call.then(async () => client.evaluate(eventOf(10 + i), ROOM, recipients)),
    );
    firstBatch.answer({ ok: true, body: { results: [answerOf(1), answerOf(2)] } });
    const secondBatch = await nth(sent, 2);
    expect(secondBatch.wire).toEqual({ op: 'evaluate', events: [entry(10), entry(11)] });
    secondBatch.answer({ ok: true, body: { results: [answerOf(10), answerOf(11)] } });
    await expect(Promise.all(next)).resolves.toEqual([valueOf(10), valueOf(11)]);
  });

  it.each([
    ['maxEvents', { maxEvents: 2 }, [[2, 3], [4]]],
    ['maxBytes', { maxBytes: 2 * JSON.stringify(entry(2)).length + 10 }, [[2, 3], [4]]],
  ] as const)('sends the queue as soon as it reaches %s', async (_cap, cap, messages) => {
    const { client, sent } = heldTransport({ ...QUIET, ...cap });
    ignore(client.evaluate(eventOf(1), ROOM, recipients));
    for (const n of [2, 3, 4]) ignore(client.evaluate(eventOf(n), ROOM, recipients));
    // The first two went while the first call is still out; the third waits for both messages.
    expect(sent.map((m) => m.wire['events'])).toEqual([undefined, [entry(2), entry(3)]]);
    sent[0]?.answer(answerOf(1));
    sent[1]?.answer({ ok: true, body: { results: [answerOf(2), answerOf(3)] } });
    const last = await nth(sent, 2);
    // One event left: the single form.
    expect(last.wire).toEqual({ op: 'evaluate', ...entry(messages[1][0]) });
  });

  it('sends the queue after windowMs even while the message before it is still out', async () => {
    const { client, sent } = heldTransport({ windowMs: 5 });
    ignore(client.evaluate(eventOf(1), ROOM, recipients));
    const calls = [2, 3].map(async (n) => client.evaluate(eventOf(n), ROOM, recipients));
    const batch = await nth(sent, 1);
    expect(batch.wire).toEqual({ op: 'evaluate', events: [entry(2), entry(3)] });
    batch.answer({ ok: true, body: { results: [answerOf(2), answerOf(3)] } });
    await expect(Promise.all(calls)).resolves.toEqual([valueOf(2), valueOf(3)]);
  });

  it("keeps each call's own deadline while it waits, and gives its message the latest of its calls'", async () => {
    const { client, sent } = heldTransport(QUIET);
    ignore(client.evaluate(eventOf(1), ROOM, recipients));
    const short = client.evaluate(eventOf(2), ROOM, recipients, { timeoutMs: 20 });
    const long = client.evaluate(eventOf(3), ROOM, recipients, { timeoutMs: 5_000 });
    await expect(short).rejects.toMatchObject({ kind: 'Unavailable', reason: 'timeout' });
    sent[0]?.answer(answerOf(1));
    const batch = await nth(sent, 1);
    // The call that timed out is not sent.
    expect(batch.wire).toEqual({ op: 'evaluate', ...entry(3) });
    expect(batch.options.timeoutMs).toBeGreaterThan(4_000);
    expect(batch.options.timeoutMs).toBeLessThanOrEqual(5_000);
    batch.answer(answerOf(3));
    await expect(long).resolves.toEqual(valueOf(3));
  });

  it.each([
    [
      'no reply (the transport failed)',
      (m: Held) => {
        m.fail(new RpcTransportError('connection-lost', 'gone'));
      },
      { kind: 'Unavailable', reason: 'connection-lost' },
    ],
    [
      'a transient error for the whole message',
      (m: Held) => {
        m.answer({
          ok: false,
          error: { kind: 'Unavailable', errcode: 'M_UNKNOWN', error: 'the thread stopped', status: 503 },
        });
      },
      { kind: 'Unavailable', message: 'the thread stopped' },
    ],
    [
      'a reply without one result per event',
      (m: Held) => {
        m.answer({ ok: true, body: { results: [answerOf(2)] } });
      },
      { kind: 'Unavailable', reason: 'bad-reply' },
    ],
  ])('fails every call of a message that got %s', async (_what, respond, error) => {
    const { client, sent } = heldTransport(QUIET);
    ignore(client.evaluate(eventOf(1), ROOM, recipients));
    const calls = [2, 3].map(async (n) => client.evaluate(eventOf(n), ROOM, recipients));
    sent[0]?.answer(answerOf(1));
    respond(await nth(sent, 1));
    const settled = await Promise.allSettled(calls);
    expect(settled).toMatchObject([
      { status: 'rejected', reason: error },
      { status: 'rejected', reason: error },
    ]);
    expect(sent).toHaveLength(2);
  });

  const refusal = (kind: 'TooLarge' | 'BadJson', error: string): Reply => ({
    ok: false,
    error: { kind, errcode: kind === 'TooLarge' ? 'M_TOO_LARGE' : 'M_BAD_JSON', error, status: 413 },
  });

  it.each([
    ['TooLarge', 'Too many recipients: an evaluate request may name at most 20000 over all its events.'],
    ['BadJson', 'Request body nests arrays and objects deeper than 32 levels.'],
  ] as const)(
    'sends each event of a message refused as a whole (%s) again alone, so that only an offender fails',
    async (kind, message) => {
      const { client, sent } = heldTransport(QUIET);
      ignore(client.evaluate(eventOf(1), ROOM, recipients));
      const calls = [2, 3].map(async (n) => client.evaluate(eventOf(n), ROOM, recipients));
      sent[0]?.answer(answerOf(1));
      (await nth(sent, 1)).answer(refusal(kind, message));
      const [second, third] = [await nth(sent, 2), await nth(sent, 3)];
      expect([second.wire, third.wire]).toEqual([
        { op: 'evaluate', ...entry(2) },
        { op: 'evaluate', ...entry(3) },
      ]);
      second.answer(answerOf(2));
      third.answer(refusal(kind, message));
      const settled = await Promise.allSettled(calls);
      expect(settled).toMatchObject([
        { status: 'fulfilled', value: valueOf(2) },
        { status: 'rejected', reason: { kind, message } },
      ]);
    },
  );

  it.each([
    ['deeper than the single form takes it (it fails alone)', 40],
    ['that the single form takes but a batch would nest past maxJsonDepth', 29],
  ])('never puts in a batch an event nested %s: it goes at once, alone', async (_name, levels) => {
    const { client, sent } = heldTransport(QUIET);
    ignore(client.evaluate(eventOf(1), ROOM, recipients));
    const first = client.evaluate(eventOf(2), ROOM, recipients);
    const deep = client.evaluate(deepEvent(levels), ROOM, recipients);
    const last = client.evaluate(eventOf(3), ROOM, recipients);
    expect(sent).toHaveLength(2);
    expect(sent[1]?.wire).toEqual({
      op: 'evaluate',
      event: deepEvent(levels),
      room: ROOM,
      recipients,
      compact: true,
      runs: true,
    });
    sent[1]?.answer(refusal('BadJson', 'Request body nests arrays and objects deeper than 32 levels.'));
    await expect(deep).rejects.toMatchObject({ kind: 'BadJson' });
    sent[0]?.answer(answerOf(1));
    const batch = await nth(sent, 2);
    expect(batch.wire).toEqual({ op: 'evaluate', events: [entry(2), entry(3)] });
    batch.answer({ ok: true, body: { results: [answerOf(2), answerOf(3)] } });
    await expect(Promise.all([first, last])).resolves.toEqual([valueOf(2), valueOf(3)]);
  });

  it('sends the queue before its events name more than maxRecipients together', () => {
    const { client, sent } = heldTransport({ ...QUIET, maxRecipients: 3 });
    const two = [{ user_id: '@a:x.org' }, { user_id: '@b:x.org' }];
    ignore(client.evaluate(eventOf(1), ROOM, recipients));
    ignore(client.evaluate(eventOf(2), ROOM, two));
    ignore(client.evaluate(eventOf(3), ROOM, two));
    // Queued: the event of 2, then one more of 2 would make 4, so the queue goes first (alone).
    expect(sent.map((m) => m.wire)).toEqual([
      { op: 'evaluate', ...entry(1) },
      { op: 'evaluate', event: eventOf(2), room: ROOM, recipients: two, compact: true, runs: true },
    ]);
  });

  it('fails a call whose event cannot be serialized alone, and sends the others', async () => {
    const { client, sent } = heldTransport(QUIET);
    ignore(client.evaluate(eventOf(1), ROOM, recipients));
    const bad = client.evaluate(
      { ...eventOf(2), content: { n: 2n } as unknown as Record<string, never> },
      ROOM,
      recipients,
    );
    const good = client.evaluate(eventOf(3), ROOM, recipients);
    await expect(bad).rejects.toMatchObject({ kind: 'BadJson', status: 400 });
    sent[0]?.answer(answerOf(1));
    (await nth(sent, 1)).answer(answerOf(3));
    await expect(good).resolves.toEqual(valueOf(3));
  });

  it('fails the calls still waiting with closed when the client is closed', async () => {
    const { client } = heldTransport(QUIET);
    ignore(client.evaluate(eventOf(1), ROOM, recipients));
    const waiting = client.evaluate(eventOf(2), ROOM, recipients);
    await client.close();
    await expect(waiting).rejects.toMatchObject({ kind: 'Unavailable', reason: 'closed' });
  });

  it('sends every call alone and at once when coalescing is off', () => {
    const { client, sent } = heldTransport(false);
    for (const n of [1, 2, 3]) ignore(client.evaluate(eventOf(n), ROOM, recipients));
    expect(sent.map((m) => m.wire)).toEqual([1, 2, 3].map((n) => ({ op: 'evaluate', ...entry(n) })));
  });
});

describe('PushRulesClient.evaluateMany', () => {
  const many = (ns: readonly number[]) => ns.map((n) => ({ event: eventOf(n), room: ROOM, recipients }));

  it('sends the events at once as one message and settles each with its own answer, in order', async () => {
    const { client, sent } = heldTransport(QUIET);
    const answers = client.evaluateMany(many([1, 2]), { timeoutMs: 3_000 });
    expect(sent.map((m) => m.wire)).toEqual([{ op: 'evaluate', events: [entry(1), entry(2)] }]);
    expect(sent[0]?.options.timeoutMs).toBeLessThanOrEqual(3_000);
    sent[0]?.answer({
      ok: true,
      body: {
        results: [
          { ok: false, error: { kind: 'BadJson', errcode: 'M_BAD_JSON', error: 'x', status: 400 } },
          answerOf(2),
        ],
      },
    });
    expect(await answers).toMatchObject([
      { status: 'rejected', reason: { kind: 'BadJson', message: 'x' } },
      { status: 'fulfilled', value: valueOf(2) },
    ]);
  });

  it('splits the events into messages of at most maxEvents', async () => {
    const { client, sent } = heldTransport({ ...QUIET, maxEvents: 2 });
    const answers = client.evaluateMany(many([1, 2, 3]));
    expect(sent.map((m) => m.wire)).toEqual([
      { op: 'evaluate', events: [entry(1), entry(2)] },
      { op: 'evaluate', ...entry(3) },
    ]);
    sent[0]?.answer({ ok: true, body: { results: [answerOf(1), answerOf(2)] } });
    sent[1]?.fail(new RpcTransportError('timeout', 'late'));
    expect(await answers).toMatchObject([
      { status: 'fulfilled', value: valueOf(1) },
      { status: 'fulfilled', value: valueOf(2) },
      { status: 'rejected', reason: { kind: 'Unavailable', reason: 'timeout' } },
    ]);
  });

  it('sends an event nested too deep for a batch alone, and the others together', async () => {
    const { client, sent } = heldTransport(QUIET);
    const deep = { event: deepEvent(29), room: ROOM, recipients };
    const answers = client.evaluateMany([...many([1]), deep, ...many([2])]);
    expect(sent.map((m) => m.wire)).toEqual([
      { op: 'evaluate', event: deepEvent(29), room: ROOM, recipients, compact: true, runs: true },
      { op: 'evaluate', events: [entry(1), entry(2)] },
    ]);
    sent[0]?.answer(answerOf(9));
    sent[1]?.answer({ ok: true, body: { results: [answerOf(1), answerOf(2)] } });
    expect(await answers).toMatchObject([
      { status: 'fulfilled', value: valueOf(1) },
      { status: 'fulfilled', value: valueOf(9) },
      { status: 'fulfilled', value: valueOf(2) },
    ]);
  });

  it('answers an empty list with an empty list, sending nothing', async () => {
    const { client, sent } = heldTransport();
    await expect(client.evaluateMany([])).resolves.toEqual([]);
    expect(sent).toHaveLength(0);
  });
});
