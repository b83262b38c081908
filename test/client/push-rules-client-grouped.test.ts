import { describe, expect, it } from 'vitest';
import { PushRulesClient, type RpcTransport } from '../../src/client/push-rules-client.js';
import type { Reply } from '../../src/contract/reply.js';

const EVENT = { type: 'm.room.message', room_id: '!r:x.org', sender: '@s:x.org', content: { body: 'hi' } };
const ROOM = { member_count: 500 };
const members = (count: number) => Array.from({ length: count }, (_, k) => ({ user_id: `@u${k}:x.org` }));
const grouped = (count: number) => [{ server: 'x.org', localparts: members(count).map((r) => r.user_id.slice(1, -6)) }];
const OK: Reply = {
  ok: true,
  body: { notify_groups: [{ actions: ['notify'], user_ids: ['@u0:x.org'] }], evaluated: 1 },
};
const BAD_JSON = { kind: 'BadJson', errcode: 'M_BAD_JSON', status: 400 } as const;
const TOO_LARGE: Reply = { ok: false, error: { kind: 'TooLarge', errcode: 'M_TOO_LARGE', status: 413, error: 'x' } };
const refusal = (error: string): Reply => ({ ok: false, error: { ...BAD_JSON, error } });

/** A transport answering each request in turn with `answers` (the last one again when they run out). */
function scriptedTransport(...answers: Reply[]) {
  const sent: Record<string, unknown>[] = [];
  const transport: RpcTransport = {
    request: async (body) => {
      sent.push(body as Record<string, unknown>);
      return Promise.resolve(answers[Math.min(sent.length, answers.length) - 1] as Reply);
    },
    publish: async () => Promise.resolve(),
    close: async () => Promise.resolve(),
  };
  return { client: new PushRulesClient({ url: 'amqp://unused' }, transport), sent };
}
const form = (body: Record<string, unknown>) => ('recipients_by_server' in body ? 'grouped' : 'plain');

describe('PushRulesClient.evaluate: recipients grouped by server', () => {
  it.each([
    [1, 'plain'],
    [99, 'plain'],
    [100, 'grouped'],
    [10_000, 'grouped'],
  ])('%i recipients go %s', async (count, expected) => {
    const { client, sent } = scriptedTransport(OK);
    await client.evaluate(EVENT, ROOM, members(count));
    expect(sent.map(form)).toEqual([expected]);
    if (expected === 'grouped') {
      expect(sent[0]).toEqual({
        op: 'evaluate',
        event: EVENT,
        room: ROOM,
        recipients_by_server: grouped(count),
        compact: true,
        runs: true,
      });
    }
  });

  it('sends the plain list when a user ID cannot be grouped, so the refusal names it as always', async () => {
    const { client, sent } = scriptedTransport(OK);
    await client.evaluate(EVENT, ROOM, [...members(150), { user_id: 'nosigil:x.org' }]);
    expect(sent.map(form)).toEqual(['plain']);
  });

  it.each<[string, Reply]>([
    ['BadJson', refusal('recipients_by_server.0.localparts.3 does not make a valid Matrix user ID.')],
    ['TooLarge', TOO_LARGE],
  ])('a %s refusal of the grouped form rejects as the worker answered, sent once', async (kind, answer) => {
    const { client, sent } = scriptedTransport(answer);
    await expect(client.evaluate(EVENT, ROOM, members(200))).rejects.toMatchObject({ kind });
    expect(sent.map(form)).toEqual(['grouped']);
  });

  it.each([
    ['one server', ['@a:x.org', '@b:x.org', '@c:x.org'], [0, 2], ['@a:x.org', '@b:x.org']],
    // Sent grouped: y.org's first, so position 1 is @c:y.org.
    ['servers interleaved', ['@a:y.org', '@b:x.org', '@c:y.org'], [1, 2], ['@c:y.org', '@b:x.org']],
    [
      'several runs',
      ['@a:x.org', '@b:x.org', '@c:x.org', '@d:x.org'],
      [0, 1, 2, 2],
      ['@a:x.org', '@c:x.org', '@d:x.org'],
    ],
    [
      'a run past the end of the list stops there',
      ['@a:x.org', '@b:x.org'],
      [1, 1, 101, 5, 500, 1],
      ['@b:x.org', '@u99:pad.org'],
    ],
  ])(
    'a reply in runs names the recipients at those positions of the list as sent: %s',
    async (_case, userIds, runs, named) => {
      const padding = members(100).map((r) => ({ user_id: r.user_id.replace(':x.org', ':pad.org') }));
      // Grouped from 100 recipients: the padding server comes last, after the servers of the case.
      const recipients = [...userIds.map((user_id) => ({ user_id })), ...padding];
      const { client, sent } = scriptedTransport({
        ok: true,
        body: { notify_groups: [{ actions: ['notify'], runs }], evaluated: recipients.length },
      });
      const reply = await client.evaluate(EVENT, ROOM, recipients);
      expect(sent.map(form)).toEqual(['grouped']);
      expect(Object.keys(reply.notify).sort()).toEqual([...named].sort());
    },
  );
});
