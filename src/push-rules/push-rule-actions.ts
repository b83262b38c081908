import { ok, type Result } from '../result/result.js';
import { locateRule } from './locate-rule.js';
import type { PushAction, Ruleset } from './push-rule.js';
import type { PushRulesEventView } from './push-rules-event.js';
import type { RuleAddress } from './rule-address.js';
import { withRuleReplaced } from './ruleset-access.js';

/** Seed 4.4. */
export function getPushRuleActions(view: PushRulesEventView, address: RuleAddress): Result<readonly PushAction[]> {
  const located = locateRule(view, address);
  return located.ok ? ok(located.value.rule.actions) : located;
}

/** Seed 4.5. Server-default rules may have their actions changed too. */
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
