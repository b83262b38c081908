import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileRuleset, compileUserRuleset } from '../../src/evaluation/compile-ruleset.js';
import { evaluateRequest } from '../../src/evaluation/evaluate-request.js';
import type { EvaluationEvent, EvaluationRecipient, EvaluationRoom } from '../../src/evaluation/evaluation-input.js';
import { isJsonObject, type JsonObject, type JsonValue } from '../../src/matrix/json.js';
import type {
  ConditionalPushRule,
  PushAction,
  PushCondition,
  PushRuleBase,
  Ruleset,
} from '../../src/push-rules/push-rule.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';

/*
 * A deliberately plain evaluator, written from evaluation.md and nothing
 * else: a regular expression built per test, no caching, no index, no
 * sharing. The project's evaluator must give the same answer on random
 * events, rooms, rulesets and recipients.
 */

const WORD = /^[A-Za-z0-9_]$/;
const isWordChar = (character: string | undefined) => character !== undefined && WORD.test(character);

function globRegex(pattern: string): RegExp {
  const source = Array.from(pattern)
    .map((character) =>
      character === '*' ? '[^]*' : character === '?' ? '[^]' : character.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&'),
    )
    .join('');
  return new RegExp(`^(?:${source})$`, 'iu');
}

/** Every (start, end) at code point positions, boundaries tested on the value itself. */
function matchesSomewhereAtWordBoundaries(regex: RegExp, value: string): boolean {
  const positions = [0];
  for (const character of value) positions.push((positions.at(-1) ?? 0) + character.length);
  for (const start of positions) {
    if (start > 0 && isWordChar(value[start - 1])) continue;
    for (const end of positions) {
      if (end < start || (end < value.length && isWordChar(value[end]))) continue;
      if (regex.test(value.slice(start, end))) return true;
    }
  }
  return false;
}

function referenceGlob(pattern: string, value: string, atWordBoundaries: boolean): boolean {
  const regex = globRegex(pattern);
  return atWordBoundaries ? matchesSomewhereAtWordBoundaries(regex, value) : regex.test(value);
}

function splitKey(key: string): string[] {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < key.length; i += 1) {
    if (key.charAt(i) === '\\' && (key.charAt(i + 1) === '.' || key.charAt(i + 1) === '\\')) {
      current += key.charAt(i + 1);
      i += 1;
    } else if (key.charAt(i) === '.') {
      parts.push(current);
      current = '';
    } else {
      current += key.charAt(i);
    }
  }
  return [...parts, current];
}

const MISSING = Symbol('missing');
function lookup(event: JsonObject, key: string): JsonValue | typeof MISSING {
  let node: JsonValue = event;
  for (const part of splitKey(key)) {
    if (!isJsonObject(node) || !Object.hasOwn(node, part)) return MISSING;
    node = node[part] ?? null;
  }
  return node;
}

const isScalar = (value: unknown) =>
  value === null ||
  typeof value === 'string' ||
  typeof value === 'boolean' ||
  (typeof value === 'number' && Number.isSafeInteger(value));

