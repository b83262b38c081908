import { describe, expect, it } from 'vitest';
import type { EvaluationRoom } from '../../src/evaluation/evaluation-input.js';
import type { JsonObject } from '../../src/matrix/json.js';
import type { PushCondition } from '../../src/push-rules/push-rule.js';
import { aBody, aMessage, aRecipient, aRoom, conditionMatches, outcomeOf } from '../support/evaluation-builders.js';

const match = (key: string, pattern: string): PushCondition => ({ kind: 'event_match', key, pattern });
const is = (key: string, value: unknown): PushCondition => ({ kind: 'event_property_is', key, value }) as PushCondition;
const contains = (key: string, value: unknown): PushCondition =>
  ({ kind: 'event_property_contains', key, value }) as PushCondition;
const memberCount = (value: unknown): PushCondition => ({ kind: 'room_member_count', is: value }) as PushCondition;
const permission = (key: string): PushCondition => ({ kind: 'sender_notification_permission', key });
const DISPLAY_NAME: PushCondition = { kind: 'contains_display_name' };

/** Content with every shape the tables below look at. */
const content: JsonObject = {
  msgtype: 'm.text',
  body: 'Hello Bob, meet the café crew',
  'm.relates_to': { rel_type: 'm.thread', is_falling_back: true },
  'm.mentions': { user_ids: ['@bob:example.org', '@carol:example.org'], room: true },
  'org\\example': 'backslash key',
  count: 5,
  text_five: '5',
  flag: true,
  nothing: null,
  list: ['a', 5, true, null, ['nested']],
  nested: { deep: 'value' },
  title: '\u017ftraße',
};
const event = aMessage({ state_key: '' }, content);

describe('event_match', () => {
  it.each([
    ['content.body matches at word boundaries', 'content.body', 'bob', true],
    ['content.body rejects part of a word', 'content.body', 'bo', false],
    ['content.body with a glob', 'content.body', 'caf?', true],
    ['content.body case-insensitively with folding', 'content.body', 'CAFÉ', true],
    ['another key matches the whole value', 'content.msgtype', 'm.text', true],
    ['another key never matches a part', 'content.msgtype', 'text', false],
    ['another key not even at word boundaries', 'content.msgtype', 'm', false],
    ['another key case-insensitively', 'content.msgtype', 'M.TEXT', true],
    ['another key with a glob', 'type', 'm.room.*', true],
    ['another key, folding beyond ASCII', 'content.title', 'STRAßE', true],
    ['another key, same length, one letter off', 'content.title', 'strase', false],
    ['another key, ASCII only, same length, different', 'type', 'm.room.massage', false],
    ['an escaped dot in the key', 'content.m\\.relates_to.rel_type', 'm.thread', true],
    ['a nested key', 'content.nested.deep', 'value', true],
    ['decided disagreement: \\x in a key stays a backslash', 'content.org\\example', 'backslash key', true],
    ['an empty state_key', 'state_key', '', true],
    ['a number is not a string', 'content.count', '5', false],
    ['a boolean is not a string', 'content.flag', 'true', false],
    ['null is not a string', 'content.nothing', 'null', false],
    ['an object is not a string', 'content.nested', '*', false],
    ['an array is not a string', 'content.list', '*', false],
    ['an absent key', 'content.absent', '*', false],
    ['a path through a string', 'content.body.length', '*', false],
    ['a path through an array', 'content.list.0', 'a', false],
    ['an inherited property', 'content.constructor', '*', false],
  ])('%s', (_what, key, pattern, expected) => {
    expect(conditionMatches(match(key, pattern), event)).toBe(expected);
  });

  it('matches content.body across lines with *', () => {
    expect(conditionMatches(match('content.body', 'first*last'), aBody('first line\nlast line'))).toBe(true);
  });
});

