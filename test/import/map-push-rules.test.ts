import { describe, expect, it } from 'vitest';
import type { PushRule } from '../../src/push-rules/push-rule.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { ALICE, aConditionalRule, aContentRule, aSimpleRule, overridesWithUserRules } from '../support/builders.js';
import { map, ROOM, skips, userRuleIds } from '../support/map-push-rules-builders.js';
import { aChangedDefaultRow, anEnableRow, aRuleRow } from '../support/synapse-rows.js';

// The rows that are skipped, and why, are in map-push-rules-skipped.test.ts.

function defaultRule(ruleId: string, rules: readonly PushRule[]): PushRule | undefined {
  return rules.find((rule) => rule.default && rule.rule_id === ruleId);
}

describe('mapPushRules: no rows', () => {
  it('is the server-default ruleset, nothing skipped', () => {
    expect(map([])).toEqual({ ruleset: serverDefaultRuleset(ALICE), skipped: [], notes: [] });
  });
});

describe('mapPushRules: priority classes and order', () => {
  it.each([
    [5, 'override'],
    [4, 'content'],
    [3, 'room'],
    [2, 'sender'],
    [1, 'underride'],
  ] as const)('class %i holds %s rules', (priorityClass, kind) => {
    const conditions =
      kind === 'sender'
        ? '[{"kind":"event_match","key":"user_id","pattern":"@bob:example.org"}]'
        : kind === 'room'
          ? `[{"kind":"event_match","key":"room_id","pattern":"${ROOM}"}]`
          : '[{"kind":"event_match","key":"content.body","pattern":"cake"}]';
    const { ruleset, skipped } = map([
      aRuleRow({ rule_id: `global/${kind}/x`, priority_class: priorityClass, conditions }),
    ]);
    expect(skipped).toEqual([]);
    const expected = { room: [ROOM], sender: ['@bob:example.org'] }[kind as string] ?? ['x'];
    expect(userRuleIds(ruleset[kind])).toEqual(expected);
  });

  it('takes the kind from the class, as Synapse does, not from the ID prefix', () => {
    const { ruleset } = map([aRuleRow({ rule_id: 'global/override/x', priority_class: 1 })]);
    expect(userRuleIds(ruleset.underride)).toEqual(['x']);
    expect(userRuleIds(ruleset.override)).toEqual([]);
  });

  it.each([
    [
      'higher priority first',
      [
        ['a', 1],
        ['b', 3],
        ['c', 2],
      ],
      ['b', 'c', 'a'],
      0,
    ],
    [
      'negative priorities',
      [
        ['a', -5],
        ['b', 0],
      ],
      ['b', 'a'],
      0,
    ],
    [
      'ties by rule ID',
      [
        ['b', 1],
        ['a', 1],
        ['Z', 1],
      ],
      ['Z', 'a', 'b'],
      2,
    ],
    // UTF-16 would put the emoji (a surrogate pair) before U+FF61; UTF-8 bytes do not.
    [
      'ties by the UTF-8 bytes of the rule ID',
      [
        ['\u{1F600}', 0],
        ['\uFF61', 0],
      ],
      ['\uFF61', '\u{1F600}'],
      1,
    ],
  ] as const)('orders user rules: %s', (_name, rows, expected, ties) => {
    const result = map(rows.map(([id, priority]) => aRuleRow({ rule_id: `global/override/${id}`, priority })));
    expect(userRuleIds(result.ruleset.override)).toEqual(expected);
    expect(result.notes.filter((note) => note.kind === 'priority-tie')).toHaveLength(ties);
  });

  it('puts user rules below master and above the other defaults', () => {
    const { ruleset } = map([aRuleRow()]);
    expect(ruleset.override).toEqual(overridesWithUserRules(aConditionalRule()));
    expect(ruleset.underride).toEqual(serverDefaultRuleset(ALICE).underride);
  });

  it.each([
    ['a class outside 1–5', aRuleRow({ rule_id: 'global/postcontent/x', priority_class: 6 }), 'unknown-priority-class'],
    ['class 0', aRuleRow({ priority_class: 0 }), 'unknown-priority-class'],
    ['class −1 on a user rule ID', aChangedDefaultRow('global/override/mine', '["notify"]'), 'unknown-priority-class'],
  ] as const)('skips %s', (_name, row, reason) => {
    const result = map([row]);
    expect(skips(result)).toEqual([[row.rule_id, reason]]);
    expect(result.ruleset).toEqual(serverDefaultRuleset(ALICE));
  });
});

