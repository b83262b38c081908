import { describe, expect, it } from 'vitest';
import { evaluateLimits } from '../../src/consumer/evaluate-queue.js';
import { parseEvaluateRequest } from '../../src/consumer/evaluate-request.js';
import { notifyLimits } from '../../src/consumer/notify-queue.js';
import { parseNotifyRequest } from '../../src/consumer/notify-request.js';
import { parseRequest } from '../../src/consumer/parse-request.js';
import { USER_ID_PATTERN } from '../../src/contract/request-rules.js';
import { ERROR_KINDS, matrixError } from '../../src/errors/error-catalogue.js';
import { isValidUserId } from '../../src/matrix/user-id.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { aPusherSetAction } from '../support/builders.js';
import {
  changeEventProblems,
  evaluateEntryProblems,
  OPS_WITH_REPLY_SCHEMAS,
  replyProblems,
  requestProblems,
} from '../support/contract-validator.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';

/**
 * contract/schemas/ is what a caller in another language checks its
 * messages with. What they accept, a worker accepts; what they refuse, a
 * worker refuses (with its own words): each body below goes through both.
 */
const USER = '@alice:example.org';
const RULE = { user_id: USER, scope: 'global', kind: 'override', rule_id: 'mine' };
const EVENT = {
  type: 'm.room.message',
  room_id: '!r:example.org',
  sender: '@bob:example.org',
  content: { body: 'hi' },
};
const ROOM = { member_count: 2, sender_power_level: 0, notification_power_levels: { room: 50 } };
const PLAIN = { event: EVENT, room: ROOM, recipients: [{ user_id: USER, display_name: 'Alice' }] };
const GROUPED = {
  event: EVENT,
  room: ROOM,
  recipients_by_server: [{ server: 'example.org', localparts: ['alice', 'carol'], display_names: ['Alice', null] }],
};
const NOTIFY = {
  op: 'notify',
  notification: { event_id: '$e:example.org', room_id: '!r:example.org', prio: 'high' },
  recipients: [{ user_id: USER, actions: ['notify'], counts: { unread: 1 } }],
};

const { limits } = DEFAULT_CONFIG;
const encode = (body: unknown) => Buffer.from(JSON.stringify(body));

/** What a worker's parser makes of the body: `ok`, or the error kind it answers. */
function workerVerdict(body: Record<string, unknown>): string {
  const bytes = encode(body);
  const parsed =
    body['op'] === 'evaluate'
      ? parseEvaluateRequest(bytes, evaluateLimits(DEFAULT_CONFIG.evaluate, limits.maxJsonDepth))
      : body['op'] === 'notify'
        ? parseNotifyRequest(bytes, notifyLimits(DEFAULT_CONFIG.delivery, limits.maxJsonDepth))
        : parseRequest(bytes, limits);
  return parsed.ok ? 'ok' : parsed.error.kind;
}

const GOOD: readonly (readonly [string, Record<string, unknown>])[] = [
  ['get_pushrules', { op: 'get_pushrules', user_id: USER }],
  ['get_pushrule', { op: 'get_pushrule', ...RULE }],
  [
    'set_pushrule, placed',
    { op: 'set_pushrule', ...RULE, rule: { actions: ['notify'], conditions: [] }, before: 'other' },
  ],
  ['delete_pushrule', { op: 'delete_pushrule', ...RULE }],
  ['get_pushrule_actions', { op: 'get_pushrule_actions', ...RULE }],
  ['set_pushrule_actions', { op: 'set_pushrule_actions', ...RULE, actions: [{ set_tweak: 'sound', value: 'x' }] }],
  ['get_pushrule_enabled', { op: 'get_pushrule_enabled', ...RULE }],
  ['set_pushrule_enabled', { op: 'set_pushrule_enabled', ...RULE, enabled: false }],
  ['get_pushers', { op: 'get_pushers', user_id: USER }],
  [
    'set_pusher',
    { op: 'set_pusher', user_id: USER, device_id: 'DEV', action: { ...aPusherSetAction(), enabled: null } },
  ],
  ['delete_pushers by devices', { op: 'delete_pushers', user_id: USER, device_ids: ['A', 'B'] }],
  ['delete_pushers but one', { op: 'delete_pushers', user_id: USER, except_device_id: 'A', include_email: true }],
  ['delete_pushers all', { op: 'delete_pushers', user_id: USER, all: true }],
  ['delete_user_data', { op: 'delete_user_data', user_id: USER }],
  ['a historical user ID, a server with a port', { op: 'get_pushers', user_id: '@Old=Name!:[::1]:8448' }],
  ['an unknown field (ignored)', { op: 'get_pushers', user_id: USER, extra: { any: 1 } }],
  ['evaluate, plain', { op: 'evaluate', ...PLAIN, explain: true }],
  ['evaluate, grouped', { op: 'evaluate', ...GROUPED, runs: true, compact: true }],
  ['evaluate, batch', { op: 'evaluate', events: [PLAIN, { ...GROUPED, explain: true }] }],
  ['notify', NOTIFY],
  [
    'notify, a badge change',
    { op: 'notify', notification: {}, recipients: [{ user_id: USER, counts: { unread: 0 } }] },
  ],
];

