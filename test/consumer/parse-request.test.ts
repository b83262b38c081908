import { describe, expect, it } from 'vitest';
import { parseRequest } from '../../src/consumer/parse-request.js';
import { OPS } from '../../src/contract/ops.js';
import { ALICE } from '../support/builders.js';
import { expectError, expectOk } from '../support/expect-result.js';
import { encode, LIMIT, parse } from '../support/parse-request-builders.js';

// Bodies that are JSON but hostile (nested too deep, keys that reach a
// prototype) are in parse-request-hostile-json.test.ts.

const address = { scope: 'global', kind: 'override', rule_id: 'my.rule' };

/** One valid request per op of the contract. */
const VALID: Record<(typeof OPS)[number], Record<string, unknown>> = {
  get_pushrules: {},
  get_pushrule: address,
  set_pushrule: { ...address, rule: { actions: ['notify'], conditions: [] }, before: 'b', after: 'a' },
  delete_pushrule: address,
  get_pushrule_actions: address,
  set_pushrule_actions: { ...address, actions: ['notify'] },
  get_pushrule_enabled: address,
  set_pushrule_enabled: { ...address, enabled: false },
  get_pushers: {},
  set_pusher: { action: { kind: null, app_id: 'a', pushkey: 'k' } },
  delete_pushers: { device_ids: ['PHONE'] },
  delete_user_data: {},
};

describe('parsing requests: one per op', () => {
  it('covers every op of the contract', () => {
    expect([...OPS].sort()).toEqual(Object.keys(VALID).sort());
  });

  it.each(Object.entries(VALID))('%s parses into its command', (op, fields) => {
    const command = expectOk(parse({ op, user_id: ALICE, ...fields, 'org.example.extra': 1 }));
    expect(command.op).toBe(op);
    expect(command.userId).toBe(ALICE);
  });

  it('maps wire names to the command', () => {
    expect(expectOk(parse({ op: 'set_pushrule', user_id: ALICE, ...VALID.set_pushrule }))).toEqual({
      op: 'set_pushrule',
      userId: ALICE,
      request: {
        scope: 'global',
        kind: 'override',
        ruleId: 'my.rule',
        body: { actions: ['notify'], conditions: [] },
        before: 'b',
        after: 'a',
      },
    });
    expect(expectOk(parse({ op: 'set_pushrule_enabled', user_id: ALICE, ...address, enabled: true }))).toEqual({
      op: 'set_pushrule_enabled',
      userId: ALICE,
      address: { scope: 'global', kind: 'override', ruleId: 'my.rule' },
      enabled: true,
    });
  });

  it('an unknown kind is not a schema error outside set_pushrule', () => {
    expect(parse({ op: 'get_pushrule', user_id: ALICE, ...address, kind: 'nonsense' }).ok).toBe(true);
  });
});

