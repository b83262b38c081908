import { describe, expect, it } from 'vitest';
import { deletePushRule } from '../../src/push-rules/delete-push-rule.js';
import { getPushRule } from '../../src/push-rules/get-push-rule.js';
import { getPushRules } from '../../src/push-rules/get-push-rules.js';
import { getPushRuleActions, setPushRuleActions } from '../../src/push-rules/push-rule-actions.js';
import { getPushRuleEnabled, setPushRuleEnabled } from '../../src/push-rules/push-rule-enabled.js';
import {
  viewPushRulesEvent,
  type PushRulesEventView,
  type PushRulesLookup,
} from '../../src/push-rules/push-rules-event.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { setPushRule } from '../../src/push-rules/set-push-rule.js';
import type { Result } from '../../src/result/result.js';
import {
  aConditionalRule,
  anAddress,
  aRuleset,
  aSetRequest,
  ALICE,
  overridesWithUserRules,
  storedLookup,
} from '../support/builders.js';
import { expectError, expectOk } from '../support/expect-result.js';
import { SEED } from '../support/seed-messages.js';

const stored = aRuleset({ override: overridesWithUserRules(aConditionalRule({ rule_id: 'my.rule' })) });

describe('seed section 3: get all rules in each event state', () => {
  it('event absent → defaults returned and stored', () => {
    expect(expectOk(getPushRules({ found: false }, ALICE))).toEqual({
      ruleset: serverDefaultRuleset(ALICE),
      persist: 'store',
    });
  });

  it('event present, valid → stored ruleset returned, nothing written', () => {
    expect(expectOk(getPushRules(storedLookup({ global: stored }), ALICE))).toEqual({
      ruleset: stored,
      persist: 'none',
    });
  });

  it('event present without a content key → defaults stored and returned silently', () => {
    const lookup: PushRulesLookup = { found: true, event: { type: 'm.push_rules' }, defaultsRevision: undefined };
    expect(expectOk(getPushRules(lookup, ALICE))).toEqual({ ruleset: serverDefaultRuleset(ALICE), persist: 'store' });
  });

  it('event present with empty content → defaults stored and returned silently', () => {
    expect(expectOk(getPushRules(storedLookup({}), ALICE))).toEqual({
      ruleset: serverDefaultRuleset(ALICE),
      persist: 'store',
    });
  });

  it('lookup fails → defaults returned, stored only where no document exists', () => {
    expect(expectOk(getPushRules({ found: 'failed' }, ALICE))).toEqual({
      ruleset: serverDefaultRuleset(ALICE),
      persist: 'store-if-absent',
    });
  });

  it.each([
    ['content is a string', 'not a ruleset'],
    ['content is null', null],
    ['content lacks global', { other: 1 }],
    ['global is an array', { global: [] }],
    ['a kind is not a list', { global: { override: {} } }],
    [
      'a rule lacks actions',
      { global: { override: [{ rule_id: 'x', default: false, enabled: true, conditions: [] }] } },
    ],
    [
      'a rule has a numeric action',
      { global: { room: [{ rule_id: '!r', default: false, enabled: true, actions: [1] }] } },
    ],
    [
      'a content rule lacks its pattern',
      { global: { content: [{ rule_id: 'x', default: false, enabled: true, actions: [] }] } },
    ],
    [
      'an override rule lacks conditions',
      { global: { override: [{ rule_id: 'x', default: false, enabled: true, actions: [] }] } },
    ],
    [
      'a condition has no kind',
      { global: { underride: [{ rule_id: 'x', default: false, enabled: true, actions: [], conditions: [{}] }] } },
    ],
    ['enabled is a string', { global: { sender: [{ rule_id: '@b:x', default: false, enabled: 'yes', actions: [] }] } }],
  ])('content cannot be decoded (%s) → Database error, nothing written', (_case, content) => {
    expectError(
      getPushRules(storedLookup(content), ALICE),
      'Database',
      'The stored push rules event could not be decoded.',
    );
  });

  it('an event that is not an object is undecodable', () => {
    expectError(
      getPushRules({ found: true, event: 'garbage', defaultsRevision: undefined }, ALICE),
      'Database',
      'The stored push rules event could not be decoded.',
    );
  });

  it('a kind missing from the stored ruleset reads as empty', () => {
    const { sender: _omitted, ...withoutSender } = stored;
    const decision = expectOk(getPushRules(storedLookup({ global: withoutSender }), ALICE));
    expect(decision.ruleset.sender).toEqual([]);
  });

  it('a ruleset stored under older defaults is upgraded and written back', () => {
    const decision = expectOk(getPushRules(storedLookup({ global: stored }, 'v1.4'), ALICE));
    expect(decision.persist).toBe('store');
    expect(decision.ruleset).toEqual(stored);
  });
});

