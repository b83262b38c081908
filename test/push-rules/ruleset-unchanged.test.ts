import { describe, expect, it } from 'vitest';
import { deletePushRule } from '../../src/push-rules/delete-push-rule.js';
import type { Ruleset } from '../../src/push-rules/push-rule.js';
import { setPushRuleActions } from '../../src/push-rules/push-rule-actions.js';
import { setPushRuleEnabled } from '../../src/push-rules/push-rule-enabled.js';
import type { PushRulesEventView } from '../../src/push-rules/push-rules-event.js';
import { leavesRulesetUnchanged } from '../../src/push-rules/ruleset-unchanged.js';
import { setPushRule } from '../../src/push-rules/set-push-rule.js';
import type { Result } from '../../src/result/result.js';
import {
  aConditionalRule,
  anAddress,
  aRuleset,
  aSetRequest,
  overridesWithUserRules,
  validView,
} from '../support/builders.js';
import { expectOk } from '../support/expect-result.js';

const a = aConditionalRule({ rule_id: 'a', actions: ['notify', { set_tweak: 'sound', value: 'bell' }] });
const b = aConditionalRule({ rule_id: 'b', enabled: false });
const view = validView(aRuleset({ override: overridesWithUserRules(a, b) }));
const setA = (overrides: Parameters<typeof aSetRequest>[0] = {}) =>
  aSetRequest({ ruleId: 'a', body: { actions: a.actions, conditions: a.conditions }, ...overrides });

const unchangedBy = (on: PushRulesEventView, result: Result<Ruleset>) => leavesRulesetUnchanged(on, expectOk(result));

describe('a write that leaves the ruleset as it is', () => {
  it.each<[string, (v: PushRulesEventView) => Result<Ruleset>, boolean]>([
    ['set_pushrule_enabled to the value it has', (v) => setPushRuleEnabled(v, anAddress({ ruleId: 'b' }), false), true],
    ['set_pushrule_enabled to the other value', (v) => setPushRuleEnabled(v, anAddress({ ruleId: 'b' }), true), false],
    [
      'set_pushrule_enabled on a server-default rule, same value',
      (v) => setPushRuleEnabled(v, anAddress({ ruleId: '.m.rule.master' }), false),
      true,
    ],
    [
      'set_pushrule_actions with the actions it has (a copy)',
      (v) => setPushRuleActions(v, anAddress({ ruleId: 'a' }), structuredClone(a.actions)),
      true,
    ],
    [
      'set_pushrule_actions with other actions',
      (v) => setPushRuleActions(v, anAddress({ ruleId: 'a' }), ['notify']),
      false,
    ],
    [
      'set_pushrule_actions with the same tweak, its keys in another order',
      (v) => setPushRuleActions(v, anAddress({ ruleId: 'a' }), ['notify', { value: 'bell', set_tweak: 'sound' }]),
      true,
    ],
    [
      'set_pushrule_actions with the same actions in another order',
      (v) => setPushRuleActions(v, anAddress({ ruleId: 'a' }), [...a.actions].reverse()),
      false,
    ],
    [
      'set_pushrule of an existing rule with its own body, no before/after (stays where it is)',
      (v) => setPushRule(v, setA()),
      true,
    ],
    ['set_pushrule with before that lands it where it is', (v) => setPushRule(v, setA({ before: 'b' })), true],
    ['set_pushrule with after that moves it', (v) => setPushRule(v, setA({ after: 'b' })), false],
    [
      'set_pushrule with other conditions',
      (v) => setPushRule(v, setA({ body: { actions: a.actions, conditions: [] } })),
      false,
    ],
    ['set_pushrule of a new rule', (v) => setPushRule(v, aSetRequest({ ruleId: 'c' })), false],
    ['delete_pushrule', (v) => deletePushRule(v, anAddress({ ruleId: 'a' })), false],
  ])('%s → unchanged: %s', (_name, operation, expected) => {
    expect(unchangedBy(view, operation(view))).toBe(expected);
  });

  it('set_pushrule keeps an existing rule disabled, so re-sending a disabled rule changes nothing either', () => {
    const request = aSetRequest({ ruleId: 'b', body: { actions: b.actions, conditions: b.conditions } });
    expect(unchangedBy(view, setPushRule(view, request))).toBe(true);
  });

  it('is a change when the ruleset was upgraded on reading: the write stores the upgrade', () => {
    const upgraded: PushRulesEventView = {
      status: 'valid',
      ruleset: aRuleset({ override: overridesWithUserRules(a, b) }),
      upgraded: true,
    };
    expect(unchangedBy(upgraded, setPushRuleEnabled(upgraded, anAddress({ ruleId: 'b' }), false))).toBe(false);
  });

  it('is never true of an event that is not a valid ruleset', () => {
    expect(leavesRulesetUnchanged({ status: 'missing', reason: 'absent' }, aRuleset())).toBe(false);
    expect(leavesRulesetUnchanged({ status: 'undecodable' }, aRuleset())).toBe(false);
  });
});