describe('event_property_is', () => {
  it.each([
    ['an equal string', 'content.msgtype', 'm.text', true],
    ['no case folding', 'content.msgtype', 'M.TEXT', false],
    ['no glob', 'content.msgtype', 'm.*', false],
    ['an equal integer', 'content.count', 5, true],
    ['a string is not an integer', 'content.text_five', 5, false],
    ['an integer is not a string', 'content.count', '5', false],
    ['an equal boolean', 'content.flag', true, true],
    ['a boolean is not a string', 'content.flag', 'true', false],
    ['the mentions room flag', 'content.m\\.mentions.room', true, true],
    ['null equals null', 'content.nothing', null, true],
    ['null is not an absent key', 'content.absent', null, false],
    ['an object is not a scalar', 'content.nested', 'value', false],
    ['an array is not its element', 'content.list', 'a', false],
  ])('%s', (_what, key, value, expected) => {
    expect(conditionMatches(is(key, value), event)).toBe(expected);
  });
});

describe('event_property_contains', () => {
  it.each([
    ['a listed user ID', 'content.m\\.mentions.user_ids', '@bob:example.org', true],
    ['an unlisted user ID', 'content.m\\.mentions.user_ids', '@dave:example.org', false],
    ['no case folding', 'content.m\\.mentions.user_ids', '@BOB:example.org', false],
    ['an integer element', 'content.list', 5, true],
    ['a boolean element', 'content.list', true, true],
    ['a null element', 'content.list', null, true],
    ['a string is not an integer element', 'content.list', '5', false],
    ['not an array', 'content.msgtype', 'm.text', false],
    ['an absent key', 'content.absent', 'a', false],
    ['an element inside a nested array', 'content.list', 'nested', false],
  ])('%s', (_what, key, value, expected) => {
    expect(conditionMatches(contains(key, value), event)).toBe(expected);
  });
});

describe('contains_display_name', () => {
  it.each([
    ['the name at word boundaries', 'Bob', 'Hello Bob, hi', true],
    ['case-insensitively', 'bob', 'HELLO BOB', true],
    ['with folding', 'Émile', 'salut émile', true],
    ['not inside a word', 'Bob', 'Bobby is here', false],
    ['a name with * is literal', 'B*b', 'hi bob', false],
    ['a name with * is literal, and found as such', 'B*b', 'hi b*b!', true],
    ['a name with ? is literal', 'B?b', 'hi bob', false],
    ['a CJK name inside unspaced text', '猫', '我的猫很可爱', true],
  ])('%s', (_what, name, body, expected) => {
    expect(conditionMatches(DISPLAY_NAME, aBody(body), aRoom(), aRecipient({ display_name: name }))).toBe(expected);
  });

  it('never matches without a display name', () => {
    expect(conditionMatches(DISPLAY_NAME, aBody('hi bob'), aRoom(), { user_id: '@bob:example.org' })).toBe(false);
  });

  it('never matches an empty display name', () => {
    expect(conditionMatches(DISPLAY_NAME, aBody('hi  there'), aRoom(), aRecipient({ display_name: '' }))).toBe(false);
    expect(conditionMatches(DISPLAY_NAME, aBody(''), aRoom(), aRecipient({ display_name: '' }))).toBe(false);
  });

  it('never matches a body that is not a string', () => {
    expect(conditionMatches(DISPLAY_NAME, aMessage({}, { body: 5 }), aRoom(), aRecipient({ display_name: '5' }))).toBe(
      false,
    );
  });
});

describe('room_member_count', () => {
  it.each([
    ['2', 2, true],
    ['2', 3, false],
    ['==2', 2, true],
    ['==2', 1, false],
    ['<2', 1, true],
    ['<2', 2, false],
    ['>2', 3, true],
    ['>2', 2, false],
    ['<=2', 2, true],
    ['<=2', 3, false],
    ['>=2', 2, true],
    ['>=2', 1, false],
    ['0', 0, true],
    ['007', 7, true],
  ])('is %j with %i members: %s', (value, members, expected) => {
    expect(conditionMatches(memberCount(value), aMessage(), aRoom({ member_count: members }))).toBe(expected);
  });

  it.each([['=2'], ['=>2'], ['2 '], [' 2'], ['2\n'], [''], ['two'], ['>=-1'], ['2.0'], ['+2'], ['!=2'], [2], [null]])(
    'is %j never matches',
    (value) => {
      for (const members of [0, 1, 2, 3, 100]) {
        expect(conditionMatches(memberCount(value), aMessage(), aRoom({ member_count: members }))).toBe(false);
      }
    },
  );
});