const BAD: readonly (readonly [string, Record<string, unknown>])[] = [
  ['no op', { user_id: USER }],
  ['an unknown op', { op: 'get_everything', user_id: USER }],
  ['no user_id', { op: 'get_pushrules' }],
  ['a user_id that is no user ID', { op: 'get_pushrules', user_id: 'alice' }],
  ['a user ID with a bad server name', { op: 'get_pushrules', user_id: '@alice:exa_mple.org' }],
  ['an empty rule_id', { op: 'get_pushrule', ...RULE, rule_id: '' }],
  ['set_pushrule of an unknown kind', { op: 'set_pushrule', ...RULE, kind: 'everything', rule: { actions: [] } }],
  ['set_pushrule without actions', { op: 'set_pushrule', ...RULE, rule: {} }],
  ['enabled as text', { op: 'set_pushrule_enabled', ...RULE, enabled: 'yes' }],
  ['set_pusher without action', { op: 'set_pusher', user_id: USER }],
  ['delete_pushers without a selector', { op: 'delete_pushers', user_id: USER }],
  ['delete_pushers with two selectors', { op: 'delete_pushers', user_id: USER, all: true, device_ids: ['A'] }],
  ['delete_pushers all: false', { op: 'delete_pushers', user_id: USER, all: false }],
  ['delete_pushers with an empty device ID', { op: 'delete_pushers', user_id: USER, device_ids: [''] }],
  ['evaluate with both recipient forms', { op: 'evaluate', ...PLAIN, ...GROUPED }],
  ['evaluate without recipients', { op: 'evaluate', event: EVENT, room: ROOM }],
  ['evaluate with a recipient that is no user ID', { op: 'evaluate', ...PLAIN, recipients: [{ user_id: 'bob' }] }],
  [
    'evaluate with a null display name',
    { op: 'evaluate', ...PLAIN, recipients: [{ user_id: USER, display_name: null }] },
  ],
  ['evaluate with a negative member count', { op: 'evaluate', ...PLAIN, room: { member_count: -1 } }],
  ['evaluate with content not an object', { op: 'evaluate', ...PLAIN, event: { ...EVENT, content: 'hi' } }],
  ['evaluate, events beside event', { op: 'evaluate', ...PLAIN, events: [PLAIN] }],
  ['evaluate, no events', { op: 'evaluate', events: [] }],
  ['notify without recipients', { op: 'notify', notification: {} }],
  ['notify to no user ID', { ...NOTIFY, recipients: [{ user_id: 'alice' }] }],
  ['notify with an unknown prio', { ...NOTIFY, notification: { prio: 'urgent' } }],
  ['notify with a negative count', { ...NOTIFY, recipients: [{ user_id: USER, counts: { unread: -1 } }] }],
];

describe('contract/schemas/request.schema.json', () => {
  it.each(GOOD)('accepts %s, as a worker does', (_name, body) => {
    expect(requestProblems(body)).toBeUndefined();
    expect(workerVerdict(body)).toBe('ok');
  });

  it.each(BAD)('refuses %s, as a worker does', (_name, body) => {
    expect(requestProblems(body)).toBeDefined();
    expect(workerVerdict(body)).not.toBe('ok');
  });

  it('refuses a batch with a bad entry, whose entry alone the worker refuses (the others are evaluated)', () => {
    const bad = { ...PLAIN, recipients: [{ user_id: 'bob' }] };
    const body = { op: 'evaluate', events: [PLAIN, bad] };
    expect(requestProblems(body)).toBeDefined();
    expect(evaluateEntryProblems(PLAIN)).toBeUndefined();
    expect(evaluateEntryProblems(bad)).toBeDefined();
    const parsed = parseEvaluateRequest(encode(body), evaluateLimits(DEFAULT_CONFIG.evaluate, limits.maxJsonDepth));
    expect(parsed.ok && parsed.value.op === 'evaluate_batch' && parsed.value.events.map((e) => e.ok)).toEqual([
      true,
      false,
    ]);
  });

  it.each([
    ['@alice:example.org', true],
    ['@a:localhost:8448', true],
    ['@a:1.2.3.4', true],
    ['@a:[2001:db8::1]:80', true],
    ['@Old"Name~:example.org', true],
    [`@${'a'.repeat(242)}:example.org`, true],
    [`@${'a'.repeat(243)}:example.org`, false],
    ['@:example.org', false],
    ['@a b:example.org', false],
    ['@a:', false],
    ['@a:example.org:port', false],
    ['alice:example.org', false],
    ['@é:example.org', false],
  ])('its user ID pattern takes %s as valid: %s, as isValidUserId does', (userId, valid) => {
    expect(isValidUserId(userId)).toBe(valid);
    expect(new RegExp(USER_ID_PATTERN).test(userId) && userId.length <= 255).toBe(valid);
    expect(requestProblems({ op: 'get_pushers', user_id: userId }) === undefined).toBe(valid);
  });
});

