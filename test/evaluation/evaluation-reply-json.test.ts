import { describe, expect, it } from 'vitest';
import { compileRuleset, sharedDefaultRuleset } from '../../src/evaluation/compile-ruleset.js';
import {
  evaluateSlice,
  evaluationReply,
  startEvaluation,
  type EvaluateCompactReply,
  type EvaluateReply,
  type EvaluateRequest,
  type RulesetLookup,
} from '../../src/evaluation/evaluate-request.js';
import { evaluationReplyJson } from '../../src/evaluation/evaluation-reply-json.js';
import type { EvaluationRecipient } from '../../src/evaluation/evaluation-input.js';
import { aContentRule } from '../support/builders.js';
import { compileRowRulesets, loadWorkload } from '../support/evaluate-bench-fixtures.js';
import { aBody, aRoom, EMPTY_RULESET, SENDER } from '../support/evaluation-builders.js';

const loud = '@loud:example.org';
const muted = '@muted:example.org';
const sameAsDefault = '@same:example.org';
const loudRules = compileRuleset({
  ...EMPTY_RULESET,
  content: [
    aContentRule({ rule_id: 'lunch', pattern: 'lunch', actions: ['notify', { set_tweak: 'sound', value: 'x' }] }),
  ],
});
// Another rule with the very actions `.m.rule.message` has: its recipients join the same group.
const sameActionsRules = compileRuleset({
  ...EMPTY_RULESET,
  content: [aContentRule({ rule_id: 'noon', pattern: 'lunch', actions: ['notify', 'coalesce'] })],
});
const lookup: RulesetLookup = (recipient) =>
  recipient.user_id === loud
    ? loudRules
    : recipient.user_id === muted
      ? compileRuleset(EMPTY_RULESET)
      : recipient.user_id === sameAsDefault
        ? sameActionsRules
        : sharedDefaultRuleset();

const ids = (...userIds: string[]): EvaluationRecipient[] => userIds.map((user_id) => ({ user_id }));

function evaluated(recipients: readonly EvaluationRecipient[], options: Partial<EvaluateRequest> = {}) {
  const request: EvaluateRequest = { event: aBody('lunch anyone?'), room: aRoom(), recipients, ...options };
  const evaluation = startEvaluation(request);
  evaluateSlice(evaluation, lookup, recipients.length);
  return evaluation;
}

describe('evaluationReplyJson, the default form', () => {
  it.each([
    ['nobody', ids()],
    ['only the sender', ids(SENDER)],
    ['one notified', ids('@a:example.org')],
    ['none notified', ids(muted, SENDER)],
    ['mixed actions, in request order', ids('@a:example.org', loud, muted, SENDER, '@b:example.org', sameAsDefault)],
    ['historical localparts with " and \\', ids('@a"b:example.org', '@c\\d:example.org', '@e:example.org')],
    ['a user ID outside ASCII (not valid, still JSON)', ids('@é:example.org', '@\u{1F600}:example.org')],
  ])('is exactly JSON.stringify of the reply object: %s', (_name, recipients) => {
    for (const explain of [false, true]) {
      const evaluation = evaluated(recipients, { explain });
      expect(evaluationReplyJson(evaluation)).toBe(JSON.stringify(evaluationReply(evaluation)));
    }
  });

  it('is exactly JSON.stringify of the reply object on every event of the evaluate-bench workload', () => {
    for (const row of loadWorkload().rows) {
      const rulesetFor = compileRowRulesets(row);
      for (const { event, room } of row.events) {
        const evaluation = startEvaluation({ event, room, recipients: row.recipients, explain: true });
        evaluateSlice(evaluation, rulesetFor, row.recipients.length);
        expect(evaluationReplyJson(evaluation)).toBe(JSON.stringify(evaluationReply(evaluation)));
      }
    }
  });
});

/** The default form rebuilt from the compact one, as the client does. */
function expand(compact: EvaluateCompactReply): EvaluateReply {
  const notify: Record<string, EvaluateReply['notify'][string]> = {};
  for (const group of compact.notify_groups)
    if ('user_ids' in group) for (const userId of group.user_ids) notify[userId] = group.actions;
  return {
    notify,
    evaluated: compact.evaluated,
    ...(compact.rule_ids === undefined ? {} : { rule_ids: compact.rule_ids }),
  };
}