describe('sender_notification_permission', () => {
  const room = (sender: number | null | undefined, levels?: Record<string, number>): EvaluationRoom => ({
    member_count: 3,
    ...(sender === undefined ? {} : { sender_power_level: sender }),
    ...(levels === undefined ? {} : { notification_power_levels: levels }),
  });

  it.each([
    ['room level met', 'room', room(50, { room: 50 }), true],
    ['room level not met', 'room', room(49, { room: 50 }), false],
    ['room level 0', 'room', room(0, { room: 0 }), true],
    ['room level absent: 50', 'room', room(50, {}), true],
    ['room level absent: 50, not met', 'room', room(49, {}), false],
    ['no levels object at all: room is 50', 'room', room(50), true],
    ['no levels object, not met', 'room', room(10), false],
    ['creator level 2^53 - 1', 'room', room(2 ** 53 - 1, { room: 100 }), true],
    ['custom level met', 'org.example.ping', room(10, { 'org.example.ping': 10 }), true],
    ['custom level not met', 'org.example.ping', room(9, { 'org.example.ping': 10 }), false],
    // Decided disagreement 3: Synapse assumes 50 for an absent custom level.
    ['custom level absent never matches', 'org.example.ping', room(100, { room: 0 }), false],
    ['custom level absent without levels', 'org.example.ping', room(2 ** 53 - 1), false],
    ['an inherited name is not a level', 'constructor', room(100, {}), false],
    // Decided disagreement 4: no sender level, no match.
    ['sender level absent never matches', 'room', room(undefined, { room: 0 }), false],
    ['sender level null never matches', 'room', room(null, { room: 0 }), false],
  ])('%s', (_what, key, roomFacts, expected) => {
    expect(conditionMatches(permission(key), aMessage(), roomFacts)).toBe(expected);
  });
});

describe('conditions that never match', () => {
  it.each([
    ['an unknown kind', { kind: 'org.example.future_condition', key: 'type', pattern: '*' }],
    ['a kind of another case', { kind: 'Event_Match', key: 'type', pattern: '*' }],
    ['event_match without pattern', { kind: 'event_match', key: 'type' }],
    ['event_match without key', { kind: 'event_match', pattern: '*' }],
    ['event_match with a number pattern', { kind: 'event_match', key: 'content.count', pattern: 5 }],
    ['event_property_is without value', { kind: 'event_property_is', key: 'content.nothing' }],
    [
      'event_property_is with an object value',
      { kind: 'event_property_is', key: 'content.nested', value: { deep: 'value' } },
    ],
    ['event_property_is with a fraction', { kind: 'event_property_is', key: 'content.count', value: 5.5 }],
    [
      'event_property_contains with an array value',
      { kind: 'event_property_contains', key: 'content.list', value: ['nested'] },
    ],
    ['event_property_contains without key', { kind: 'event_property_contains', value: 'a' }],
    ['room_member_count without is', { kind: 'room_member_count' }],
    ['sender_notification_permission without key', { kind: 'sender_notification_permission' }],
    ['sender_notification_permission with a number key', { kind: 'sender_notification_permission', key: 50 }],
  ])('%s never matches, and disables its rule', (_what, condition) => {
    const rule = {
      rule_id: 'never',
      default: false,
      enabled: true,
      conditions: [condition as PushCondition, match('type', '*')],
      actions: ['notify'],
    };
    const fallback = { rule_id: 'fallback', default: false, enabled: true, conditions: [], actions: [] };
    const outcome = outcomeOf(
      { override: [rule, fallback], content: [], room: [], sender: [], underride: [] },
      event,
      aRoom({ sender_power_level: 100, notification_power_levels: {} }),
    );
    expect(outcome.ruleId).toBe('fallback');
  });
});
