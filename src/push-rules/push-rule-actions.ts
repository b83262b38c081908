import { ok, type Result } from '../result/result.js';
import { locateRule } from './locate-rule.js';
import type { PushAction, Ruleset } from './push-rule.js';
import type { PushRulesEventView } from './push-rules-event.js';
import type { RuleAddress } from './rule-address.js';
import { withRuleReplaced } from './ruleset-access.js';

/** See docs/push-rules.md#get_pushrule_actions-and-set_pushrule_actions. */
export function getPushRuleActions(view: PushRulesEventView, address: RuleAddress): Result<readonly PushAction[]> {
  const located = locateRule(view, address);
  return located.ok ? ok(located.value.rule.actions) : located;
}

/**
 * Server-default rules may have their actions changed too
 * (docs/push-rules.md#get_pushrule_actions-and-set_pushrule_actions).
 */
export function setPushRuleActions(
  view: PushRulesEventView,
  address: RuleAddress,
  actions: readonly PushAction[],
): Result<Ruleset> {
  const located = locateRule(view, address);
  if (!located.ok) return located;
  const { rule, ruleset } = located.value;
  return ok(withRuleReplaced(ruleset, located.value, { ...rule, actions }));
}
