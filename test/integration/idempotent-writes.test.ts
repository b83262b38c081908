import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './support/worker-harness.js';

/**
 * At-least-once delivery means a write can reach a worker twice: the caller
 * retries after a lost reply, or the broker redelivers after a worker died
 * between applying and acknowledging. With the same `messageId` the second
 * copy is answered from the record and changes nothing.
 */
let h: Harness;
let n = 0;
const aUser = () => `@idem${(n += 1)}:example.org`;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

const address = { scope: 'global', kind: 'room', rule_id: '!room:example.org' };

async function send(user: string, op: string, fields: Record<string, unknown>, messageId: string) {
  return h.caller.call(h.names.queue, { op, user_id: user, ...fields }, { messageId });
}

async function storedVersion(user: string): Promise<unknown> {
  return (await h.db.collection('account_data').findOne({ _id: user as never }))?.['version'];
}

describe('writes with a messageId are applied once', () => {
  it('a second delete_pushrule with the same messageId is answered {} again and deletes nothing else', async () => {
    const user = aUser();
    await h.call('get_pushrules', user);
    await h.call('set_pushrule', user, { ...address, rule: { actions: ['notify'] } });
    const first = await send(user, 'delete_pushrule', address, 'delete-1');
    // Meanwhile another request puts a rule with the same ID back.
    await h.call('set_pushrule', user, { ...address, rule: { actions: [] } });
    const version = await storedVersion(user);
    const second = await send(user, 'delete_pushrule', address, 'delete-1');
    expect(first).toEqual({ ok: true, body: {} });
    expect(second).toEqual(first);
    expect(await storedVersion(user)).toBe(version);
    expect(await h.call('get_pushrule', user, address)).toMatchObject({
      ok: true,
      body: { rule_id: '!room:example.org', actions: [] },
    });
  });

  it('copies of set_pushrule sent at once are applied once and answered identically', async () => {
    const user = aUser();
    await h.call('get_pushrules', user);
    const before = await storedVersion(user);
    const replies = await Promise.all(
      Array.from({ length: 5 }, async () =>
        send(user, 'set_pushrule', { ...address, rule: { actions: ['notify'] } }, 'set-1'),
      ),
    );
    expect(replies).toEqual(Array.from({ length: 5 }, () => ({ ok: true, body: {} })));
    expect(await storedVersion(user)).toBe((before as number) + 1);
  });

  it('the record lives in the same document as the push rules', async () => {
    const user = aUser();
    await h.call('get_pushrules', user);
    await send(
      user,
      'set_pushrule_enabled',
      { scope: 'global', kind: 'override', rule_id: '.m.rule.master', enabled: true },
      'rec-1',
    );
    const doc = await h.db.collection('account_data').findOne({ _id: user as never });
    // A change (master was off): no flag, so a redelivery answered from it announces the rules again.
    expect(doc?.['recent_writes']).toEqual([{ message_id: 'rec-1', reply_json: '{"ok":true,"body":{}}' }]);
  });
});
