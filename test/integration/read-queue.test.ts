import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PushRulesClient } from '../../src/client/push-rules-client.js';
import type { ReadFallback } from '../../src/client/rpc-client-options.js';
import type { ContractReply } from './support/rpc-caller.js';
import { startHarness, type Harness } from './support/worker-harness.js';

let h: Harness;
let n = 0;
const aUser = () => `@read${(n += 1)}:example.org`;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

const address = { scope: 'global', kind: 'override', rule_id: 'cake' };
const cakeRule = { actions: ['notify'], conditions: [{ kind: 'event_match', key: 'content.body', pattern: '*cake*' }] };
const onReadQueue = async (op: string, userId: string, fields: Record<string, unknown> = {}): Promise<ContractReply> =>
  h.caller.call(h.names.amqp.readQueue, { op, user_id: userId, ...fields });

/** A user with a rule of their own and a pusher, so that every read has something to show. */
async function aUserWithData(): Promise<string> {
  const user = aUser();
  await h.call('get_pushrules', user);
  await h.call('set_pushrule', user, { ...address, rule: cakeRule });
  await h.call('set_pusher', user, {
    action: {
      pushkey: `key-${user}`,
      kind: 'http',
      app_id: 'org.example.app',
      app_display_name: 'App',
      device_display_name: 'Phone',
      lang: 'en',
      data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
    },
  });
  return user;
}

describe('the read queue', () => {
  it.each([
    ['get_pushrules', {}],
    ['get_pushrule', address],
    ['get_pushrule_actions', address],
    ['get_pushrule_enabled', address],
    ['get_pushers', {}],
    ['get_pushrule of a missing rule', { ...address, rule_id: 'nope' }],
    ['get_pushrule of a bad scope', { ...address, scope: 'device' }],
  ])('%s answers exactly as the request queue does', async (name, fields) => {
    const user = await aUserWithData();
    const op = name.split(' ')[0] ?? name;
    const direct = await h.call(op, user, fields);
    expect(await onReadQueue(op, user, fields)).toEqual(direct);
  });

  it.each([
    ['set_pushrule', { ...address, rule: { actions: [], conditions: [] } }],
    ['delete_pushrule', address],
    ['set_pushrule_actions', { ...address, actions: [] }],
    ['set_pushrule_enabled', { ...address, enabled: false }],
    ['set_pusher', { action: { pushkey: 'k', app_id: 'org.example.app', kind: null } }],
  ])('refuses %s, a write, with Unrecognized and changes nothing', async (op, fields) => {
    const user = await aUserWithData();
    const before = await h.db.collection('account_data').findOne({ _id: user as never });
    const pushersBefore = await h.call('get_pushers', user);
    const reply = await onReadQueue(op, user, fields);
    expect(reply).toMatchObject({
      ok: false,
      error: {
        kind: 'Unrecognized',
        errcode: 'M_UNRECOGNIZED',
        status: 400,
        error: `${op} changes data: send it to the request queue, not the read queue.`,
      },
    });
    expect(await h.db.collection('account_data').findOne({ _id: user as never })).toEqual(before);
    expect(await h.call('get_pushers', user)).toEqual(pushersBefore);
  });

  it('refuses evaluate and bad requests there like on the request queue', async () => {
    expect(await onReadQueue('unknown_op', aUser())).toMatchObject({ ok: false, error: { kind: 'Unrecognized' } });
    expect(await h.caller.call(h.names.amqp.readQueue, { op: 'get_pushrules', user_id: 'nobody' })).toMatchObject({
      ok: false,
      error: { kind: 'BadJson', error: 'user_id is not a valid Matrix user ID.' },
    });
  });
});

describe('PushRulesClient routing reads', () => {
  function aClient(readQueue: string) {
    const fallbacks: ReadFallback[] = [];
    const client = new PushRulesClient({
      url: h.names.amqp.url,
      queue: h.names.queue,
      readQueue,
      timeoutMs: 5_000,
      onReadFallback: (reason) => fallbacks.push(reason),
    });
    return { client, fallbacks };
  }

  it('sends reads to the read queue while a worker consumes it, and writes to the request queue', async () => {
    const user = await aUserWithData();
    const { client, fallbacks } = aClient(h.names.amqp.readQueue);
    try {
      expect(
        (await client.getPushRuleEnabled(user, { scope: 'global', kind: 'override', ruleId: 'cake' })).enabled,
      ).toBe(true);
      await client.setPushRuleEnabled(user, { scope: 'global', kind: 'override', ruleId: 'cake' }, false);
      expect(
        (await client.getPushRuleEnabled(user, { scope: 'global', kind: 'override', ruleId: 'cake' })).enabled,
      ).toBe(false);
      expect(fallbacks).toEqual([]);
    } finally {
      await client.close();
    }
  });

  it('falls back to the request queue when the read queue does not exist, and counts it', async () => {
    const user = await aUserWithData();
    const { client, fallbacks } = aClient(`missing.read.${randomUUID()}`);
    try {
      const { global } = await client.getPushRules(user);
      expect(global.override.map((r) => r.rule_id)).toContain('cake');
      expect(fallbacks.length).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('falls back when the read queue exists but no worker consumes it, and counts it', async () => {
    const user = await aUserWithData();
    const orphan = `orphan.read.${randomUUID()}`;
    const connection = await amqp.connect(h.names.amqp.url);
    const channel = await connection.createChannel();
    await channel.assertQueue(orphan, { durable: false, autoDelete: false });
    const { client, fallbacks } = aClient(orphan);
    try {
      expect((await client.getPushers(user)).pushers).toHaveLength(1);
      expect(fallbacks).toEqual(['no-consumer']);
      expect((await channel.checkQueue(orphan)).messageCount).toBe(0);
    } finally {
      await client.close();
      await channel.deleteQueue(orphan);
      await connection.close();
    }
  });

  it('a read returned by a read queue that vanished after the count is sent again to the request queue', async () => {
    const user = await aUserWithData();
    // A read queue with a consumer of this test's own, deleted while the client still counts it as served.
    const vanishing = `vanishing.read.${randomUUID()}`;
    const connection = await amqp.connect(h.names.amqp.url);
    const channel = await connection.createChannel();
    await channel.assertQueue(vanishing, { durable: false });
    await channel.consume(vanishing, () => undefined);
    const { client, fallbacks } = aClient(vanishing);
    // That read goes to the consumer above, which never answers.
    await expect(client.getPushers(user, { timeoutMs: 300 })).rejects.toMatchObject({ reason: 'timeout' });
    await channel.deleteQueue(vanishing);
    try {
      expect((await client.getPushers(user)).pushers).toHaveLength(1);
      expect(fallbacks).toContain('returned');
    } finally {
      await client.close();
      await connection.close();
    }
  });
});
