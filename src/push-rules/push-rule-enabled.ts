import { ok, type Result } from '../result/result.js';
import { locateRule } from './locate-rule.js';
import type { Ruleset } from './push-rule.js';
import type { PushRulesEventView } from './push-rules-event.js';
import type { RuleAddress } from './rule-address.js';
import { withRuleReplaced } from './ruleset-access.js';

/** Seed 4.6. */
export function getPushRuleEnabled(view: PushRulesEventView, address: RuleAddress): Result<boolean> {
  const located = locateRule(view, address);
  return located.ok ? ok(located.value.rule.enabled) : located;
}

/** Seed 4.7. Allowed on server-default rules: that is how `.m.rule.master` is switched on. */
export function setPushRuleEnabled(view: PushRulesEventView, address: RuleAddress, enabled: boolean): Result<Ruleset> {
  const located = locateRule(view, address);
  if (!located.ok) return located;
  const { rule, ruleset } = located.value;
  return ok(withRuleReplaced(ruleset, located.value, { ...rule, enabled }));
}
