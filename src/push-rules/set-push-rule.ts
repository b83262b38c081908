import { fail, ok, type Result } from '../result/result.js';
import { checkNewRuleId } from './check-rule-id.js';
import { checkScope } from './check-scope.js';
import { placeRule } from './place-rule.js';
import type { PushRule, RuleBody, RuleKind, Ruleset } from './push-rule.js';
import { requireRuleset, type PushRulesEventView } from './push-rules-event.js';
import { findRule, withRules } from './ruleset-access.js';

export interface SetPushRuleRequest {
  readonly scope: string;
  readonly kind: RuleKind;
  readonly ruleId: string;
  /** Already checked for its kind (`validateRuleBody`). */
  readonly body: RuleBody;
  readonly before?: string | undefined;
  readonly after?: string | undefined;
}

/**
 * Creates or replaces a user rule. Check order
 * (docs/push-rules.md#set_pushrule): scope, event presence, then the
 * insertion checks of `checkNewRuleId` and `placeRule`.
 *
 * A new rule is enabled. A rule that already exists keeps its `enabled`
 * flag wherever it is placed: replacing a rule's body is not a request to
 * switch it back on.
 */
export function setPushRule(view: PushRulesEventView, request: SetPushRuleRequest): Result<Ruleset> {
  const scope = checkScope(request.scope);
  if (!scope.ok) return scope;
  const ruleset = requireRuleset(view);
  if (!ruleset.ok) return ruleset;
  const id = checkNewRuleId(request.kind, request.ruleId);
  if (!id.ok) return id;

  const existing = findRule(ruleset.value, request.kind, request.ruleId);
  const rule = buildRule(request, existing?.rule.enabled ?? true);
  const placed = placeRule(request.kind, ruleset.value[request.kind], rule, request);
  if (!placed.ok) return fail(placed.error);
  return ok(withRules(ruleset.value, request.kind, placed.value));
}

function buildRule(request: SetPushRuleRequest, enabled: boolean): PushRule {
  const base = { rule_id: request.ruleId, default: false, enabled, actions: request.body.actions };
  switch (request.kind) {
    case 'override':
    case 'underride':
      return { ...base, conditions: request.body.conditions ?? [] };
    case 'content':
      return { ...base, pattern: request.body.pattern ?? '' };
    case 'room':
    case 'sender':
      return base;
  }
}
