import { describe, expect, it, vi } from 'vitest';
import { compileRuleset, sharedDefaultRuleset } from '../../src/evaluation/compile-ruleset.js';
import type { CompiledRuleset } from '../../src/evaluation/compiled-ruleset.js';
import {
  evaluateRequest,
  evaluateSlice,
  evaluateUntil,
  evaluationReply,
  startEvaluation,
  type EvaluateRequest,
  type RulesetLookup,
} from '../../src/evaluation/evaluate-request.js';
import type { EvaluationRecipient } from '../../src/evaluation/evaluation-input.js';
import { aContentRule } from '../support/builders.js';
import { aBody, aRoom, EMPTY_RULESET, SENDER } from '../support/evaluation-builders.js';

const keywordUser = '@keyword:example.org';
const mutedUser = '@muted:example.org';
const keywordRules = compileRuleset({
  ...EMPTY_RULESET,
  content: [
    aContentRule({
      rule_id: 'lunch',
      pattern: 'lunch',
      actions: ['notify', 'dont_notify', { set_tweak: 'highlight' }],
    }),
  ],
});
const mutedRules = compileRuleset(EMPTY_RULESET);
const lookup: RulesetLookup = (recipient) =>
  recipient.user_id === keywordUser
    ? keywordRules
    : recipient.user_id === mutedUser
      ? mutedRules
      : sharedDefaultRuleset();

const recipients: EvaluationRecipient[] = [
  { user_id: '@a:example.org', display_name: 'A' },
  { user_id: keywordUser },
  { user_id: SENDER },
  { user_id: mutedUser },
  ...Array.from({ length: 20 }, (_, i) => ({ user_id: `@user${i}:example.org` })),
];
const request = (explain?: boolean): EvaluateRequest => ({
  event: aBody('lunch anyone?'),
  room: aRoom({ member_count: 24 }),
  recipients,
  ...(explain === undefined ? {} : { explain }),
});

describe('evaluateRequest', () => {
  it('notifies the recipients whose matched rule notifies, with its actions minus the no-ops', () => {
    const reply = evaluateRequest(request(), lookup);
    expect(reply.notify[keywordUser]).toEqual(['notify', { set_tweak: 'highlight' }]);
    expect(reply.notify['@a:example.org']).toEqual(['notify']);
    expect(Object.keys(reply.notify)).toHaveLength(recipients.length - 2);
    expect(reply.notify).not.toHaveProperty(SENDER);
    expect(reply.notify).not.toHaveProperty(mutedUser);
  });

  it('counts every recipient, the sender included, and names no rules unless asked', () => {
    const reply = evaluateRequest(request(), lookup);
    expect(reply.evaluated).toBe(recipients.length);
    expect(reply).not.toHaveProperty('rule_ids');
    expect(evaluateRequest(request(false), lookup)).not.toHaveProperty('rule_ids');
  });

  it("with explain, names every recipient's rule: null for the sender and for no match", () => {
    const ruleIds = evaluateRequest(request(true), lookup).rule_ids ?? {};
    expect(Object.keys(ruleIds)).toHaveLength(recipients.length);
    expect(ruleIds[keywordUser]).toBe('lunch');
    expect(ruleIds['@a:example.org']).toBe('.m.rule.message');
    expect(ruleIds[SENDER]).toBeNull();
    expect(ruleIds[mutedUser]).toBeNull();
  });

  it("never looks up the sender's rules", () => {
    const spy = vi.fn(lookup);
    evaluateRequest(request(), spy);
    expect(spy).toHaveBeenCalledTimes(recipients.length - 1);
    expect(spy.mock.calls.map(([recipient]) => recipient.user_id)).not.toContain(SENDER);
  });

  it('answers an empty recipient list', () => {
    expect(evaluateRequest({ ...request(true), recipients: [] }, lookup)).toEqual({
      notify: {},
      evaluated: 0,
      rule_ids: {},
    });
  });
});

describe('evaluation in slices', () => {
  it.each([1, 3, 7, 100])('gives the same reply in slices of %i as at once', (size) => {
    const evaluation = startEvaluation(request(true));
    let slices = 0;
    while (!evaluateSlice(evaluation, lookup, size)) slices += 1;
    expect(slices).toBe(Math.ceil(recipients.length / size) - 1);
    expect(evaluationReply(evaluation)).toEqual(evaluateRequest(request(true), lookup));
  });

  it('evaluates no further than asked', () => {
    const evaluation = startEvaluation(request());
    expect(evaluateSlice(evaluation, lookup, 2)).toBe(false);
    expect(evaluation.evaluated).toBe(2);
    expect(Object.keys(evaluationReply(evaluation).notify)).toEqual(['@a:example.org', keywordUser]);
  });

  it('pauses when told to, checking every few recipients, and resumes where it stopped', () => {
    const evaluation = startEvaluation(request());
    let checks = 0;
    expect(evaluateUntil(evaluation, lookup, () => (checks += 1) === 1, 5)).toBe(false);
    expect(evaluation.evaluated).toBe(5);
    expect(evaluateUntil(evaluation, lookup, () => false, 5)).toBe(true);
    expect(evaluationReply(evaluation)).toEqual(evaluateRequest(request(), lookup));
  });

  it('shares the event preparation between slices', () => {
    const evaluation = startEvaluation(request());
    const textSpy = vi.spyOn(evaluation.event, 'text');
    const rulesets: CompiledRuleset[] = [];
    const recording: RulesetLookup = (recipient, index) => {
      const ruleset = lookup(recipient, index);
      rulesets.push(ruleset);
      return ruleset;
    };
    while (!evaluateSlice(evaluation, recording, 4));
    // The body is folded once for the whole fan-out.
    expect(textSpy.mock.calls.filter(([value]) => value === 'lunch anyone?')).toHaveLength(1);
    expect(rulesets).toHaveLength(recipients.length - 1);
  });
});
