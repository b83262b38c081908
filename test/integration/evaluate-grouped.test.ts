import { beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { PushRulesClient } from '../../src/client/push-rules-client.js';
import { groupRecipientsByServer } from '../../src/client/group-recipients.js';
import type { EvaluationRecipient } from '../../src/evaluation/evaluation-input.js';
import { startEvaluatingWorker, useEvaluateWorld, type EvaluatingWorker } from './support/evaluate-harness.js';

/**
 * Issue 35: the grouped recipients (`recipients_by_server`) and the reply in
 * runs give the very answers of the plain list, through a real worker, on
 * each of its paths (event loop, thread, small requests on the event loop).
 */
const SENDER = '@sender:a.example';
const EVENT = {
  event_id: '$e',
  type: 'm.room.message',
  room_id: '!room:a.example',
  sender: SENDER,
  content: { msgtype: 'm.text', body: 'Pizza tonight, Member 10?' },
};
const ROOM = { member_count: 200, sender_power_level: 0, notification_power_levels: { room: 50 } };

/** 150 members on three servers, interleaved; every fifth with a display name; the sender among them. */
const members: EvaluationRecipient[] = [
  { user_id: SENDER },
  ...Array.from({ length: 149 }, (_, k) => {
    const userId = `@m${k}:${['a.example', 'b.example:8448', 'c.example'][k % 3] as string}`;
    return k % 5 === 0 ? { user_id: userId, display_name: `Member ${k}` } : { user_id: userId };
  }),
];
/** Users with a keyword rule of their own (other actions: a group of their own). */
const keywordUsers = ['@m1:b.example:8448', '@m4:b.example:8448', '@m9:a.example'];

/** Has a rule on its display name ("Member 10"), which the event's body names. */
const NAMED = '@m10:b.example:8448';

const world = useEvaluateWorld();

const MODES = [
  ['on the event loop', 0, { inlineMaxRecipients: 0, inlineMaxBytes: 0 }],
  ['in an evaluation thread', 1, { inlineMaxRecipients: 0, inlineMaxBytes: 0 }],
  ['in a thread, small requests on the event loop', 1, { inlineMaxRecipients: 200, inlineMaxBytes: 1 << 20 }],
] as const;

describe.each(MODES)('grouped recipients and runs through a real worker, %s', (_mode, threads, inline) => {
  let worker: EvaluatingWorker;
  beforeAll(async () => {
    worker = await startEvaluatingWorker({ db: world.db, threads, evaluate: inline });
    world.workers.push(worker);
    for (const userId of keywordUsers) {
      // Stores the user's defaults first, as a homeserver's first read does.
      await world.caller.call(worker.names.queue, { op: 'get_pushrules', user_id: userId });
      const reply = await world.caller.call(worker.names.queue, {
        op: 'set_pushrule',
        user_id: userId,
        scope: 'global',
        kind: 'content',
        rule_id: 'kw-pizza',
        rule: { pattern: 'pizza', actions: ['notify', { set_tweak: 'highlight' }] },
      });
      expect(reply).toEqual({ ok: true, body: {} });
    }
    await world.caller.call(worker.names.queue, { op: 'get_pushrules', user_id: NAMED });
    const named = await world.caller.call(worker.names.queue, {
      op: 'set_pushrule',
      user_id: NAMED,
      scope: 'global',
      kind: 'override',
      rule_id: 'my-name',
      rule: {
        conditions: [{ kind: 'contains_display_name' }],
        actions: ['notify', { set_tweak: 'sound', value: 'me' }],
      },
    });
    expect(named).toEqual({ ok: true, body: {} });
  });

  const plain = (recipients: readonly EvaluationRecipient[], extra: object) => ({
    op: 'evaluate',
    event: EVENT,
    room: ROOM,
    recipients,
    ...extra,
  });

  it.each([
    ['the default reply', {}],
    ['the compact reply', { compact: true }],
    ['the compact reply with explain', { compact: true, explain: true }],
    ['runs with explain', { runs: true, explain: true }],
  ])('the grouped list is answered byte for byte as the plain list in the same order: %s', async (_case, extra) => {
    const grouped = groupRecipientsByServer(members);
    if (grouped === undefined) throw new Error('members cannot be grouped');
    const fromPlain = await world.caller.call(worker.evaluateQueueName, plain(grouped.order, extra));
    const { recipients: _recipients, ...rest } = plain([], extra);
    const fromGroups = await world.caller.call(worker.evaluateQueueName, {
      ...rest,
      recipients_by_server: grouped.groups,
    });
    expect(fromPlain.ok).toBe(true);
    expect(JSON.stringify(fromGroups)).toBe(JSON.stringify(fromPlain));
  });

  it('PushRulesClient.evaluate (grouped, in runs) resolves with what the plain default reply says', async () => {
    const client = new PushRulesClient({
      url: inject('amqpUrl'),
      queue: worker.names.queue,
      evaluateQueue: worker.evaluateQueueName,
    });
    try {
      for (const explain of [false, true]) {
        const expected = await world.caller.call(worker.evaluateQueueName, plain(members, explain ? { explain } : {}));
        const body = await client.evaluate(EVENT, ROOM, members, { explain });
        expect(body).toEqual(expected.body);
        const notified = Object.keys(body.notify);
        expect(notified).toHaveLength(members.length - 1);
        for (const userId of keywordUsers) expect(body.notify[userId]).toEqual(['notify', { set_tweak: 'highlight' }]);
        // Named by its display name, which only the list carries: the display names went along.
        expect(body.notify[NAMED]).toEqual(['notify', { set_tweak: 'sound', value: 'me' }]);
      }
    } finally {
      await client.close();
    }
  });

  it('refuses a bad grouped list naming its field, through the client too', async () => {
    const bad = {
      op: 'evaluate',
      event: EVENT,
      room: ROOM,
      recipients_by_server: [{ server: 'a.example', localparts: ['ok', 'b c'] }],
    };
    expect(await world.caller.call(worker.evaluateQueueName, bad)).toMatchObject({
      ok: false,
      error: { kind: 'BadJson', error: 'recipients_by_server.0.localparts.1 does not make a valid Matrix user ID.' },
    });
    const client = new PushRulesClient({
      url: inject('amqpUrl'),
      queue: worker.names.queue,
      evaluateQueue: worker.evaluateQueueName,
    });
    try {
      const recipients = [...members.slice(0, 120), { user_id: '@b c:a.example' }];
      // Sent grouped (from 100 recipients): the refusal names the grouped field.
      await expect(client.evaluate(EVENT, ROOM, recipients)).rejects.toMatchObject({
        kind: 'BadJson',
        message: expect.stringMatching(
          /^recipients_by_server\.\d+\.localparts\.\d+ does not make a valid Matrix user ID\.$/,
        ) as unknown,
      });
    } finally {
      await client.close();
    }
  });
});