describe('parsing requests: pushers of devices', () => {
  const setPusher = (fields: Record<string, unknown>) =>
    parse({ op: 'set_pusher', user_id: ALICE, action: { kind: null, app_id: 'a', pushkey: 'k' }, ...fields });

  it('set_pusher takes the device from the envelope, and only from there', () => {
    expect(expectOk(setPusher({ device_id: 'PHONE' }))).toEqual({
      op: 'set_pusher',
      userId: ALICE,
      deviceId: 'PHONE',
      action: { kind: null, app_id: 'a', pushkey: 'k' },
    });
    expect(expectOk(setPusher({}))).not.toHaveProperty('deviceId');
    // The client's device_id keys stay in the action, which nothing reads them from.
    const posted = {
      kind: null,
      app_id: 'a',
      pushkey: 'k',
      device_id: 'STOLEN',
      'org.matrix.msc3881.device_id': 'STOLEN',
    };
    expect(expectOk(setPusher({ action: posted }))).not.toHaveProperty('deviceId');
    // Any type: it is ignored, not validated.
    expect(setPusher({ action: { ...posted, device_id: 5 } }).ok).toBe(true);
  });

  it.each([
    [{ device_id: '' }, 'device_id must NOT have fewer than 1 characters.'],
    [{ device_id: 7 }, 'device_id must be string.'],
    [{ action: { kind: null, app_id: 'a', pushkey: 'k', enabled: 'no' } }, 'action.enabled must be boolean,null.'],
    [
      { action: { kind: null, app_id: 'a', pushkey: 'k', 'org.matrix.msc3881.enabled': 0 } },
      'action.org.matrix.msc3881.enabled must be boolean,null.',
    ],
  ])('set_pusher refuses %j → BadJson', (fields, message) => {
    expectError(setPusher(fields), 'BadJson', message);
  });

  it('set_pusher takes enabled under both names, null as not given', () => {
    const action = { kind: null, app_id: 'a', pushkey: 'k', enabled: false, 'org.matrix.msc3881.enabled': null };
    expect(expectOk(setPusher({ action }))).toMatchObject({ action });
  });

  const deletePushers = (fields: Record<string, unknown>) => parse({ op: 'delete_pushers', user_id: ALICE, ...fields });

  it.each([
    [{ device_ids: ['A', 'B'] }, { deviceIds: ['A', 'B'] }, false],
    [{ device_ids: [] }, { deviceIds: [] }, false],
    [{ except_device_id: 'A', include_email: false }, { exceptDeviceId: 'A' }, false],
    [{ all: true, include_email: true }, { all: true }, true],
  ])('delete_pushers %j selects %j', (fields, devices, includeEmail) => {
    expect(expectOk(deletePushers(fields))).toEqual({ op: 'delete_pushers', userId: ALICE, devices, includeEmail });
  });

  it.each([
    ['no selector', {}, 'delete_pushers needs one of device_ids, except_device_id or all.'],
    ['only include_email', { include_email: true }, 'delete_pushers needs one of device_ids, except_device_id or all.'],
    [
      'all and device_ids',
      { all: true, device_ids: ['A'] },
      'delete_pushers takes only one of device_ids, except_device_id and all.',
    ],
    [
      'device_ids and except_device_id',
      { device_ids: ['A'], except_device_id: 'B' },
      'delete_pushers takes only one of device_ids, except_device_id and all.',
    ],
    [
      'all three',
      { all: true, device_ids: [], except_device_id: 'B' },
      'delete_pushers takes only one of device_ids, except_device_id and all.',
    ],
    ['all: false', { all: false }, 'all must be true when given.'],
    ['device_ids not an array', { device_ids: 'A' }, 'device_ids must be array.'],
    ['device_ids with a number', { device_ids: ['A', 2] }, 'device_ids.1 must be string.'],
    ['device_ids with an empty ID', { device_ids: [''] }, 'device_ids.0 must NOT have fewer than 1 characters.'],
    ['an empty except_device_id', { except_device_id: '' }, 'except_device_id must NOT have fewer than 1 characters.'],
    ['include_email not a boolean', { all: true, include_email: 'yes' }, 'include_email must be boolean.'],
    ['an invalid user_id', { user_id: 'alice', all: true }, 'user_id is not a valid Matrix user ID.'],
  ])('delete_pushers refuses %s → BadJson', (_case, fields, message) => {
    expectError(deletePushers(fields), 'BadJson', message);
  });

  it('delete_user_data needs a valid user_id', () => {
    expect(expectOk(parse({ op: 'delete_user_data', user_id: ALICE }))).toEqual({
      op: 'delete_user_data',
      userId: ALICE,
    });
    expectError(parse({ op: 'delete_user_data', user_id: '@:' }), 'BadJson', 'user_id is not a valid Matrix user ID.');
    expectError(parse({ op: 'delete_user_data' }), 'BadJson', "request must have required property 'user_id'.");
  });
});

