import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { fail, ok, type Result } from '../result/result.js';
import { checkScope } from './check-scope.js';
import type { Ruleset } from './push-rule.js';
import { requireRuleset, type PushRulesEventView } from './push-rules-event.js';
import type { RuleAddress } from './rule-address.js';
import { findRule, withRules } from './ruleset-access.js';

/**
 * Check order (docs/push-rules.md#delete_pushrule): scope, event presence,
 * then removal: a stored server-default rule cannot be deleted; a rule that
 * is not there is NotFound (so is an unknown kind, or a dot-prefixed ID no
 * rule has).
 */
export function deletePushRule(view: PushRulesEventView, address: RuleAddress): Result<Ruleset> {
  const scope = checkScope(address.scope);
  if (!scope.ok) return scope;
  const ruleset = requireRuleset(view);
  if (!ruleset.ok) return ruleset;
  const found = findRule(ruleset.value, address.kind, address.ruleId);
  if (found === undefined) return fail(matrixError('NotFound', MESSAGES.ruleNotFound));
  if (found.rule.default) return fail(matrixError('InvalidParam', MESSAGES.deleteServerDefault));
  const rules = ruleset.value[found.kind].filter((_, i) => i !== found.index);
  return ok(withRules(ruleset.value, found.kind, rules));
}
