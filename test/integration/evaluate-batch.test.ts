import { beforeAll, describe, expect, inject, it } from 'vitest';
import { PushRulesClient, type RpcTransport } from '../../src/client/push-rules-client.js';
import { RpcClient } from '../../src/client/rpc-client.js';
import type { ContractReply } from './support/rpc-caller.js';
import { startEvaluatingWorker, useEvaluateWorld, type EvaluatingWorker } from './support/evaluate-harness.js';

/**
 * The batch form of `evaluate` end to end: a real worker answers each
 * event of one message exactly as it answers that event sent alone, on the
 * event loop and in an evaluation thread, and the client's coalesced calls
 * and `evaluateMany` resolve with what single calls resolve with.
 */
const SENDER = '@sender:example.org';
const MODES = [
  ['on the event loop', 0],
  ['in an evaluation thread', 1],
] as const;

const world = useEvaluateWorld();

/** One entry of `events`: the single form without its `op`. */
function anEntry(body: string, recipients: readonly string[], extra: { explain?: boolean; compact?: boolean } = {}) {
  return {
    event: {
      type: 'm.room.message',
      room_id: '!room:example.org',
      sender: SENDER,
      content: { msgtype: 'm.text', body },
    },
    room: { member_count: 12, sender_power_level: 0, notification_power_levels: { room: 50 } },
    recipients: recipients.map((userId) => ({ user_id: userId })),
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

describe.each(MODES)('the batch form of evaluate through a real worker, %s', (_mode, threads) => {
  const user = (n: number) => `@b${n + 1000 * threads}:example.org`;
  let worker: EvaluatingWorker;

  beforeAll(async () => {
    worker = await startEvaluatingWorker({
      db: world.db,
      threads,
      evaluate: { maxRecipients: 4, maxBatchEvents: 5 },
    });
    world.workers.push(worker);
    for (const [n, keyword] of [
      [1, 'pizza'],
      [2, 'meeting'],
    ] as const) {
      await world.caller.call(worker.names.queue, { op: 'get_pushrules', user_id: user(n) });
      const reply = await world.caller.call(worker.names.queue, { ...keywordRule(keyword), user_id: user(n) });
      expect(reply).toEqual({ ok: true, body: {} });
    }
  });

  it('answers each event as that event sent alone is answered, a bad one with its own error, in order', async () => {
    const entries = [
      anEntry('pizza tonight?', [user(1), user(2), user(3)], { explain: true }),
      anEntry('the meeting moved', [user(2), user(3), SENDER], { compact: true }),
      anEntry('pizza?', [user(1), 'not-a-user']),
      anEntry('pizza at the meeting', [user(1), user(2), user(3), user(4), user(5)]),
      anEntry('nothing', [], { explain: true }),
    ];
    const batch = await world.caller.call(worker.evaluateQueueName, { op: 'evaluate', events: entries });
    const alone: ContractReply[] = [];
    for (const entry of entries)
      alone.push(await world.caller.call(worker.evaluateQueueName, { op: 'evaluate', ...entry }));
    expect(batch).toEqual({ ok: true, body: { results: alone } });
    expect(alone.map((reply) => reply.ok || reply.error?.kind)).toEqual([true, true, 'BadJson', 'TooLarge', true]);
    expect((alone[0]?.body as { rule_ids: unknown }).rule_ids).toEqual({
      [user(1)]: 'kw-pizza',
      [user(2)]: '.m.rule.message',
      [user(3)]: '.m.rule.message',
    });
  });

  it('refuses a message of more events than evaluate.maxBatchEvents as a whole', async () => {
    const events = Array.from({ length: 6 }, () => anEntry('hi', [user(1)]));
    expect(await world.caller.call(worker.evaluateQueueName, { op: 'evaluate', events })).toMatchObject({
      ok: false,
      error: { kind: 'TooLarge', error: 'Too many events: an evaluate request may carry at most 5.' },
    });
  });

  it("resolves the client's coalesced calls and evaluateMany with what uncoalesced calls resolve with, in fewer messages", async () => {
    const messages: number[] = [];
    const rpc = new RpcClient({ url: inject('amqpUrl'), queue: worker.names.queue });
    // The real transport, counting the events of each message it is handed.
    const counting: RpcTransport = {
      request: async (body, options) => {
        const json: unknown = 'json' in body ? JSON.parse((body as { json: string }).json) : body;
        messages.push((json as { events?: unknown[] }).events?.length ?? 1);
        return rpc.request(body, options);
      },
      publish: async (body, options) => rpc.publish(body, options),
      close: async () => rpc.close(),
    };
    const options = { url: inject('amqpUrl'), evaluateQueue: worker.evaluateQueueName };
    const coalescing = new PushRulesClient({ ...options, evaluateCoalescing: { windowMs: 5, maxEvents: 5 } }, counting);
    const single = new PushRulesClient({ ...options, evaluateCoalescing: false });
    try {
      const entries = Array.from({ length: 12 }, (_, i) =>
        anEntry(i % 2 === 0 ? `pizza ${i}` : `meeting ${i}`, [user(1), user(2), user(3 + (i % 2))], {
          explain: i % 3 === 0,
        }),
      );
      const call = async (client: PushRulesClient, e: (typeof entries)[number]) =>
        client
          .evaluate(e.event, e.room, e.recipients, { explain: e.explain === true })
          .catch((error: unknown) => error);
      const coalesced = await Promise.all(entries.map(async (e) => call(coalescing, e)));
      const expected = await Promise.all(entries.map(async (e) => call(single, e)));
      expect(coalesced).toEqual(expected);
      expect(messages.length).toBeLessThan(entries.length);
      expect(messages.reduce((a, b) => a + b, 0)).toBe(entries.length);

      const bad = anEntry('pizza', [user(1), user(1)]);
      const many = await coalescing.evaluateMany([...entries.slice(0, 3), bad]);
      expect(many.slice(0, 3)).toEqual(expected.slice(0, 3).map((value) => ({ status: 'fulfilled', value })));
      expect(many[3]).toMatchObject({ status: 'rejected', reason: { kind: 'BadJson', status: 400 } });
    } finally {
      await coalescing.close();
      await single.close();
    }
  });
});
