import { describe, expect, it } from 'vitest';
import type { RuleKind } from '../../src/push-rules/push-rule.js';
import { validateRuleBody, type RawRuleBody } from '../../src/push-rules/validate-rule-body.js';
import { expectError, expectOk } from '../support/expect-result.js';

describe('rule bodies: what is kept exactly as sent', () => {
  it.each([
    ['notify', ['notify']],
    ['dont_notify and coalesce (removed from the spec)', ['dont_notify', 'coalesce']],
    ['an unknown action word', ['org.example.flash']],
    ['a sound tweak', [{ set_tweak: 'sound', value: 'default' }]],
    ['a highlight tweak without value', [{ set_tweak: 'highlight' }]],
    ['a highlight tweak with value', [{ set_tweak: 'highlight', value: false }]],
    ['a custom tweak with an object value', [{ set_tweak: 'org.example.colour', value: { r: 1 } }]],
    ['a custom tweak without value', [{ set_tweak: 'org.example.mute' }]],
    ['an object that is not a tweak', [{ 'org.example.action': [1, 2] }]],
    ['no actions', []],
  ])('actions: %s', (_case, actions) => {
    expect(expectOk(validateRuleBody('room', { actions })).actions).toEqual(actions);
  });

  it.each([
    ['event_match', { kind: 'event_match', key: 'content.body', pattern: 'cake*' }],
    ['event_property_is with null', { kind: 'event_property_is', key: 'content.x', value: null }],
    ['event_property_is with an integer', { kind: 'event_property_is', key: 'content.x', value: 42 }],
    ['event_property_contains with a string', { kind: 'event_property_contains', key: 'content.x', value: 'y' }],
    ['contains_display_name', { kind: 'contains_display_name' }],
    ['room_member_count', { kind: 'room_member_count', is: '>=2' }],
    ['sender_notification_permission', { kind: 'sender_notification_permission', key: 'room' }],
    ['an unknown kind with its own fields', { kind: 'org.example.moon_phase', phase: 'full', n: [1, { x: null }] }],
    ['a known kind with an extra field', { kind: 'event_match', key: 'type', pattern: 'm.x', 'org.example': true }],
  ])('conditions: %s', (_case, condition) => {
    expect(expectOk(validateRuleBody('override', { actions: [], conditions: [condition] })).conditions).toEqual([
      condition,
    ]);
  });

  it('content rules keep their pattern', () => {
    expect(expectOk(validateRuleBody('content', { actions: ['notify'], pattern: 'cake' }))).toEqual({
      actions: ['notify'],
      pattern: 'cake',
    });
  });

  it.each<[RuleKind, RawRuleBody]>([
    ['room', { actions: [], conditions: [{ kind: 'x' }], pattern: 'p' }],
    ['sender', { actions: [], pattern: 'p' }],
    ['content', { actions: [], pattern: 'p', conditions: [] }],
    ['override', { actions: [], conditions: [], pattern: 'p' }],
  ])('%s rules drop the fields their kind does not use', (kind, raw) => {
    const body = expectOk(validateRuleBody(kind, raw));
    expect(Object.keys(body).sort()).toEqual(
      kind === 'content' ? ['actions', 'pattern'] : kind === 'override' ? ['actions', 'conditions'] : ['actions'],
    );
  });
});

describe('rule bodies: BadJson', () => {
  it.each<[string, RuleKind, RawRuleBody, string]>([
    ['override without conditions', 'override', { actions: [] }, 'override rules need conditions.'],
    ['underride without conditions', 'underride', { actions: [] }, 'underride rules need conditions.'],
    ['content without pattern', 'content', { actions: [] }, 'content rules need a pattern.'],
    ['a numeric action', 'room', { actions: ['notify', 3] }, 'actions[1] must be a string or an object.'],
    ['a boolean action', 'room', { actions: [true] }, 'actions[0] must be a string or an object.'],
    ['a null action', 'room', { actions: [null] }, 'actions[0] must be a string or an object.'],
    ['an array action', 'room', { actions: [['notify']] }, 'actions[0] must be a string or an object.'],
    [
      'a sound tweak without value',
      'room',
      { actions: [{ set_tweak: 'sound' }] },
      'actions[0] is a sound tweak without a string value.',
    ],
    [
      'a sound tweak with a number',
      'room',
      { actions: [{ set_tweak: 'sound', value: 1 }] },
      'actions[0] is a sound tweak without a string value.',
    ],
    [
      'a highlight tweak with a string',
      'room',
      { actions: [{ set_tweak: 'highlight', value: 'yes' }] },
      'actions[0] is a highlight tweak whose value is not a boolean.',
    ],
    [
      'set_tweak not a string',
      'room',
      { actions: [{ set_tweak: 1 }] },
      'actions[0] has a set_tweak that is not a string.',
    ],
    [
      'a condition that is not an object',
      'override',
      { actions: [], conditions: ['x'] },
      'conditions[0] must be an object.',
    ],
    [
      'a condition without kind',
      'override',
      { actions: [], conditions: [{ key: 'x' }] },
      'conditions[0] needs a string kind.',
    ],
    [
      'event_match without pattern',
      'override',
      { actions: [], conditions: [{ kind: 'event_match', key: 'type' }] },
      'conditions[0] (event_match) needs pattern to be a string.',
    ],
    [
      'event_match with a numeric key',
      'underride',
      { actions: [], conditions: [{ kind: 'event_match', key: 1, pattern: 'x' }] },
      'conditions[0] (event_match) needs key to be a string.',
    ],
    [
      'event_property_is with a float',
      'override',
      { actions: [], conditions: [{ kind: 'event_property_is', key: 'k', value: 1.5 }] },
      'conditions[0] (event_property_is) needs value to be a string, integer, boolean or null.',
    ],
    [
      'event_property_contains with an object',
      'override',
      { actions: [], conditions: [{ kind: 'event_property_contains', key: 'k', value: {} }] },
      'conditions[0] (event_property_contains) needs value to be a string, integer, boolean or null.',
    ],
    [
      'room_member_count with a number',
      'override',
      { actions: [], conditions: [{ kind: 'room_member_count', is: 2 }] },
      'conditions[0] (room_member_count) needs is to be a string.',
    ],
    [
      'sender_notification_permission without key',
      'override',
      { actions: [], conditions: [{ kind: 'sender_notification_permission' }] },
      'conditions[0] (sender_notification_permission) needs key to be a string.',
    ],
  ])('%s', (_case, kind, raw, message) => {
    expectError(validateRuleBody(kind, raw), 'BadJson', message);
  });
});