function referenceCondition(
  condition: PushCondition,
  event: EvaluationEvent,
  room: EvaluationRoom,
  recipient: EvaluationRecipient,
): boolean {
  const c = condition as Record<string, unknown>;
  switch (c['kind']) {
    case 'event_match': {
      if (typeof c['key'] !== 'string' || typeof c['pattern'] !== 'string') return false;
      const value = lookup(event, c['key']);
      return typeof value === 'string' && referenceGlob(c['pattern'], value, c['key'] === 'content.body');
    }
    case 'event_property_is':
    case 'event_property_contains': {
      if (typeof c['key'] !== 'string' || !('value' in c) || !isScalar(c['value'])) return false;
      const value = lookup(event, c['key']);
      if (c['kind'] === 'event_property_is') return value === c['value'];
      return Array.isArray(value) && value.some((element) => element === c['value']);
    }
    case 'contains_display_name': {
      const name = recipient.display_name;
      const body = lookup(event, 'content.body');
      if (name === undefined || name === '' || typeof body !== 'string') return false;
      const literal = new RegExp(
        `^${Array.from(name)
          .map((ch) => ch.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&'))
          .join('')}$`,
        'iu',
      );
      return matchesSomewhereAtWordBoundaries(literal, body);
    }
    case 'room_member_count': {
      const parsed = typeof c['is'] === 'string' ? /^(==|<|>|<=|>=)?([0-9]+)$/.exec(c['is']) : null;
      if (parsed === null) return false;
      const n = Number(parsed[2]);
      const count = room.member_count;
      return (
        { '==': count === n, '<': count < n, '>': count > n, '<=': count <= n, '>=': count >= n }[parsed[1] ?? '=='] ??
        false
      );
    }
    case 'sender_notification_permission': {
      if (typeof c['key'] !== 'string') return false;
      const level = room.sender_power_level;
      if (typeof level !== 'number') return false;
      const levels = room.notification_power_levels ?? {};
      const required = Object.hasOwn(levels, c['key']) ? levels[c['key']] : c['key'] === 'room' ? 50 : undefined;
      return required !== undefined && level >= required;
    }
    default:
      return false;
  }
}

interface ReferenceAnswer {
  readonly ruleId: string | null;
  readonly actions: readonly PushAction[] | undefined;
}

function referenceEvaluate(
  ruleset: Ruleset,
  event: EvaluationEvent,
  room: EvaluationRoom,
  recipient: EvaluationRecipient,
): ReferenceAnswer {
  if (recipient.user_id === event.sender) return { ruleId: null, actions: undefined };
  const decide = (rule: PushRuleBase): ReferenceAnswer => ({
    ruleId: rule.rule_id,
    actions: rule.actions.includes('notify')
      ? rule.actions.filter((a) => a !== 'dont_notify' && a !== 'coalesce')
      : undefined,
  });
  const body = lookup(event, 'content.body');
  const conditionsHold = (rule: ConditionalPushRule) =>
    rule.conditions.every((c) => referenceCondition(c, event, room, recipient));
  const inOrder: [PushRuleBase, () => boolean][] = [
    ...ruleset.override.map((rule): [PushRuleBase, () => boolean] => [rule, () => conditionsHold(rule)]),
    ...ruleset.content.map((rule): [PushRuleBase, () => boolean] => [
      rule,
      () => typeof body === 'string' && referenceGlob(rule.pattern, body, true),
    ]),
    ...ruleset.room.map((rule): [PushRuleBase, () => boolean] => [rule, () => event.room_id === rule.rule_id]),
    ...ruleset.sender.map((rule): [PushRuleBase, () => boolean] => [rule, () => event.sender === rule.rule_id]),
    ...ruleset.underride.map((rule): [PushRuleBase, () => boolean] => [rule, () => conditionsHold(rule)]),
  ];
  for (const [rule, matches] of inOrder) {
    if (rule.enabled && matches()) return decide(rule);
  }
  return { ruleId: null, actions: undefined };
}

// ---- Random data ----------------------------------------------------------