describe('contract/schemas/reply.schema.json and ops/', () => {
  it('has a success-body schema for every op, evaluate and notify included', () => {
    expect([...OPS_WITH_REPLY_SCHEMAS].sort()).toEqual(
      [
        ...['get_pushrules', 'get_pushrule', 'set_pushrule', 'delete_pushrule', 'get_pushrule_actions'],
        ...['set_pushrule_actions', 'get_pushrule_enabled', 'set_pushrule_enabled', 'get_pushers', 'set_pusher'],
        ...['delete_pushers', 'delete_user_data', 'evaluate', 'notify'],
      ].sort(),
    );
  });

  const ruleset = serverDefaultRuleset(USER);
  const master = ruleset.override[0];
  it.each([
    ['get_pushrules', { global: ruleset }],
    ['get_pushrule', master],
    ['set_pushrule', {}],
    ['get_pushrule_actions', { actions: ['notify', { set_tweak: 'highlight' }] }],
    ['get_pushrule_enabled', { enabled: true }],
    ['get_pushers', { pushers: [] }],
    ['delete_pushers', { deleted: 2 }],
    ['evaluate', { notify: { [USER]: ['notify'] }, evaluated: 2, rule_ids: { [USER]: '.m.rule.message', b: null } }],
    ['evaluate', { notify_groups: [{ actions: ['notify'], user_ids: [USER] }], evaluated: 2 }],
    ['evaluate', { notify_groups: [{ actions: ['notify'], runs: [0, 2, 5, 1] }], evaluated: 9 }],
    ['evaluate', { results: [{ ok: true, body: { notify: {}, evaluated: 0 } }, matrixFailure('BadJson')] }],
    ['notify', { recipients: 1, devices: 2 }],
    ['notify', { recipients: 1, devices: 2, pending: 3 }],
  ])('accepts a %s success as workers send it', (op, body) => {
    expect(replyProblems(op, { ok: true, body })).toBeUndefined();
  });

  it.each(Object.keys(ERROR_KINDS))('accepts the %s error as workers send it', (kind) => {
    expect(replyProblems('get_pushrules', matrixFailure(kind))).toBeUndefined();
  });

  it.each<readonly [string, unknown, string]>([
    ['get_pushrules', { ok: true, body: { global: { override: [] } } }, 'a ruleset without every kind'],
    ['get_pushrule_enabled', { ok: true, body: { enabled: 'yes' } }, 'enabled as text'],
    ['delete_pushers', { ok: true, body: {} }, 'no count'],
    ['evaluate', { ok: true, body: { notify_groups: [{ actions: [], runs: [-1] }], evaluated: 1 } }, 'a negative run'],
    ['get_pushers', { ok: true }, 'a success without body'],
    ['notify', { ok: true, body: { recipients: 1, devices: 2, pending: 0 } }, 'pending 0 (absent instead)'],
    [
      'get_pushers',
      { ok: false, error: { kind: 'NotFound', errcode: 'M_UNKNOWN', error: 'x', status: 404 } },
      'a kind with another errcode',
    ],
    [
      'get_pushers',
      { ok: false, error: { kind: 'Lost', errcode: 'M_UNKNOWN', error: 'x', status: 500 } },
      'an unknown kind',
    ],
  ])('refuses a %s reply with %j (%s)', (op, reply, _why) => {
    expect(replyProblems(op, reply)).toBeDefined();
  });
});

describe('contract/schemas/change-event.schema.json', () => {
  it('accepts an event as workers publish it, and refuses another type', () => {
    expect(changeEventProblems({ user_id: USER, type: 'm.pushers', version: 3 })).toBeUndefined();
    expect(changeEventProblems({ user_id: USER, type: 'm.direct', version: 3 })).toBeDefined();
    expect(changeEventProblems({ user_id: USER, type: 'm.pushers' })).toBeDefined();
  });
});

function matrixFailure(kind: string): { ok: false; error: unknown } {
  return { ok: false, error: matrixError(kind as keyof typeof ERROR_KINDS, 'As the worker says it.').toBody() };
}
