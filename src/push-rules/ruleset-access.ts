import { isRuleKind, type PushRule, type RuleKind, type Ruleset } from './push-rule.js';

export interface FoundRule {
  readonly kind: RuleKind;
  readonly rule: PushRule;
  readonly index: number;
}

/**
 * Finds a rule by kind and ID. `kind` is a plain string: on every operation
 * but `set_pushrule` an unknown kind is simply a rule that does not exist.
 */
export function findRule(ruleset: Ruleset, kind: string, ruleId: string): FoundRule | undefined {
  if (!isRuleKind(kind)) return undefined;
  const rules: readonly PushRule[] = ruleset[kind];
  const index = rules.findIndex((r) => r.rule_id === ruleId);
  const rule = rules[index];
  return rule === undefined ? undefined : { kind, rule, index };
}

/** A copy of the ruleset with one kind's list replaced; the rest is shared. */
export function withRules(ruleset: Ruleset, kind: RuleKind, rules: readonly PushRule[]): Ruleset {
  return { ...ruleset, [kind]: rules };
}

/** A copy of the ruleset with the rule at `found` replaced by `rule`. */
export function withRuleReplaced(ruleset: Ruleset, found: FoundRule, rule: PushRule): Ruleset {
  const rules: PushRule[] = [...ruleset[found.kind]];
  rules[found.index] = rule;
  return withRules(ruleset, found.kind, rules);
}