/** Characters chosen for the corners: case folding, boundaries, astral and lone surrogates, newlines. */
const CHARACTERS = [
  'a',
  'b',
  'A',
  'B',
  's',
  'k',
  '_',
  '1',
  ' ',
  '.',
  '-',
  '#',
  '\n',
  'é',
  'É',
  '\u017f',
  '\u212a',
  'σ',
  'ς',
  'Σ',
  '猫',
  '😀',
  '𐐀',
  '𐐨',
  '\ud83d',
];
const text = fc.array(fc.constantFrom(...CHARACTERS), { maxLength: 7 }).map((cs) => cs.join(''));
const pattern = fc.array(fc.constantFrom(...CHARACTERS, '*', '?', '*'), { maxLength: 5 }).map((cs) => cs.join(''));
const USERS = ['@sender:x', '@u:x', '@v:x', '@U:x'];
const ROOMS = ['!a:x', '!A:x', '!b:x'];
const KEYS = [
  'content.body',
  'content.msgtype',
  'type',
  'state_key',
  'sender',
  'room_id',
  'content.m\\.relates_to.rel_type',
  'content.org\\x',
  'content.n',
  'content.list',
  'content.nested.deep',
  'content',
  'content.body.x',
  'content.m\\.mentions.user_ids',
];
const scalar = fc.oneof(
  text,
  fc.integer({ min: 0, max: 3 }),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom(...USERS),
);

const condition: fc.Arbitrary<PushCondition> = fc.oneof(
  fc.record({ kind: fc.constant('event_match'), key: fc.constantFrom(...KEYS), pattern }),
  fc.record({
    kind: fc.constantFrom('event_property_is', 'event_property_contains'),
    key: fc.constantFrom(...KEYS),
    value: scalar,
  }),
  fc.constant({ kind: 'contains_display_name' }),
  fc.record({
    kind: fc.constant('room_member_count'),
    is: fc.constantFrom('2', '==2', '<3', '>1', '<=0', '>=4', 'x', '=2', ''),
  }),
  fc.record({ kind: fc.constant('sender_notification_permission'), key: fc.constantFrom('room', 'x', 'y') }),
  fc.constantFrom(
    { kind: 'org.example.unknown' },
    { kind: 'event_match', key: 'type' },
    { kind: 'event_property_is', key: 'type', value: 1.5 },
  ),
);

const actions = fc.constantFrom<PushAction[]>(
  ['notify'],
  [],
  ['dont_notify'],
  ['notify', 'coalesce', { set_tweak: 'sound', value: 'x' }],
  ['org.custom', 'notify', { set_tweak: 'highlight' }, 'dont_notify'],
);
const base = { default: fc.constant(false), enabled: fc.constantFrom(true, true, true, false), actions };
const indexedIds = <T extends { rule_id: string }>(rules: T[]) =>
  rules.map((rule, i) => ({ ...rule, rule_id: `${rule.rule_id}${i}` }));
const ruleset: fc.Arbitrary<Ruleset> = fc.record({
  override: fc
    .array(fc.record({ rule_id: fc.constant('o'), conditions: fc.array(condition, { maxLength: 3 }), ...base }), {
      maxLength: 4,
    })
    .map(indexedIds),
  content: fc.array(fc.record({ rule_id: fc.constant('c'), pattern, ...base }), { maxLength: 12 }).map(indexedIds),
  room: fc.array(fc.record({ rule_id: fc.constantFrom(...ROOMS), ...base }), { maxLength: 3 }),
  sender: fc.array(fc.record({ rule_id: fc.constantFrom(...USERS), ...base }), { maxLength: 3 }),
  underride: fc
    .array(fc.record({ rule_id: fc.constant('u'), conditions: fc.array(condition, { maxLength: 3 }), ...base }), {
      maxLength: 4,
    })
    .map(indexedIds),
});