/** Every rule operation other than get-all, on a view, returning a Result. */
const otherOps: [string, (view: PushRulesEventView) => Result<unknown>][] = [
  ['get rule', (v) => getPushRule(v, anAddress())],
  ['create rule', (v) => setPushRule(v, aSetRequest())],
  ['get actions', (v) => getPushRuleActions(v, anAddress())],
  ['set actions', (v) => setPushRuleActions(v, anAddress(), ['notify'])],
  ['get enabled', (v) => getPushRuleEnabled(v, anAddress())],
  ['set enabled', (v) => setPushRuleEnabled(v, anAddress(), false)],
  ['delete rule', (v) => deletePushRule(v, anAddress())],
];

describe('seed section 3: other operations on an absent event', () => {
  const missingStates: [string, PushRulesLookup][] = [
    ['absent', { found: false }],
    ['without content', { found: true, event: {}, defaultsRevision: undefined }],
    ['with empty content', storedLookup({})],
  ];
  const cases = otherOps.flatMap(([op, run]) =>
    missingStates.map(([state, lookup]) => [op, state, run, lookup] as const),
  );

  it.each(cases)('%s on an event %s → NotFound, nothing written', (_op, _state, run, lookup) => {
    expectError(run(viewPushRulesEvent(lookup, ALICE)), 'NotFound', SEED.eventNotFound);
  });

  it.each(otherOps)('%s on an undecodable event → Database error', (_op, run) => {
    expectError(
      run(viewPushRulesEvent(storedLookup('x'), ALICE)),
      'Database',
      'The stored push rules event could not be decoded.',
    );
  });
});

describe('seed section 3: writes on a valid event', () => {
  const view = viewPushRulesEvent(storedLookup({ global: stored }), ALICE);

  it('create rule → rule inserted', () => {
    const next = expectOk(setPushRule(view, aSetRequest({ ruleId: 'added' })));
    expect(next.override.map((r) => r.rule_id)).toContain('added');
  });

  it('delete rule → rule removed', () => {
    const next = expectOk(deletePushRule(view, anAddress()));
    expect(next.override.map((r) => r.rule_id)).not.toContain('my.rule');
  });

  it("set actions → the rule's actions replaced", () => {
    const next = expectOk(setPushRuleActions(view, anAddress(), ['dont_notify']));
    expect(next.override.find((r) => r.rule_id === 'my.rule')?.actions).toEqual(['dont_notify']);
  });

  it.each([true, false])('set enabled %s → the flag set to that value', (enabled) => {
    const next = expectOk(setPushRuleEnabled(view, anAddress(), enabled));
    expect(next.override.find((r) => r.rule_id === 'my.rule')?.enabled).toBe(enabled);
  });

  it('never changes the ruleset it was given', () => {
    const before = JSON.stringify(stored);
    expectOk(setPushRule(view, aSetRequest({ ruleId: 'added' })));
    expectOk(deletePushRule(view, anAddress()));
    expectOk(setPushRuleEnabled(view, anAddress(), false));
    expect(JSON.stringify(stored)).toBe(before);
  });
});

describe('decoding a stored ruleset', () => {
  it('keeps the first copy when a rule ID repeats within a kind', () => {
    const first = aConditionalRule({ rule_id: 'dup', actions: ['notify'] });
    const second = aConditionalRule({ rule_id: 'dup', actions: ['dont_notify'] });
    const decision = expectOk(getPushRules(storedLookup({ global: { ...stored, override: [first, second] } }), ALICE));
    expect(decision.ruleset.override).toEqual([first]);
  });
});
