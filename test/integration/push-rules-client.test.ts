import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PushRulesClient, PushRulesError } from '../../src/client/push-rules-client.js';
import { startHarness, type Harness } from './support/worker-harness.js';
import { aPusherSetAction } from '../support/builders.js';

let h: Harness;
let client: PushRulesClient;
beforeAll(async () => {
  h = await startHarness();
  client = new PushRulesClient({
    url: h.names.amqp.url,
    queue: h.names.queue,
    readQueue: h.names.amqp.readQueue,
    timeoutMs: 5_000,
  });
});
afterAll(async () => {
  await client.close();
  await h.close();
});

const failureOf = async (call: Promise<unknown>): Promise<PushRulesError> => {
  const outcome = await call.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!(outcome instanceof PushRulesError)) throw new Error(`expected a PushRulesError, got ${String(outcome)}`);
  return outcome;
};
const versionOf = async (user: string) =>
  (await h.db.collection<{ _id: string; version: number }>('account_data').findOne({ _id: user }))?.version;

describe('PushRulesClient through a real worker', () => {
  it('serves every push-rule operation with the Matrix bodies', async () => {
    const user = '@typed:example.org';
    const address = { scope: 'global', kind: 'override', ruleId: 'typed.rule' };
    const rule = {
      actions: ['notify'],
      conditions: [{ kind: 'event_match', key: 'content.body', pattern: 'cake' }],
    } as const;

    const initial = await client.getPushRules(user);
    expect(Object.keys(initial.global).sort()).toEqual(['content', 'override', 'room', 'sender', 'underride']);

    expect(await client.setPushRule(user, address, rule)).toEqual({});
    expect(await client.getPushRule(user, address)).toEqual({
      rule_id: 'typed.rule',
      default: false,
      enabled: true,
      ...rule,
    });
    expect(
      await client.setPushRule(user, { ...address, ruleId: 'typed.first' }, rule, { before: 'typed.rule' }),
    ).toEqual({});
    const userRules = (await client.getPushRules(user)).global.override.filter((r) => !r.default).map((r) => r.rule_id);
    expect(userRules).toEqual(['typed.first', 'typed.rule']);

    expect(await client.setPushRuleActions(user, address, [{ set_tweak: 'sound', value: 'ping' }])).toEqual({});
    expect(await client.getPushRuleActions(user, address)).toEqual({
      actions: [{ set_tweak: 'sound', value: 'ping' }],
    });
    expect(await client.setPushRuleEnabled(user, address, false)).toEqual({});
    expect(await client.getPushRuleEnabled(user, address)).toEqual({ enabled: false });

    expect(await client.deletePushRule(user, address)).toEqual({});
    expect(await failureOf(client.getPushRule(user, address))).toMatchObject({
      kind: 'NotFound',
      errcode: 'M_NOT_FOUND',
      status: 404,
      message: 'Push rule not found.',
      reason: undefined,
    });
  });

  it('serves the pusher operations', async () => {
    const user = '@typed-pushers:example.org';
    const pusher = aPusherSetAction({ pushkey: 'key-1' });
    expect(await client.setPusher(user, pusher, { deviceId: 'PHONE' })).toEqual({});
    expect(await client.getPushers(user)).toEqual({
      pushers: [
        {
          ...pusher,
          enabled: true,
          'org.matrix.msc3881.enabled': true,
          device_id: 'PHONE',
          'org.matrix.msc3881.device_id': 'PHONE',
        },
      ],
    });
    expect(await client.setPusher(user, { pushkey: 'key-1', app_id: 'org.example.app', kind: null })).toEqual({});
    expect(await client.getPushers(user)).toEqual({ pushers: [] });
    expect(await failureOf(client.setPusher(user, { pushkey: 'k', app_id: 'a', kind: 'http' }))).toMatchObject({
      kind: 'MissingParam',
      errcode: 'M_MISSING_PARAM',
      status: 400,
      message: 'Missing parameters: app_display_name, device_display_name, lang, data',
    });
  });

  it('gets the homeserver ops refused while the workers have no trusted publishers', async () => {
    const user = '@typed-homeserver:example.org';
    await client.setPusher(user, aPusherSetAction({ pushkey: 'kept' }), { deviceId: 'PHONE' });
    for (const call of [
      client.deletePushers(user, { all: true }, { includeEmail: true }),
      client.deleteUserData(user),
    ]) {
      expect(await failureOf(call)).toMatchObject({
        kind: 'Forbidden',
        errcode: 'M_FORBIDDEN',
        status: 403,
        reason: undefined,
      });
    }
    expect((await client.getPushers(user)).pushers).toHaveLength(1);
  });

  it('applies a write retried with the same messageId once', async () => {
    const user = '@typed-retry:example.org';
    const address = { scope: 'global', kind: 'room', ruleId: '!r:example.org' };
    await client.getPushRules(user); // stores the server defaults
    const before = (await versionOf(user)) ?? 0;
    await client.setPushRule(user, address, { actions: [] }, { messageId: 'typed-retry-1' });
    await client.setPushRule(user, address, { actions: [] }, { messageId: 'typed-retry-1' });
    expect(await versionOf(user)).toBe(before + 1);
    // Without an id, each call is a write of its own (each a change here:
    // the same value twice would change nothing the second time).
    await client.setPushRuleEnabled(user, address, false);
    await client.setPushRuleEnabled(user, address, true);
    expect(await versionOf(user)).toBe(before + 3);
  });

  it('answers Unavailable at once when no queue takes the request', async () => {
    // A failure that is not a timeout came before the deadline, whatever the machine's load.
    const timeoutMs = 10_000;
    const lost = new PushRulesClient({
      url: h.names.amqp.url,
      queue: `no.such.queue.${randomUUID()}`,
      readQueue: null,
      timeoutMs,
    });
    const started = Date.now();
    expect(await failureOf(lost.getPushers('@x:example.org'))).toMatchObject({
      kind: 'Unavailable',
      errcode: 'M_UNKNOWN',
      status: 503,
      reason: 'unroutable',
    });
    expect(Date.now() - started).toBeLessThan(timeoutMs);
    await lost.close();
  });

  it('answers Unavailable at the deadline when no worker replies', async () => {
    const queue = `idle.${randomUUID()}`;
    await h.caller.channel.assertQueue(queue, { autoDelete: true });
    const idle = new PushRulesClient({ url: h.names.amqp.url, queue, readQueue: null });
    const started = Date.now();
    expect(await failureOf(idle.getPushers('@x:example.org', { timeoutMs: 300 }))).toMatchObject({
      status: 503,
      reason: 'timeout',
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    await idle.close();
    await h.caller.channel.deleteQueue(queue);
  });

  it('close() rejects pending calls with Unavailable, is idempotent, and refuses later calls', async () => {
    const queue = `idle.${randomUUID()}`;
    await h.caller.channel.assertQueue(queue, { autoDelete: true });
    const idle = new PushRulesClient({ url: h.names.amqp.url, queue, readQueue: null, timeoutMs: 10_000 });
    const pending = failureOf(
      idle.setPushRuleEnabled('@x:example.org', { scope: 'global', kind: 'override', ruleId: '.m.rule.master' }, true),
    );
    await new Promise((r) => setTimeout(r, 100));
    await idle.close();
    await idle.close();
    expect(await pending).toMatchObject({ kind: 'Unavailable', status: 503, reason: 'closed' });
    expect(await failureOf(idle.getPushers('@x:example.org'))).toMatchObject({ reason: 'closed' });
    await h.caller.channel.deleteQueue(queue);
  });
});
