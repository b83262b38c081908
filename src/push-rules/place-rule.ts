import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { fail, ok, type Result } from '../result/result.js';
import { isServerDefaultRuleId, MASTER_RULE_ID, type PushRule, type RuleKind } from './push-rule.js';

export interface Placement {
  readonly before?: string | undefined;
  readonly after?: string | undefined;
}

/**
 * Puts `rule` into one kind's list (highest priority first), replacing any
 * rule with the same ID. Positions are computed on the list with that rule
 * taken out, so moving a rule down lands it right below `after`, and `after`
 * may name the last rule of the kind. The rule itself is not a valid
 * `before`/`after` target.
 *
 * Checks, first failure wins: a relative rule that is server-default, one
 * that does not exist, then `before` ranking above `after`.
 */
export function placeRule(
  kind: RuleKind,
  rules: readonly PushRule[],
  rule: PushRule,
  placement: Placement,
): Result<readonly PushRule[]> {
  const { before, after } = placement;
  if (
    (before !== undefined && isServerDefaultRuleId(before)) ||
    (after !== undefined && isServerDefaultRuleId(after))
  ) {
    return fail(matrixError('InvalidParam', MESSAGES.placementRelativeToDefault));
  }
  const currentIndex = rules.findIndex((r) => r.rule_id === rule.rule_id);
  const others = currentIndex < 0 ? rules : rules.filter((_, i) => i !== currentIndex);
  const beforeIndex = before === undefined ? undefined : others.findIndex((r) => r.rule_id === before);
  const afterIndex = after === undefined ? undefined : others.findIndex((r) => r.rule_id === after);
  if (beforeIndex === -1 || afterIndex === -1) {
    return fail(matrixError('NotFound', MESSAGES.placementRuleNotFound));
  }
  if (beforeIndex !== undefined && afterIndex !== undefined && beforeIndex < afterIndex) {
    return fail(matrixError('InvalidParam', MESSAGES.beforeAboveAfter));
  }

  let target: number;
  if (beforeIndex !== undefined) target = beforeIndex;
  else if (afterIndex !== undefined) target = afterIndex + 1;
  else if (currentIndex >= 0) target = currentIndex;
  else target = kind === 'override' && others[0]?.rule_id === MASTER_RULE_ID ? 1 : 0;

  return ok([...others.slice(0, target), rule, ...others.slice(target)]);
}
