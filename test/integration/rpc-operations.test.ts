import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { CONTRACT_KINDS, type ContractKind } from '../support/expect-result.js';
import { SEED } from '../support/seed-messages.js';
import type { ContractReply } from './support/rpc-caller.js';
import { startHarness, TEST_LIMITS, type Harness } from './support/worker-harness.js';

let h: Harness;
let n = 0;
const aUser = () => `@rpc${(n += 1)}:example.org`;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

function expectFailure(reply: ContractReply, kind: ContractKind, message: string | RegExp): void {
  expect(reply.ok).toBe(false);
  expect(reply.error).toMatchObject({ kind, ...CONTRACT_KINDS[kind] });
  if (typeof message === 'string') expect(reply.error?.error).toBe(message);
  else expect(reply.error?.error).toMatch(message);
}

const address = { scope: 'global', kind: 'override', rule_id: 'cake' };
const cakeRule = {
  actions: ['notify', { set_tweak: 'sound', value: 'cake.ogg' }],
  conditions: [{ kind: 'event_match', key: 'content.body', pattern: '*cake*' }],
};

describe('push-rule ops end to end', () => {
  it('get_pushrules on a new user answers and stores the defaults', async () => {
    const user = aUser();
    expect(await h.call('get_pushrules', user)).toEqual({ ok: true, body: { global: serverDefaultRuleset(user) } });
    const doc = await h.db.collection('account_data').findOne({ _id: user as never });
    expect(doc).toMatchObject({ version: 1, push_rules: { defaults_revision: 'v1.19' } });
    expect(await h.call('get_pushrules', user)).toEqual({ ok: true, body: { global: serverDefaultRuleset(user) } });
  });

  it('a rule goes through create, read, actions, enabled and delete', async () => {
    const user = aUser();
    await h.call('get_pushrules', user);
    expect(await h.call('set_pushrule', user, { ...address, rule: cakeRule })).toEqual({ ok: true, body: {} });
    expect(await h.call('get_pushrule', user, address)).toEqual({
      ok: true,
      body: { rule_id: 'cake', default: false, enabled: true, ...cakeRule },
    });
    expect(await h.call('get_pushrule_actions', user, address)).toEqual({
      ok: true,
      body: { actions: cakeRule.actions },
    });
    expect(await h.call('set_pushrule_actions', user, { ...address, actions: ['dont_notify'] })).toEqual({
      ok: true,
      body: {},
    });
    expect(await h.call('get_pushrule_actions', user, address)).toEqual({
      ok: true,
      body: { actions: ['dont_notify'] },
    });
    expect(await h.call('set_pushrule_enabled', user, { ...address, enabled: false })).toEqual({ ok: true, body: {} });
    expect(await h.call('get_pushrule_enabled', user, address)).toEqual({ ok: true, body: { enabled: false } });
    expect(await h.call('delete_pushrule', user, address)).toEqual({ ok: true, body: {} });
    expectFailure(await h.call('get_pushrule', user, address), 'NotFound', SEED.ruleNotFound);
    const all = await h.call('get_pushrules', user);
    expect(all).toEqual({ ok: true, body: { global: serverDefaultRuleset(user) } });
  });

  it('places rules with before and after', async () => {
    const user = aUser();
    await h.call('get_pushrules', user);
    for (const [id, placement] of [
      ['a', {}],
      ['c', { after: 'a' }],
      ['b', { before: 'c' }],
      ['a', { after: 'c' }],
    ] as const) {
      expect(await h.call('set_pushrule', user, { ...address, rule_id: id, rule: cakeRule, ...placement })).toEqual({
        ok: true,
        body: {},
      });
    }
    const reply = await h.call('get_pushrules', user);
    const override = (reply.body as { global: { override: { rule_id: string }[] } }).global.override.map(
      (r) => r.rule_id,
    );
    expect(override.slice(0, 4)).toEqual(['.m.rule.master', 'b', 'c', 'a']);
  });

  it('stores every kind, unknown conditions and actions as sent', async () => {
    const user = aUser();
    await h.call('get_pushrules', user);
    const weird = {
      actions: ['coalesce', { set_tweak: 'org.x', value: { deep: [1, null] } }, { 'org.y': true }],
      conditions: [{ kind: 'org.example.phase', 'a.b': 'c' }],
    };
    await h.call('set_pushrule', user, { ...address, kind: 'underride', rule_id: 'weird', rule: weird });
    await h.call('set_pushrule', user, {
      ...address,
      kind: 'content',
      rule_id: 'word',
      rule: { actions: ['notify'], pattern: 'word' },
    });
    await h.call('set_pushrule', user, { ...address, kind: 'room', rule_id: '!r:example.org', rule: { actions: [] } });
    await h.call('set_pushrule', user, {
      ...address,
      kind: 'sender',
      rule_id: '@spam:example.org',
      rule: { actions: ['dont_notify'] },
    });
    const { global } = (await h.call('get_pushrules', user)).body as { global: Record<string, unknown[]> };
    expect(global['underride']?.[0]).toEqual({ rule_id: 'weird', default: false, enabled: true, ...weird });
    expect(global['content']).toEqual([
      { rule_id: 'word', default: false, enabled: true, actions: ['notify'], pattern: 'word' },
    ]);
    expect(global['room']).toEqual([{ rule_id: '!r:example.org', default: false, enabled: true, actions: [] }]);
    expect(global['sender']).toEqual([
      { rule_id: '@spam:example.org', default: false, enabled: true, actions: ['dont_notify'] },
    ]);
  });

  it.each([
    ['get_pushrule', address],
    ['set_pushrule', { ...address, rule: cakeRule }],
    ['delete_pushrule', address],
    ['get_pushrule_actions', address],
    ['set_pushrule_actions', { ...address, actions: [] }],
    ['get_pushrule_enabled', address],
    ['set_pushrule_enabled', { ...address, enabled: true }],
  ])('%s on a user without push rules → NotFound, nothing stored', async (op, fields) => {
    const user = aUser();
    expectFailure(await h.call(op, user, fields), 'NotFound', SEED.eventNotFound);
    expect(await h.db.collection('account_data').findOne({ _id: user as never })).toBeNull();
  });

  it.each([
    ['set_pushrule', { ...address, scope: 'device', rule: cakeRule }, 'InvalidParam', SEED.scope],
    ['set_pushrule', { ...address, rule_id: '.mine', rule: cakeRule }, 'InvalidParam', SEED.dotReserved],
    ['set_pushrule', { ...address, rule_id: 'a/b', rule: cakeRule }, 'InvalidParam', SEED.invalidChars],
    ['set_pushrule', { ...address, rule: cakeRule, after: '.m.rule.master' }, 'InvalidParam', SEED.relativeToDefault],
    ['set_pushrule', { ...address, rule: cakeRule, before: 'ghost' }, 'NotFound', SEED.placementNotFound],
    [
      'set_pushrule',
      { ...address, kind: 'room', rule_id: 'not-a-room', rule: { actions: [] } },
      'InvalidParam',
      SEED.invalidData,
    ],
    ['delete_pushrule', { ...address, rule_id: '.m.rule.master' }, 'InvalidParam', SEED.deleteDefault],
    ['delete_pushrule', { ...address, rule_id: 'ghost' }, 'NotFound', SEED.ruleNotFound],
    ['get_pushrule_actions', { ...address, scope: 'device' }, 'InvalidParam', SEED.scope],
    ['get_pushrule_enabled', { ...address, rule_id: 'ghost' }, 'NotFound', SEED.ruleNotFound],
    ['set_pushrule_enabled', { ...address, kind: 'nonsense', enabled: true }, 'NotFound', SEED.ruleNotFound],
  ] as const)('%s refused: %o → %s', async (op, fields, kind, message) => {
    const user = aUser();
    await h.call('get_pushrules', user);
    const before = await h.db.collection('account_data').findOne({ _id: user as never });
    expectFailure(await h.call(op, user, fields), kind, message);
    expect(await h.db.collection('account_data').findOne({ _id: user as never })).toEqual(before);
  });

  it('get_pushrule ignores the scope', async () => {
    const user = aUser();
    await h.call('get_pushrules', user);
    const reply = await h.call('get_pushrule', user, { ...address, scope: 'device', rule_id: '.m.rule.master' });
    expect(reply).toEqual({ ok: true, body: serverDefaultRuleset(user).override[0] });
  });

  it('an undecodable stored event → Database error on every rule op, document untouched', async () => {
    const user = aUser();
    await h.db.collection('account_data').insertOne({
      _id: user as never,
      version: 3,
      push_rules: { content_json: '{"global": 7}', defaults_revision: 'v1.19' },
    });
    const before = await h.db.collection('account_data').findOne({ _id: user as never });
    for (const [op, fields] of [
      ['get_pushrules', {}],
      ['get_pushrule', address],
      ['set_pushrule', { ...address, rule: cakeRule }],
      ['delete_pushrule', address],
    ] as const) {
      expectFailure(await h.call(op, user, fields), 'Database', 'The stored push rules event could not be decoded.');
    }
    expect(await h.db.collection('account_data').findOne({ _id: user as never })).toEqual(before);
  });

  it('a stored event that cannot be read at all → defaults answered, stored ruleset never overwritten', async () => {
    const user = aUser();
    await h.db.collection('account_data').insertOne({
      _id: user as never,
      version: 2,
      push_rules: { content_json: '{corrupt', defaults_revision: 'v1.19' },
    });
    const before = await h.db.collection('account_data').findOne({ _id: user as never });
    expect(await h.call('get_pushrules', user)).toEqual({ ok: true, body: { global: serverDefaultRuleset(user) } });
    expect(await h.db.collection('account_data').findOne({ _id: user as never })).toEqual(before);
  });

  it('an event without content, or with empty content, is replaced by the defaults', async () => {
    for (const pushRules of [{ defaults_revision: 'v1.19' }, { content_json: '{}' }]) {
      const user = aUser();
      await h.db.collection('account_data').insertOne({ _id: user as never, version: 1, push_rules: pushRules });
      expectFailure(await h.call('get_pushrule', user, address), 'NotFound', SEED.eventNotFound);
      expect(await h.call('get_pushrules', user)).toEqual({ ok: true, body: { global: serverDefaultRuleset(user) } });
      expect(await h.db.collection('account_data').findOne({ _id: user as never })).toMatchObject({ version: 2 });
    }
  });

  it('a ruleset stored under older defaults is upgraded, and saved back on get_pushrules', async () => {
    const user = aUser();
    const current = serverDefaultRuleset(user);
    const userRule = { rule_id: 'mine', default: false, enabled: true, conditions: [], actions: ['notify'] };
    const old = {
      ...current,
      override: [
        { ...current.override[0], enabled: true },
        userRule,
        ...current.override.slice(1).filter((r) => r.rule_id !== '.m.rule.suppress_edits'),
      ],
      content: [
        { rule_id: '.m.rule.contains_user_name', default: true, enabled: true, pattern: 'x', actions: ['notify'] },
      ],
    };
    await h.db.collection('account_data').insertOne({
      _id: user as never,
      version: 5,
      push_rules: { content_json: JSON.stringify({ global: old }), defaults_revision: 'v1.4' },
    });
    const expected = {
      ...current,
      override: [{ ...current.override[0], enabled: true }, userRule, ...current.override.slice(1)],
    };
    expect(await h.call('get_pushrules', user)).toEqual({ ok: true, body: { global: expected } });
    const doc = await h.db.collection('account_data').findOne({ _id: user as never });
    expect(doc).toMatchObject({ version: 6, push_rules: { defaults_revision: 'v1.19' } });
    expect(JSON.parse((doc as unknown as { push_rules: { content_json: string } }).push_rules.content_json)).toEqual({
      global: expected,
    });
  });

  it('publishes a change event after each successful write', async () => {
    const user = aUser();
    const { queue } = await h.caller.channel.assertQueue('', { exclusive: true, autoDelete: true });
    await h.caller.channel.bindQueue(queue, h.names.amqp.eventsExchange, '#');
    await h.call('get_pushrules', user);
    await h.call('set_pushrule', user, { ...address, rule: cakeRule });
    expectFailure(
      await h.call('set_pushrule', user, { ...address, scope: 'x', rule: cakeRule }),
      'InvalidParam',
      SEED.scope,
    );
    await h.call('set_pusher', user, { action: pusherAction() });
    const events: unknown[] = [];
    for (let i = 0; i < 50 && events.length < 3; i += 1) {
      const message = await h.caller.channel.get(queue, { noAck: true });
      if (message === false) await new Promise((r) => setTimeout(r, 20));
      else events.push({ key: message.fields.routingKey, body: JSON.parse(message.content.toString()) as unknown });
    }
    expect(events).toEqual([
      { key: 'm.push_rules', body: { user_id: user, type: 'm.push_rules', version: 1 } },
      { key: 'm.push_rules', body: { user_id: user, type: 'm.push_rules', version: 2 } },
      { key: 'm.pushers', body: { user_id: user, type: 'm.pushers', version: 1 } },
    ]);
  });
});