describe('parsing requests: refusals', () => {
  it.each([
    ['not JSON', '{"op": ', 'BadJson', 'Request body is not valid JSON.'],
    ['JSON but an array', '[]', 'BadJson', 'Request body must be a JSON object.'],
    ['JSON but a string', '"get_pushrules"', 'BadJson', 'Request body must be a JSON object.'],
    ['JSON null', 'null', 'BadJson', 'Request body must be a JSON object.'],
    ['no op', { user_id: ALICE }, 'BadJson', 'Request needs a string op.'],
    ['a numeric op', { op: 1, user_id: ALICE }, 'BadJson', 'Request needs a string op.'],
    ['an unknown op', { op: 'launch_rockets', user_id: ALICE }, 'Unrecognized', 'Unrecognized op: "launch_rockets".'],
    ['no user_id', { op: 'get_pushrules' }, 'BadJson', "request must have required property 'user_id'."],
    [
      'an invalid user_id',
      { op: 'get_pushrules', user_id: 'alice' },
      'BadJson',
      'user_id is not a valid Matrix user ID.',
    ],
    [
      'a missing field',
      { op: 'get_pushrule', user_id: ALICE, scope: 'global', kind: 'override' },
      'BadJson',
      "request must have required property 'rule_id'.",
    ],
    [
      'an empty rule_id',
      { op: 'get_pushrule', user_id: ALICE, ...address, rule_id: '' },
      'BadJson',
      'rule_id must NOT have fewer than 1 characters.',
    ],
    [
      'a wrong field type',
      { op: 'set_pushrule_enabled', user_id: ALICE, ...address, enabled: 'yes' },
      'BadJson',
      'enabled must be boolean.',
    ],
    [
      'an unknown kind on set_pushrule',
      { op: 'set_pushrule', user_id: ALICE, ...address, kind: 'nonsense', rule: { actions: [] } },
      'BadJson',
      /^kind /,
    ],
    [
      'a rule without actions',
      { op: 'set_pushrule', user_id: ALICE, ...address, rule: { conditions: [] } },
      'BadJson',
      "rule must have required property 'actions'.",
    ],
    [
      'a rule whose actions is not a list',
      { op: 'set_pushrule', user_id: ALICE, ...address, rule: { actions: 'notify', conditions: [] } },
      'BadJson',
      'rule.actions must be array.',
    ],
    [
      'a rule invalid for its kind',
      { op: 'set_pushrule', user_id: ALICE, ...address, rule: { actions: [] } },
      'BadJson',
      'override rules need conditions.',
    ],
    [
      'a rule with an invalid action',
      { op: 'set_pushrule', user_id: ALICE, ...address, rule: { actions: [1], conditions: [] } },
      'BadJson',
      'actions[0] must be a string or an object.',
    ],
    [
      'set actions with an invalid action',
      { op: 'set_pushrule_actions', user_id: ALICE, ...address, actions: [null] },
      'BadJson',
      'actions[0] must be a string or an object.',
    ],
    [
      'a non-string before',
      { op: 'set_pushrule', user_id: ALICE, ...address, rule: { actions: [], conditions: [] }, before: 1 },
      'BadJson',
      'before must be string.',
    ],
    [
      'a pusher action that is not an object',
      { op: 'set_pusher', user_id: ALICE, action: [] },
      'BadJson',
      'action must be object.',
    ],
    [
      'a pusher kind of the wrong type',
      { op: 'set_pusher', user_id: ALICE, action: { kind: 1 } },
      'BadJson',
      'action.kind must be string,null.',
    ],
    [
      'pusher data that is not an object',
      { op: 'set_pusher', user_id: ALICE, action: { data: 'x' } },
      'BadJson',
      'action.data must be object.',
    ],
  ] as const)('%s → %s', (_case, body, kind, message) => {
    expectError(parse(body), kind, message);
  });

  it('refuses a body over the size limit before parsing it', () => {
    const body = encode({ op: 'get_pushrules', user_id: ALICE, pad: 'x'.repeat(100) });
    expectError(
      parseRequest(body, { ...LIMIT, maxRequestBytes: 50 }),
      'TooLarge',
      'Request body is larger than 50 bytes.',
    );
    expect(parseRequest(body, { ...LIMIT, maxRequestBytes: body.byteLength }).ok).toBe(true);
  });

  describe('per-request limits (InvalidParam naming the limit)', () => {
    const limits = { ...LIMIT, maxStringBytes: 64, maxActionsPerRule: 2, maxConditionsPerRule: 1 };
    const cond = (pattern: string) => ({ kind: 'event_match', key: 'content.body', pattern });
    const limited = (body: unknown) => parseRequest(encode(body), limits);

    it.each([
      [
        'a rule_id',
        { op: 'delete_pushrule', user_id: ALICE, ...address, rule_id: 'r'.repeat(65) },
        'rule_id is longer than 64 bytes.',
      ],
      [
        'a condition pattern',
        { op: 'set_pushrule', user_id: ALICE, ...address, rule: { actions: [], conditions: [cond('p'.repeat(65))] } },
        'rule.conditions.0.pattern is longer than 64 bytes.',
      ],
      [
        'a string counted in UTF-8 bytes',
        { op: 'set_pushrule', user_id: ALICE, ...address, rule: { actions: [], conditions: [cond('é'.repeat(33))] } },
        'rule.conditions.0.pattern is longer than 64 bytes.',
      ],
      [
        'a tweak value',
        {
          op: 'set_pushrule_actions',
          user_id: ALICE,
          ...address,
          actions: [{ set_tweak: 'sound', value: 's'.repeat(65) }],
        },
        'actions.0.value is longer than 64 bytes.',
      ],
      [
        'a pusher field',
        { op: 'set_pusher', user_id: ALICE, action: { app_display_name: 'n'.repeat(65) } },
        'action.app_display_name is longer than 64 bytes.',
      ],
      [
        'a key in pusher data',
        { op: 'set_pusher', user_id: ALICE, action: { data: { ['k'.repeat(65)]: 1 } } },
        'A key in action.data is longer than 64 bytes.',
      ],
      [
        'too many actions',
        { op: 'set_pushrule_actions', user_id: ALICE, ...address, actions: ['notify', 'notify', 'notify'] },
        'Too many actions: a rule may have at most 2.',
      ],
      [
        'too many actions in a rule',
        {
          op: 'set_pushrule',
          user_id: ALICE,
          ...address,
          rule: { actions: ['notify', 'notify', 'notify'], conditions: [] },
        },
        'Too many actions: a rule may have at most 2.',
      ],
      [
        'too many conditions',
        { op: 'set_pushrule', user_id: ALICE, ...address, rule: { actions: [], conditions: [cond('a'), cond('b')] } },
        'Too many conditions: a rule may have at most 1.',
      ],
    ])('%s over the limit', (_case, body, message) => {
      expectError(limited(body), 'InvalidParam', message);
    });

    it('accepts everything exactly at the limits', () => {
      const atLimit = {
        op: 'set_pushrule',
        user_id: ALICE,
        ...address,
        rule_id: 'r'.repeat(64),
        rule: { actions: ['notify', 'notify'], conditions: [cond('é'.repeat(32))] },
      };
      expectOk(limited(atLimit));
    });

    it('a malformed request is BadJson before any limit is checked', () => {
      expectError(
        limited({ op: 'set_pushrule', user_id: ALICE, ...address, rule: { actions: 'x'.repeat(100) } }),
        'BadJson',
        'rule.actions must be array.',
      );
    });
  });
});
