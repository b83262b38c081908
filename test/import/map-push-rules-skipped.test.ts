import { describe, expect, it } from 'vitest';
import type { RuleSkipReason } from '../../src/import/synapse-rule-row.js';
import type { SynapsePushRuleRow } from '../../src/import/synapse-rows.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { ALICE, aSimpleRule } from '../support/builders.js';
import { map, ROOM, skips, userRuleIds } from '../support/map-push-rules-builders.js';
import { aChangedDefaultRow, anEnableRow, aRuleRow } from '../support/synapse-rows.js';

const EMPTY = '[]';

describe('mapPushRules: rows that are skipped, with their reason', () => {
  const refused: readonly (readonly [string, SynapsePushRuleRow, RuleSkipReason])[] = [
    ['conditions that are not JSON', aRuleRow({ conditions: '[{' }), 'unparsable-json'],
    ['actions that are not JSON', aRuleRow({ actions: 'notify' }), 'unparsable-json'],
    ['conditions that are not an array', aRuleRow({ conditions: '{}' }), 'unparsable-json'],
    ['actions that are not an array', aRuleRow({ actions: '"notify"' }), 'unparsable-json'],
    ['JSON nested too deep', aRuleRow({ conditions: '['.repeat(40) + ']'.repeat(40) }), 'unparsable-json'],
    ['a prototype key', aRuleRow({ actions: '[{"__proto__":{}}]' }), 'unparsable-json'],
    ['an action word Synapse does not know', aRuleRow({ actions: '["notify","ring"]' }), 'unknown-action'],
    ['an action that is a number', aRuleRow({ actions: '[5]' }), 'invalid-rule'],
    ['a sound tweak without a value', aRuleRow({ actions: '[{"set_tweak":"sound"}]' }), 'invalid-rule'],
    [
      'an event_match without a pattern',
      aRuleRow({ conditions: '[{"kind":"event_match","key":"k"}]' }),
      'invalid-rule',
    ],
    ['a condition without a kind', aRuleRow({ conditions: '[{"key":"k"}]' }), 'invalid-rule'],
    [
      'a room rule without conditions',
      aRuleRow({ rule_id: `global/room/${ROOM}`, priority_class: 3, conditions: EMPTY }),
      'invalid-rule',
    ],
    [
      'a content rule with two conditions',
      aRuleRow({ rule_id: 'global/content/x', priority_class: 4, conditions: '[{"pattern":"a"},{"pattern":"b"}]' }),
      'not-shown-by-synapse',
    ],
    [
      'a content rule without a pattern',
      aRuleRow({ rule_id: 'global/content/x', priority_class: 4, conditions: '[{"kind":"x"}]' }),
      'not-shown-by-synapse',
    ],
    ['a user rule ID with a leading dot', aRuleRow({ rule_id: 'global/override/.mine' }), 'rule-id-refused'],
    ['a rule ID with a backslash', aRuleRow({ rule_id: 'global/override/a\\b' }), 'rule-id-refused'],
    [
      'a room rule whose pattern is not a room ID',
      aRuleRow({
        rule_id: 'global/room/x',
        priority_class: 3,
        conditions: '[{"kind":"event_match","key":"room_id","pattern":"x"}]',
      }),
      'rule-id-refused',
    ],
    [
      'a sender rule whose pattern is not a user ID',
      aRuleRow({
        rule_id: 'global/sender/x',
        priority_class: 2,
        conditions: '[{"kind":"event_match","key":"user_id","pattern":"bob"}]',
      }),
      'rule-id-refused',
    ],
    [
      'an experimental marker in a user rule ID',
      aRuleRow({ rule_id: 'global/override/my.org.matrix.msc3930.poll' }),
      'hidden-by-synapse',
    ],
    [
      'an experimental default rule',
      aChangedDefaultRow('global/underride/.org.matrix.msc1767.rule.extensible.message', '["notify"]'),
      'hidden-by-synapse',
    ],
    [
      '.m.rule.contains_display_name',
      aChangedDefaultRow('global/override/.m.rule.contains_display_name', '["notify"]'),
      'synapse-only-default-rule',
    ],
    [
      '.m.rule.roomnotif',
      aChangedDefaultRow('global/override/.m.rule.roomnotif', '["notify"]'),
      'synapse-only-default-rule',
    ],
    [
      '.m.rule.contains_user_name',
      aChangedDefaultRow('global/content/.m.rule.contains_user_name', '[]'),
      'synapse-only-default-rule',
    ],
    ['.im.vector.jitsi', aChangedDefaultRow('global/underride/.im.vector.jitsi', '[]'), 'synapse-only-default-rule'],
    [
      'a changed default rule under a renamed ID',
      aChangedDefaultRow('global/override/.org.matrix.msc3786.rule.room.server_acl', '[]'),
      'former-default-rule',
    ],
    [
      'a changed default rule under a removed ID',
      aChangedDefaultRow('global/override/.m.is_user_mention', '["notify"]'),
      'former-default-rule',
    ],
  ];

  it.each(refused)('%s', (_name, row, reason) => {
    const result = map([row]);
    expect(skips(result)).toEqual([[row.rule_id, reason]]);
    expect(result.skipped[0]?.table).toBe('push_rules');
    expect(result.skipped[0]?.detail).not.toBe('');
    expect(result.ruleset).toEqual(serverDefaultRuleset(ALICE));
  });

  it('imports the other rules of the user', () => {
    const result = map([aRuleRow({ actions: '[' }), aRuleRow({ rule_id: 'global/override/good' })]);
    expect(skips(result)).toEqual([['global/override/my.rule', 'unparsable-json']]);
    expect(userRuleIds(result.ruleset.override)).toEqual(['good']);
  });

  it('skips the second rule that shows under the same ID', () => {
    const conditions = `[{"kind":"event_match","key":"room_id","pattern":"${ROOM}"}]`;
    const result = map([
      aRuleRow({ rule_id: 'global/room/a', priority_class: 3, priority: 2, conditions }),
      aRuleRow({ rule_id: 'global/room/b', priority_class: 3, priority: 1, conditions, actions: '["dont_notify"]' }),
    ]);
    expect(skips(result)).toEqual([['global/room/b', 'duplicate-rule-id']]);
    expect(result.ruleset.room).toEqual([aSimpleRule()]);
  });

  it.each([
    ['an experimental default rule', 'global/override/.org.matrix.msc4028.encrypted_event', 'hidden-by-synapse'],
    ['a Synapse-only default rule', 'global/override/.m.rule.roomnotif', 'synapse-only-default-rule'],
    ['a renamed default rule', 'global/override/.org.matrix.msc3958.suppress_edits', 'former-default-rule'],
  ] as const)('skips the enable row of %s', (_name, ruleId, reason) => {
    const result = map([], [anEnableRow(ruleId, 0)]);
    expect(result.skipped).toEqual([expect.objectContaining({ table: 'push_rules_enable', ruleId, reason })]);
    expect(result.ruleset).toEqual(serverDefaultRuleset(ALICE));
  });

  it('does not count the enable row of a skipped rule twice', () => {
    const result = map([aRuleRow({ actions: '[' })], [anEnableRow('global/override/my.rule', 1)]);
    expect(result.skipped).toHaveLength(1);
    expect(result.notes).toEqual([]);
  });

  it('refuses rows of another user', () => {
    expect(() => map([aRuleRow({ user_name: '@bob:example.org' })])).toThrow(/@bob:example.org/);
  });
});