function pusherAction(overrides: Record<string, unknown> = {}) {
  return {
    kind: 'http',
    app_id: 'org.example.app',
    pushkey: 'device-key',
    app_display_name: 'Example',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: 'https://push.example.org/_matrix/push/v1/notify', format: 'event_id_only', 'org.custom': { a: 1 } },
    ...overrides,
  };
}

describe('pusher ops end to end', () => {
  it('set, list, update and delete a pusher', async () => {
    const user = aUser();
    expect(await h.call('get_pushers', user)).toEqual({ ok: true, body: { pushers: [] } });
    expect(await h.call('set_pusher', user, { action: { ...pusherAction(), unknown_top_level: 1 } })).toEqual({
      ok: true,
      body: {},
    });
    const { append: _append, ...sent } = { ...pusherAction(), append: undefined };
    // Enabled by default, of an unknown device (the request named none).
    const listed = { ...sent, enabled: true, 'org.matrix.msc3881.enabled': true };
    expect(await h.call('get_pushers', user)).toEqual({ ok: true, body: { pushers: [listed] } });
    await h.call('set_pusher', user, { action: pusherAction({ lang: 'de', profile_tag: 'tag' }) });
    expect(await h.call('get_pushers', user)).toEqual({
      ok: true,
      body: { pushers: [{ ...listed, lang: 'de', profile_tag: 'tag' }] },
    });
    expect(
      await h.call('set_pusher', user, { action: { kind: null, app_id: 'org.example.app', pushkey: 'device-key' } }),
    ).toEqual({ ok: true, body: {} });
    expect(await h.call('get_pushers', user)).toEqual({ ok: true, body: { pushers: [] } });
    expect(
      await h.call('set_pusher', user, { action: { kind: null, app_id: 'org.example.app', pushkey: 'device-key' } }),
    ).toEqual({ ok: true, body: {} });
  });

  it.each([
    ['delete_pushers', { all: true, include_email: true }],
    ['delete_user_data', {}],
  ])('%s is refused Forbidden while the worker has no trusted publishers, and changes nothing', async (op, fields) => {
    const user = aUser();
    await h.call('get_pushrules', user);
    await h.call('set_pusher', user, { device_id: 'PHONE', action: pusherAction() });
    const before = await h.db.collection('account_data').findOne({ _id: user as never });
    expectFailure(
      await h.call(op, user, fields),
      'Forbidden',
      'delete_pushers and delete_user_data are homeserver ops: the worker serves them only to trusted publishers, and amqp.trustedPublishers (TRUSTED_PUBLISHERS) is empty.',
    );
    expect(((await h.call('get_pushers', user)).body as { pushers: unknown[] }).pushers).toHaveLength(1);
    expect(await h.db.collection('account_data').findOne({ _id: user as never })).toEqual(before);
  });

  it('append false takes the pushkey from other users; append true leaves it', async () => {
    const first = aUser();
    const second = aUser();
    const third = aUser();
    const action = pusherAction({ pushkey: `shared-${n}` });
    await h.call('set_pusher', first, { action });
    await h.call('set_pusher', second, { action: { ...action, append: true } });
    expect(((await h.call('get_pushers', first)).body as { pushers: unknown[] }).pushers).toHaveLength(1);
    await h.call('set_pusher', third, { action });
    expect(await h.call('get_pushers', first)).toEqual({ ok: true, body: { pushers: [] } });
    expect(await h.call('get_pushers', second)).toEqual({ ok: true, body: { pushers: [] } });
    expect(((await h.call('get_pushers', third)).body as { pushers: unknown[] }).pushers).toHaveLength(1);
  });

  it.each([
    [
      { kind: 'http' },
      'MissingParam',
      'Missing parameters: app_id, pushkey, app_display_name, device_display_name, lang, data',
    ],
    [pusherAction({ pushkey: 'k'.repeat(513) }), 'InvalidParam', 'pushkey must be at most 512 bytes.'],
    [pusherAction({ app_id: 'a'.repeat(65) }), 'InvalidParam', 'app_id must be at most 64 characters.'],
    [
      pusherAction({ data: { url: 'http://push.example.org/_matrix/push/v1/notify' } }),
      'InvalidParam',
      'data.url must be an https URL.',
    ],
    [
      pusherAction({ data: { url: 'https://push.example.org/other' } }),
      'InvalidParam',
      'data.url must have the path /_matrix/push/v1/notify.',
    ],
    [pusherAction({ lang: 5 }), 'BadJson', 'action.lang must be string.'],
  ] as const)('refuses %o → %s, stores nothing', async (action, kind, message) => {
    const user = aUser();
    expectFailure(await h.call('set_pusher', user, { action }), kind, message);
    expect(await h.call('get_pushers', user)).toEqual({ ok: true, body: { pushers: [] } });
  });
});

