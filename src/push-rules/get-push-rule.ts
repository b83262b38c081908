import { ok, type Result } from '../result/result.js';
import { locateRule } from './locate-rule.js';
import type { PushRule } from './push-rule.js';
import type { PushRulesEventView } from './push-rules-event.js';
import type { RuleAddress } from './rule-address.js';

/** Seed 4.2: the scope is not checked; the rule is read from the global ruleset. */
export function getPushRule(view: PushRulesEventView, address: RuleAddress): Result<PushRule> {
  const located = locateRule(view, address, { checkScope: false });
  return located.ok ? ok(located.value.rule) : located;
}