describe('mapPushRules: the shape Synapse shows', () => {
  it.each([
    [
      'a content rule takes its pattern from its one condition',
      aRuleRow({ rule_id: 'global/content/cake', priority_class: 4 }),
      'content',
      aContentRule(),
    ],
    [
      "a content rule's pattern_type user_localpart becomes the localpart",
      aRuleRow({
        rule_id: 'global/content/me',
        priority_class: 4,
        conditions: '[{"kind":"event_match","key":"content.body","pattern_type":"user_localpart"}]',
      }),
      'content',
      aContentRule({ rule_id: 'me', pattern: 'alice' }),
    ],
    [
      'a room rule is named by its pattern and shows no conditions',
      aRuleRow({
        rule_id: `global/room/${ROOM}`,
        priority_class: 3,
        conditions: `[{"kind":"event_match","key":"room_id","pattern":"${ROOM}"}]`,
      }),
      'room',
      aSimpleRule(),
    ],
    [
      'pattern_type user_id becomes the user ID',
      aRuleRow({ conditions: '[{"kind":"event_match","key":"sender","pattern_type":"user_id"}]' }),
      'override',
      aConditionalRule({ conditions: [{ kind: 'event_match', key: 'sender', pattern: ALICE }] }),
    ],
    [
      'value_type user_id becomes the user ID',
      aRuleRow({ conditions: '[{"kind":"event_property_contains","key":"k","value_type":"user_id"}]' }),
      'override',
      aConditionalRule({ conditions: [{ kind: 'event_property_contains', key: 'k', value: ALICE }] }),
    ],
    [
      'a known condition keeps only its own fields',
      aRuleRow({ conditions: '[{"key":"content.body","extra":1,"kind":"event_match","pattern":"cake"}]' }),
      'override',
      aConditionalRule(),
    ],
    [
      'a condition of an unknown kind is kept as stored',
      aRuleRow({ conditions: '[{"kind":"org.example.new","x":[1]}]' }),
      'override',
      aConditionalRule({ conditions: [{ kind: 'org.example.new', x: [1] }] }),
    ],
    [
      'room_member_count keeps is',
      aRuleRow({ conditions: '[{"kind":"room_member_count","is":"2","extra":true}]' }),
      'override',
      aConditionalRule({ conditions: [{ kind: 'room_member_count', is: '2' }] }),
    ],
  ] as const)('%s', (_name, row, kind, expected) => {
    const result = map([row]);
    expect(result.skipped).toEqual([]);
    expect(result.ruleset[kind].filter((rule) => !rule.default)).toEqual([expected]);
  });
});