const event: fc.Arbitrary<EvaluationEvent> = fc
  .record(
    {
      type: fc.constantFrom('m.room.message', 'M.room.message', 'm.room.member', 'm.room.encrypted'),
      room_id: fc.constantFrom(...ROOMS),
      sender: fc.constantFrom(...USERS),
      state_key: fc.constantFrom(...USERS, ''),
      content: fc.record(
        {
          body: fc.oneof(
            text,
            text.map((t) => `${t} ${t}`),
            fc.integer(),
          ),
          msgtype: fc.oneof(text, fc.constantFrom('m.text', 'm.notice')),
          membership: fc.constantFrom('invite', 'join'),
          'm.relates_to': fc.record({ rel_type: fc.oneof(text, fc.constant('m.replace')) }),
          'org\\x': text,
          n: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constant('1')),
          list: fc.array(scalar, { maxLength: 3 }),
          nested: fc.record({ deep: text }),
          'm.mentions': fc.record(
            { user_ids: fc.subarray(USERS), room: fc.constantFrom<JsonValue>(true, false, 'true') },
            { requiredKeys: [] },
          ),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: ['type', 'room_id', 'sender', 'content'] },
  )
  .map((e) => e as EvaluationEvent);

const room: fc.Arbitrary<EvaluationRoom> = fc.record(
  {
    member_count: fc.integer({ min: 0, max: 4 }),
    sender_power_level: fc.oneof(fc.integer({ min: 0, max: 100 }), fc.constant(null)),
    notification_power_levels: fc.record(
      { room: fc.integer({ min: 0, max: 100 }), x: fc.integer({ min: 0, max: 100 }) },
      { requiredKeys: [] },
    ),
  },
  { requiredKeys: ['member_count'] },
);

const recipients: fc.Arbitrary<EvaluationRecipient[]> = fc
  .uniqueArray(fc.constantFrom(...USERS), { minLength: 1, maxLength: USERS.length })
  .chain((ids) =>
    fc.tuple(
      ...ids.map((id) => fc.record({ user_id: fc.constant(id), display_name: text }, { requiredKeys: ['user_id'] })),
    ),
  );

function compare(
  rules: Ruleset,
  compiled: ReturnType<typeof compileRuleset>,
  e: EvaluationEvent,
  r: EvaluationRoom,
  rs: EvaluationRecipient[],
) {
  const reply = evaluateRequest({ event: e, room: r, recipients: rs, explain: true }, () => compiled);
  for (const recipient of rs) {
    const expected = referenceEvaluate(rules, e, r, recipient);
    expect(reply.rule_ids?.[recipient.user_id], recipient.user_id).toBe(expected.ruleId);
    expect(reply.notify[recipient.user_id], recipient.user_id).toEqual(expected.actions);
  }
}

describe('against a plain reading of evaluation.md', () => {
  it('agrees on random rulesets, events, rooms and recipients', () => {
    fc.assert(
      fc.property(ruleset, event, room, recipients, (rules, e, r, rs) => {
        compare(rules, compileRuleset(rules), e, r, rs);
      }),
      { numRuns: 3000 },
    );
  });

  it('agrees on random content keywords (enough to use the index) and bodies', () => {
    const keywords = fc.array(fc.oneof(pattern, text, fc.constantFrom('ab', 'a b', 'ab_1', 'b', 'kk', 'ss')), {
      minLength: 8,
      maxLength: 40,
    });
    fc.assert(
      fc.property(keywords, fc.array(text, { maxLength: 6 }), (patterns, words) => {
        const rules: Ruleset = {
          override: [],
          content: patterns.map((p, i) => ({
            rule_id: `c${i}`,
            default: false,
            enabled: i % 7 !== 3,
            pattern: p,
            actions: ['notify'],
          })),
          room: [],
          sender: [],
          underride: [],
        };
        const e = { type: 'm.room.message', room_id: '!a:x', sender: '@s:x', content: { body: words.join(' ') } };
        compare(rules, compileRuleset(rules), e, { member_count: 2 }, [{ user_id: '@u:x' }]);
      }),
      { numRuns: 2000 },
    );
  });

  it('agrees on the server defaults, shared or compiled per user', () => {
    fc.assert(
      fc.property(event, room, recipients, (e, r, rs) => {
        for (const recipient of rs) {
          const own = serverDefaultRuleset(recipient.user_id);
          compare(own, compileUserRuleset(own, recipient.user_id), e, r, [recipient]);
          compare(own, compileRuleset(own), e, r, [recipient]);
        }
      }),
      { numRuns: 1000 },
    );
  });
});
