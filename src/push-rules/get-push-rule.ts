import { ok, type Result } from '../result/result.js';
import { locateRule } from './locate-rule.js';
import type { PushRule } from './push-rule.js';
import type { PushRulesEventView } from './push-rules-event.js';
import type { RuleAddress } from './rule-address.js';

/** The scope is not checked; the rule is read from the global ruleset (docs/push-rules.md#get_pushrule). */
export function getPushRule(view: PushRulesEventView, address: RuleAddress): Result<PushRule> {
  const located = locateRule(view, address, { checkScope: false });
  return located.ok ? ok(located.value.rule) : located;
}