describe('evaluationReplyJson, the compact form', () => {
  it('groups the notified recipients by identical actions: groups by first recipient, user IDs in request order', () => {
    const evaluation = evaluated(ids('@a:example.org', loud, muted, SENDER, '@b:example.org', sameAsDefault), {
      compact: true,
    });
    expect(JSON.parse(evaluationReplyJson(evaluation))).toEqual({
      notify_groups: [
        { actions: ['notify'], user_ids: ['@a:example.org', '@b:example.org', sameAsDefault] },
        { actions: ['notify', { set_tweak: 'sound', value: 'x' }], user_ids: [loud] },
      ],
      evaluated: 6,
    });
  });

  it.each([
    ['nobody notified', ids(muted, SENDER), false],
    ['with explain', ids('@a:example.org', loud, SENDER), true],
    // One ID that needs escaping makes its group quote each ID on its own.
    ['historical localparts with " and \\', ids('@a:example.org', '@a"b:example.org', '@c\\d:example.org'), false],
    ['a user ID outside ASCII (not valid, still JSON)', ids('@é:example.org', '@\u{1F600}:example.org'), false],
  ])('says the same as the default form: %s', (_name, recipients, explain) => {
    const compact = JSON.parse(
      evaluationReplyJson(evaluated(recipients, { explain, compact: true })),
    ) as EvaluateCompactReply;
    expect(expand(compact)).toEqual(evaluationReply(evaluated(recipients, { explain })));
  });

  it('says the same as the default form on every event of the evaluate-bench workload', () => {
    for (const row of loadWorkload().rows) {
      const rulesetFor = compileRowRulesets(row);
      for (const { event, room } of row.events) {
        const evaluation = startEvaluation({ event, room, recipients: row.recipients, compact: true });
        evaluateSlice(evaluation, rulesetFor, row.recipients.length);
        expect(expand(JSON.parse(evaluationReplyJson(evaluation)) as EvaluateCompactReply)).toEqual(
          evaluationReply(evaluation),
        );
      }
    }
  });
});

/** The default form rebuilt from runs of positions in `recipients`, as the client does. */
function expandRuns(reply: EvaluateCompactReply, recipients: readonly EvaluationRecipient[]): EvaluateReply {
  const notify: Record<string, EvaluateReply['notify'][string]> = {};
  for (const group of reply.notify_groups) {
    if (!('runs' in group)) continue;
    for (let pair = 0; pair < group.runs.length; pair += 2) {
      const first = group.runs[pair] as number;
      for (let at = first; at < first + (group.runs[pair + 1] as number); at += 1)
        notify[(recipients[at] as EvaluationRecipient).user_id] = group.actions;
    }
  }
  return {
    notify,
    evaluated: reply.evaluated,
    ...(reply.rule_ids === undefined ? {} : { rule_ids: reply.rule_ids }),
  };
}

describe('evaluationReplyJson, in runs', () => {
  const LOUD = ['notify', { set_tweak: 'sound', value: 'x' }];
  it.each([
    ['nobody', ids(), []],
    ['nobody notified', ids(muted, SENDER), []],
    ['one run', ids('@a:example.org', '@b:example.org', '@c:example.org'), [{ actions: ['notify'], runs: [0, 3] }]],
    [
      'the sender and a muted user break a run',
      ids('@a:example.org', SENDER, '@b:example.org', '@c:example.org', muted, '@d:example.org'),
      [{ actions: ['notify'], runs: [0, 1, 2, 2, 5, 1] }],
    ],
    [
      'groups in the order of their first recipient; other actions break a run; same actions, other rule, do not',
      ids(loud, '@a:example.org', sameAsDefault, '@b:example.org'),
      [
        { actions: LOUD, runs: [0, 1] },
        { actions: ['notify'], runs: [1, 3] },
      ],
    ],
    [
      'user IDs that would need escaping are never written',
      ids('@a"b:example.org', '@c\\d:example.org'),
      [{ actions: ['notify'], runs: [0, 2] }],
    ],
  ])('%s', (_name, recipients, groups) => {
    const evaluation = evaluated(recipients, { runs: true });
    expect(JSON.parse(evaluationReplyJson(evaluation))).toEqual({
      notify_groups: groups,
      evaluated: recipients.length,
    });
  });

  it('takes precedence over compact, and keeps rule_ids by user ID with explain', () => {
    const recipients = ids('@a:example.org', loud, SENDER);
    const reply = JSON.parse(
      evaluationReplyJson(evaluated(recipients, { runs: true, compact: true, explain: true })),
    ) as EvaluateCompactReply;
    expect(expandRuns(reply, recipients)).toEqual(evaluationReply(evaluated(recipients, { explain: true })));
  });

  it('says the same as the default form on every event of the evaluate-bench workload', () => {
    for (const row of loadWorkload().rows) {
      const rulesetFor = compileRowRulesets(row);
      for (const { event, room } of row.events) {
        const evaluation = startEvaluation({ event, room, recipients: row.recipients, runs: true });
        evaluateSlice(evaluation, rulesetFor, row.recipients.length);
        expect(expandRuns(JSON.parse(evaluationReplyJson(evaluation)) as EvaluateCompactReply, row.recipients)).toEqual(
          evaluationReply(evaluation),
        );
      }
    }
  });
});