describe('limits on what a user accumulates, end to end', () => {
  it('the rule past maxUserRules gets TooLarge; deleting makes room again', async () => {
    const user = aUser();
    await h.call('get_pushrules', user);
    const room = (i: number) => ({ scope: 'global', kind: 'room', rule_id: `!r${i}:example.org` });
    for (let i = 0; i < TEST_LIMITS.maxUserRules; i += 1) {
      expect(await h.call('set_pushrule', user, { ...room(i), rule: { actions: [] } })).toEqual({ ok: true, body: {} });
    }
    expectFailure(
      await h.call('set_pushrule', user, { ...room(99), rule: { actions: [] } }),
      'TooLarge',
      `Too many push rules: a user may have at most ${TEST_LIMITS.maxUserRules} of their own.`,
    );
    expect(await h.call('delete_pushrule', user, room(0))).toEqual({ ok: true, body: {} });
    expect(await h.call('set_pushrule', user, { ...room(99), rule: { actions: [] } })).toEqual({ ok: true, body: {} });
  });

  it('the pusher past maxPushersPerUser gets TooLarge', async () => {
    const user = aUser();
    const pusher = (pushkey: string) => ({
      action: {
        kind: 'email',
        app_id: 'm.email',
        pushkey,
        app_display_name: 'E',
        device_display_name: 'E',
        lang: 'en',
        data: {},
      },
    });
    for (let i = 0; i < TEST_LIMITS.maxPushersPerUser; i += 1) {
      expect(await h.call('set_pusher', user, pusher(`p${i}@example.org`))).toEqual({ ok: true, body: {} });
    }
    expectFailure(
      await h.call('set_pusher', user, pusher('extra@example.org')),
      'TooLarge',
      `Too many pushers: a user may have at most ${TEST_LIMITS.maxPushersPerUser}.`,
    );
  });
});
