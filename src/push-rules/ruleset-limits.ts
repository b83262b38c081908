import { LIMIT_MESSAGES, matrixError } from '../errors/error-catalogue.js';
import { fail, ok, type Result } from '../result/result.js';
import { rulesetContentJson } from './decode-ruleset.js';
import { RULE_KINDS, type Ruleset } from './push-rule.js';

export interface RulesetLimits {
  /** Rules a user made (not server defaults), over all kinds. */
  readonly maxUserRules: number;
  /** The stored event content, as JSON text in UTF-8 bytes. */
  readonly maxRulesetBytes: number;
}

/**
 * Refuses a write whose result is over a limit and bigger than what was
 * there (TooLarge). A user already over a limit, e.g. after the limit was
 * lowered, can still delete and shrink.
 */
export function checkRulesetGrowth(before: Ruleset, after: Ruleset, limits: RulesetLimits): Result<Ruleset> {
  const rulesAfter = countUserRules(after);
  if (rulesAfter > limits.maxUserRules && rulesAfter > countUserRules(before)) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.tooManyRules(limits.maxUserRules)));
  }
  const bytesAfter = contentBytes(after);
  if (bytesAfter > limits.maxRulesetBytes && bytesAfter > contentBytes(before)) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.rulesetTooLarge(limits.maxRulesetBytes)));
  }
  return ok(after);
}

export function countUserRules(ruleset: Ruleset): number {
  let count = 0;
  for (const kind of RULE_KINDS) for (const rule of ruleset[kind]) if (!rule.default) count += 1;
  return count;
}

function contentBytes(ruleset: Ruleset): number {
  return Buffer.byteLength(rulesetContentJson(ruleset), 'utf8');
}
