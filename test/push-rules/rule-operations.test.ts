import { describe, expect, it } from 'vitest';
import { deletePushRule } from '../../src/push-rules/delete-push-rule.js';
import { getPushRule } from '../../src/push-rules/get-push-rule.js';
import { getPushRuleActions, setPushRuleActions } from '../../src/push-rules/push-rule-actions.js';
import { getPushRuleEnabled, setPushRuleEnabled } from '../../src/push-rules/push-rule-enabled.js';
import type { PushRulesEventView } from '../../src/push-rules/push-rules-event.js';
import type { RuleAddress } from '../../src/push-rules/rule-address.js';
import type { Result } from '../../src/result/result.js';
import {
  ABSENT,
  aConditionalRule,
  aContentRule,
  anAddress,
  aRuleset,
  ids,
  overridesWithUserRules,
  validView,
} from '../support/builders.js';
import { expectError, expectOk } from '../support/expect-result.js';
import { SEED } from '../support/seed-messages.js';

const mine = aConditionalRule({ rule_id: 'my.rule', actions: ['notify', { set_tweak: 'sound', value: 'bell' }] });
const view = validView(aRuleset({ override: overridesWithUserRules(mine), content: [aContentRule()] }));

type Op = (view: PushRulesEventView, address: RuleAddress) => Result<unknown>;
const scoped: [string, Op][] = [
  ['4.4 get actions', getPushRuleActions],
  ['4.5 set actions', (v, a) => setPushRuleActions(v, a, [])],
  ['4.6 get enabled', getPushRuleEnabled],
  ['4.7 set enabled', (v, a) => setPushRuleEnabled(v, a, true)],
  ['4.8 delete', deletePushRule],
];

describe('seed 4.4–4.8: error lines, in check order', () => {
  it.each(scoped)('%s: scope not global → InvalidParam (even on an absent event)', (_op, run) => {
    expectError(run(ABSENT, anAddress({ scope: 'device' })), 'InvalidParam', SEED.scope);
    expectError(run(view, anAddress({ scope: 'device' })), 'InvalidParam', SEED.scope);
  });

  it.each(scoped)('%s: event absent → NotFound', (_op, run) => {
    expectError(run(ABSENT, anAddress()), 'NotFound', SEED.eventNotFound);
  });

  it.each(scoped)('%s: rule absent → NotFound', (_op, run) => {
    expectError(run(view, anAddress({ ruleId: 'nope' })), 'NotFound', SEED.ruleNotFound);
  });

  it.each(scoped)('%s: unknown kind → rule NotFound', (_op, run) => {
    expectError(run(view, anAddress({ kind: 'nonsense' })), 'NotFound', SEED.ruleNotFound);
  });

  it.each(scoped)('%s: the rule ID is looked up in the given kind only', (_op, run) => {
    expectError(run(view, anAddress({ kind: 'underride' })), 'NotFound', SEED.ruleNotFound);
  });
});

describe('seed 4.2: get one push rule', () => {
  it('returns the rule addressed by kind and rule ID', () => {
    expect(expectOk(getPushRule(view, anAddress()))).toEqual(mine);
    expect(expectOk(getPushRule(view, anAddress({ kind: 'content', ruleId: 'cake' })))).toEqual(aContentRule());
  });

  it('does not check the scope', () => {
    expect(expectOk(getPushRule(view, anAddress({ scope: 'device' })))).toEqual(mine);
  });

  it('event absent → NotFound', () => {
    expectError(getPushRule(ABSENT, anAddress({ scope: 'device' })), 'NotFound', SEED.eventNotFound);
  });

  it('rule absent → NotFound', () => {
    expectError(getPushRule(view, anAddress({ ruleId: 'nope' })), 'NotFound', SEED.ruleNotFound);
  });

  it('unknown kind → NotFound', () => {
    expectError(getPushRule(view, anAddress({ kind: 'nonsense' })), 'NotFound', SEED.ruleNotFound);
  });
});

describe('seed 4.4–4.7: reading and replacing actions and enabled', () => {
  it('4.4 returns the actions', () => {
    expect(expectOk(getPushRuleActions(view, anAddress()))).toEqual(mine.actions);
  });

  it('4.5 replaces the actions and nothing else', () => {
    const next = expectOk(setPushRuleActions(view, anAddress(), ['dont_notify']));
    expect(next.override[1]).toEqual({ ...mine, actions: ['dont_notify'] });
    expect(ids(next.override)).toEqual(ids(view.status === 'valid' ? view.ruleset.override : []));
  });

  it('4.5 is allowed on a server-default rule', () => {
    const next = expectOk(setPushRuleActions(view, anAddress({ ruleId: '.m.rule.reaction' }), ['notify']));
    expect(next.override.find((r) => r.rule_id === '.m.rule.reaction')).toMatchObject({
      default: true,
      actions: ['notify'],
    });
  });

  it.each([true, false])('4.6 returns enabled = %s', (enabled) => {
    const v = validView(aRuleset({ override: overridesWithUserRules({ ...mine, enabled }) }));
    expect(expectOk(getPushRuleEnabled(v, anAddress()))).toBe(enabled);
  });

  it('4.7 switches a server-default rule (the master rule) on', () => {
    const next = expectOk(setPushRuleEnabled(view, anAddress({ ruleId: '.m.rule.master' }), true));
    expect(next.override[0]).toMatchObject({ rule_id: '.m.rule.master', enabled: true, default: true });
  });
});

describe('seed 4.8: delete a rule', () => {
  it('the rule is a server-default rule → InvalidParam', () => {
    expectError(deletePushRule(view, anAddress({ ruleId: '.m.rule.master' })), 'InvalidParam', SEED.deleteDefault);
    expectError(
      deletePushRule(view, anAddress({ kind: 'underride', ruleId: '.m.rule.call' })),
      'InvalidParam',
      SEED.deleteDefault,
    );
  });

  it('the rule does not exist → NotFound (a dot-prefixed ID no rule has included)', () => {
    expectError(deletePushRule(view, anAddress({ ruleId: 'nope' })), 'NotFound', SEED.ruleNotFound);
    expectError(deletePushRule(view, anAddress({ ruleId: '.m.rule.nope' })), 'NotFound', SEED.ruleNotFound);
  });

  it('removes exactly the rule', () => {
    const next = expectOk(deletePushRule(view, anAddress()));
    expect(ids(next.override)).toEqual(ids(aRuleset().override));
    expect(next.content).toEqual([aContentRule()]);
  });
});
