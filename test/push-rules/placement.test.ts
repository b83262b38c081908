import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deletePushRule } from '../../src/push-rules/delete-push-rule.js';
import type { PushRule, RuleKind, Ruleset } from '../../src/push-rules/push-rule.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { setPushRule } from '../../src/push-rules/set-push-rule.js';
import type { Result } from '../../src/result/result.js';
import {
  aConditionalRule,
  aRuleset,
  aSetRequest,
  ALICE,
  ids,
  overridesWithUserRules,
  validView,
} from '../support/builders.js';
import { SEED } from '../support/seed-messages.js';

type Kind = Extract<RuleKind, 'override' | 'underride'>;
const DEFAULTS = serverDefaultRuleset(ALICE);

function rulesetWithUsers(kind: Kind, userIds: readonly string[]): Ruleset {
  const users = userIds.map((id) => aConditionalRule({ rule_id: id }));
  return kind === 'override'
    ? aRuleset({ override: overridesWithUserRules(...users) })
    : aRuleset({ underride: [...users, ...DEFAULTS.underride] });
}

/** The user rules of a kind's list, and checks of the invariants around them. */
function checkInvariants(kind: Kind, rules: readonly PushRule[]): string[] {
  const list = ids(rules);
  const defaults = ids(DEFAULTS[kind]);
  expect(new Set(list).size, 'no rule is duplicated').toBe(list.length);
  if (kind === 'override') expect(list[0], '.m.rule.master stays first').toBe('.m.rule.master');
  const otherDefaults = kind === 'override' ? defaults.slice(1) : defaults;
  expect(list.slice(list.length - otherDefaults.length), 'user rules rank above the other defaults').toEqual(
    otherDefaults,
  );
  return list.slice(kind === 'override' ? 1 : 0, list.length - otherDefaults.length);
}

/**
 * The reference model, stated as relations rather than index arithmetic:
 * which error the seed's check order gives, or else where the rule must sit
 * relative to its neighbours.
 */
function expectedError(users: readonly string[], ruleId: string, before?: string, after?: string): string | undefined {
  const targets = [before, after].filter((t): t is string => t !== undefined);
  if (targets.some((t) => t.startsWith('.'))) return SEED.relativeToDefault;
  const others = users.filter((u) => u !== ruleId);
  if (targets.some((t) => !others.includes(t))) return SEED.placementNotFound;
  if (before !== undefined && after !== undefined && others.indexOf(before) < others.indexOf(after)) {
    return SEED.beforeAboveAfter;
  }
  return undefined;
}

function checkPlacement(
  users: readonly string[],
  result: readonly string[],
  ruleId: string,
  before?: string,
  after?: string,
) {
  const others = users.filter((u) => u !== ruleId);
  expect(
    result.filter((id) => id !== ruleId),
    'other user rules keep their relative order',
  ).toEqual(others);
  expect(
    result.filter((id) => id === ruleId),
    'the rule is present once',
  ).toHaveLength(1);
  const at = result.indexOf(ruleId);
  if (before !== undefined) expect(result[at + 1], 'just above before').toBe(before);
  else if (after !== undefined) expect(result[at - 1], 'just below after').toBe(after);
  else if (users.includes(ruleId)) expect(at, 'an existing rule keeps its place').toBe(users.indexOf(ruleId));
  else expect(at, 'a new rule is the most important user rule').toBe(0);
}

describe('placement: exhaustive over small rulesets', () => {
  const cases: [Kind, string[], string, string | undefined, string | undefined][] = [];
  for (const kind of ['override', 'underride'] as const) {
    for (let n = 0; n <= 4; n += 1) {
      const users = Array.from({ length: n }, (_, i) => `u${i}`);
      const targets = [undefined, ...users, 'missing', kind === 'override' ? '.m.rule.reaction' : '.m.rule.call'];
      for (const ruleId of [...users, 'new']) {
        for (const before of targets) for (const after of targets) cases.push([kind, users, ruleId, before, after]);
      }
    }
  }

  it(`agrees with the reference model in all ${cases.length} cases`, () => {
    for (const [kind, users, ruleId, before, after] of cases) {
      const result = setPushRule(
        validView(rulesetWithUsers(kind, users)),
        aSetRequest({ kind, ruleId, before, after }),
      );
      const label = JSON.stringify({ kind, users, ruleId, before, after });
      const error = expectedError(users, ruleId, before, after);
      if (error !== undefined) {
        expect(result.ok ? 'ok' : result.error.message, label).toBe(error);
        continue;
      }
      expect(result.ok, label).toBe(true);
      if (!result.ok) continue;
      checkPlacement(users, checkInvariants(kind, result.value[kind]), ruleId, before, after);
    }
  });
});

describe('placement: invariants over random sequences of writes', () => {
  const ruleIdArb = fc.constantFrom('a', 'b', 'c', 'd', 'e');
  const targetArb = fc.option(fc.constantFrom('a', 'b', 'c', 'd', 'e', '.m.rule.master', 'zz'), { nil: undefined });
  const stepArb = fc.oneof(
    fc.record({ type: fc.constant('set' as const), ruleId: ruleIdArb, before: targetArb, after: targetArb }),
    fc.record({ type: fc.constant('delete' as const), ruleId: ruleIdArb }),
  );

  it('keep master first, user rules above defaults, nothing lost or duplicated', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<Kind>('override', 'underride'),
        fc.array(stepArb, { maxLength: 30 }),
        (kind, steps) => {
          let ruleset = rulesetWithUsers(kind, []);
          for (const step of steps) {
            const users = checkInvariants(kind, ruleset[kind]);
            const result: Result<Ruleset> =
              step.type === 'set'
                ? setPushRule(
                    validView(ruleset),
                    aSetRequest({ kind, ruleId: step.ruleId, before: step.before, after: step.after }),
                  )
                : deletePushRule(validView(ruleset), { scope: 'global', kind, ruleId: step.ruleId });
            if (!result.ok) continue;
            const next = checkInvariants(kind, result.value[kind]);
            if (step.type === 'set') checkPlacement(users, next, step.ruleId, step.before, step.after);
            else expect(next).toEqual(users.filter((u) => u !== step.ruleId));
            ruleset = result.value;
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
