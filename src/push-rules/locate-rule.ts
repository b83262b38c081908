import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { fail, ok, type Result } from '../result/result.js';
import { checkScope } from './check-scope.js';
import type { Ruleset } from './push-rule.js';
import { requireRuleset, type PushRulesEventView } from './push-rules-event.js';
import type { RuleAddress } from './rule-address.js';
import { findRule, type FoundRule } from './ruleset-access.js';

export interface LocatedRule extends FoundRule {
  readonly ruleset: Ruleset;
}

/**
 * The shared check order of the single-rule operations
 * (docs/push-rules.md#checks-shared-by-the-single-rule-operations): scope
 * (unless the operation has no scope check), event presence, rule presence.
 */
export function locateRule(
  view: PushRulesEventView,
  address: RuleAddress,
  options: { readonly checkScope: boolean } = { checkScope: true },
): Result<LocatedRule> {
  if (options.checkScope) {
    const scope = checkScope(address.scope);
    if (!scope.ok) return scope;
  }
  const ruleset = requireRuleset(view);
  if (!ruleset.ok) return ruleset;
  const found = findRule(ruleset.value, address.kind, address.ruleId);
  if (found === undefined) return fail(matrixError('NotFound', MESSAGES.ruleNotFound));
  return ok({ ...found, ruleset: ruleset.value });
}
