import { ok, type Result } from '../result/result.js';
import { locateRule } from './locate-rule.js';
import type { Ruleset } from './push-rule.js';
import type { PushRulesEventView } from './push-rules-event.js';
import type { RuleAddress } from './rule-address.js';
import { withRuleReplaced } from './ruleset-access.js';

/** See docs/push-rules.md#get_pushrule_enabled-and-set_pushrule_enabled. */
export function getPushRuleEnabled(view: PushRulesEventView, address: RuleAddress): Result<boolean> {
  const located = locateRule(view, address);
  return located.ok ? ok(located.value.rule.enabled) : located;
}

/**
 * Allowed on server-default rules: that is how `.m.rule.master` is switched
 * on (docs/push-rules.md#get_pushrule_enabled-and-set_pushrule_enabled).
 */
export function setPushRuleEnabled(view: PushRulesEventView, address: RuleAddress, enabled: boolean): Result<Ruleset> {
  const located = locateRule(view, address);
  if (!located.ok) return located;
  const { rule, ruleset } = located.value;
  return ok(withRuleReplaced(ruleset, located.value, { ...rule, enabled }));
}