describe('mapPushRules: enabled', () => {
  it.each([
    ['no enable row', [], true],
    ['1', [anEnableRow('global/override/my.rule', 1)], true],
    ['0', [anEnableRow('global/override/my.rule', 0)], false],
    ['NULL (Synapse reads it as disabled)', [anEnableRow('global/override/my.rule', null)], false],
    ['false', [anEnableRow('global/override/my.rule', false)], false],
  ] as const)("a user rule's enable row: %s", (_name, enableRows, enabled) => {
    const { ruleset, notes } = map([aRuleRow()], enableRows);
    expect(ruleset.override[1]).toEqual(aConditionalRule({ enabled }));
    expect(notes).toEqual([]);
  });

  it.each([
    ['.m.rule.master off by default', 'override', '.m.rule.master', [], false],
    [
      '.m.rule.master turned on',
      'override',
      '.m.rule.master',
      [anEnableRow('global/override/.m.rule.master', 1)],
      true,
    ],
    [
      '.m.rule.message turned off',
      'underride',
      '.m.rule.message',
      [anEnableRow('global/underride/.m.rule.message', 0)],
      false,
    ],
    [
      '.m.rule.message NULL',
      'underride',
      '.m.rule.message',
      [anEnableRow('global/underride/.m.rule.message', null)],
      false,
    ],
  ] as const)('a server-default rule: %s', (_name, kind, ruleId, enableRows, enabled) => {
    const { ruleset, skipped } = map([], enableRows);
    expect(defaultRule(ruleId, ruleset[kind])?.enabled).toBe(enabled);
    expect(skipped).toEqual([]);
  });

  it('notes an enable row with no rule (Synapse ignores it)', () => {
    const result = map([], [anEnableRow('global/override/deleted.rule', 1)]);
    expect(result.ruleset).toEqual(serverDefaultRuleset(ALICE));
    expect(result.skipped).toEqual([]);
    expect(result.notes.map((note) => [note.ruleId, note.kind])).toEqual([
      ['global/override/deleted.rule', 'ignored-enable-row'],
    ]);
  });
});

describe('mapPushRules: changed actions of server-default rules (class −1)', () => {
  it.each([
    ['.m.rule.message', 'underride', '["dont_notify"]', ['dont_notify']],
    [
      '.m.rule.suppress_notices',
      'override',
      '["notify",{"set_tweak":"sound","value":"ping"}]',
      ['notify', { set_tweak: 'sound', value: 'ping' }],
    ],
    ['.m.rule.master', 'override', '["notify"]', ['notify']],
  ] as const)(
    '%s gets the stored actions, keeps its conditions and stays default',
    (ruleId, kind, actions, expected) => {
      const { ruleset, skipped } = map([aChangedDefaultRow(`global/${kind}/${ruleId}`, actions)]);
      const spec = defaultRule(ruleId, serverDefaultRuleset(ALICE)[kind]);
      expect(skipped).toEqual([]);
      expect(defaultRule(ruleId, ruleset[kind])).toEqual({ ...spec, actions: expected });
    },
  );

  it('shows master enabled when its actions were changed and Synapse wrote an enable row (synapse#18404)', () => {
    const { ruleset } = map(
      [aChangedDefaultRow('global/override/.m.rule.master', '["notify"]')],
      [anEnableRow('global/override/.m.rule.master', 1)],
    );
    expect(ruleset.override[0]).toMatchObject({ rule_id: '.m.rule.master', enabled: true, actions: ['notify'] });
  });

  it('keeps the spec actions when the stored ones are skipped', () => {
    const result = map([aChangedDefaultRow('global/underride/.m.rule.message', '["bogus"]')]);
    expect(skips(result)).toEqual([['global/underride/.m.rule.message', 'unknown-action']]);
    expect(result.ruleset).toEqual(serverDefaultRuleset(ALICE));
  });
});

describe('mapPushRules: legacy actions, as Synapse serves them', () => {
  it.each([
    ['dont_notify is kept', '["dont_notify"]', ['dont_notify']],
    ['coalesce is kept', '["coalesce"]', ['coalesce']],
    [
      'a tweak whose value is null loses the value',
      '[{"set_tweak":"highlight","value":null}]',
      [{ set_tweak: 'highlight' }],
    ],
    ['a custom tweak is kept', '[{"set_tweak":"x","value":[1]}]', [{ set_tweak: 'x', value: [1] }]],
  ] as const)('%s', (_name, actions, expected) => {
    const result = map([aRuleRow({ actions })]);
    expect(result.skipped).toEqual([]);
    expect(result.ruleset.override[1]?.actions).toEqual(expected);
  });
});
