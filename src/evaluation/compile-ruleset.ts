import type { JsonValue } from '../matrix/json.js';
import type { ConditionalPushRule, PushAction, PushRuleBase, Ruleset } from '../push-rules/push-rule.js';
import { serverDefaultRuleset } from '../push-rules/server-default-rules.js';
import { compileCondition, type ConditionOptions } from './compile-condition.js';
import type { CompiledRule, ConditionTest, RecipientOutcome } from './compiled-rule.js';
import type { CompiledRuleset } from './compiled-ruleset.js';
import { ContentRules, type ContentRule } from './content-rules.js';
import { globMatcher } from './glob-matcher.js';
import {
  ARRAY_BYTES,
  EMPTY_RULESET_BYTES,
  jsonBytes,
  MAP_ENTRY_BYTES,
  OBJECT_BYTES,
  POINTER_BYTES,
  stringBytes,
} from './heap-estimate.js';
import { sameJson } from './same-json.js';

export type CompileOptions = ConditionOptions;

/** What the spec's default rules call the owner; the shared default ruleset's parameter. */
export const USER_ID_PLACEHOLDER = '${USER_ID}';

/** Historical no-ops, removed from the actions a reply carries. */
const NO_OP_ACTIONS: ReadonlySet<PushAction> = new Set(['dont_notify', 'coalesce']);

/**
 * Compiles a user's ruleset (the `global` of `get_pushrules`) for
 * evaluation. The result is immutable and holds no reference to the event
 * or recipient of any evaluation: cache it per user until their rules change.
 */
export function compileRuleset(ruleset: Ruleset, options: CompileOptions = {}): CompiledRuleset {
  let estimatedBytes = EMPTY_RULESET_BYTES;
  const conditional = (rules: readonly ConditionalPushRule[]): CompiledRule[] => {
    const compiled: CompiledRule[] = [];
    for (const rule of rules) {
      if (!rule.enabled) continue;
      const built = compileConditionalRule(rule, options);
      if (built === null) continue;
      compiled.push(built.rule);
      estimatedBytes += built.estimatedBytes;
    }
    return compiled;
  };
  const byRuleId = (rules: readonly PushRuleBase[]): Map<string, CompiledRule> => {
    const map = new Map<string, CompiledRule>();
    for (const rule of rules) {
      // Within a kind the first enabled rule with an ID is the one tried first.
      if (!rule.enabled || map.has(rule.rule_id)) continue;
      map.set(rule.rule_id, unconditionalRule(rule));
      estimatedBytes += MAP_ENTRY_BYTES + ruleBytes(rule);
    }
    return map;
  };

  const override = conditional(ruleset.override);
  const contentRules: ContentRule[] = [];
  for (const rule of ruleset.content) {
    if (!rule.enabled) continue;
    contentRules.push({ matcher: globMatcher(rule.pattern), rule: unconditionalRule(rule) });
    // The matcher is shared through the cache; its pattern is counted once here.
    estimatedBytes += OBJECT_BYTES + ruleBytes(rule) + stringBytes(rule.pattern);
  }
  const content = new ContentRules(contentRules);
  const room = byRuleId(ruleset.room);
  const sender = byRuleId(ruleset.sender);
  const underride = conditional(ruleset.underride);
  estimatedBytes += content.estimatedBytes;
  return Object.freeze({
    override,
    content,
    room,
    sender,
    underride,
    shared: options.recipientPlaceholder !== undefined,
    estimatedBytes,
  });
}

let sharedDefault: CompiledRuleset | undefined;

/**
 * The server-default ruleset compiled once for every user: the two places
 * the spec names the owner (`.m.rule.invite_for_me`'s `state_key`,
 * `.m.rule.is_user_mention`'s `user_ids`) read the recipient's user ID at
 * evaluation time, so users without rules of their own all share this one
 * object.
 */
export function sharedDefaultRuleset(): CompiledRuleset {
  sharedDefault ??= compileRuleset(serverDefaultRuleset(USER_ID_PLACEHOLDER), {
    recipientPlaceholder: USER_ID_PLACEHOLDER,
  });
  return sharedDefault;
}

/**
 * A user's ruleset, as the worker has it (stored, upgraded or the defaults),
 * compiled; a stored ruleset that is exactly the server defaults for its
 * owner is not compiled again but answered with the shared default ruleset.
 */
export function compileUserRuleset(ruleset: Ruleset, userId: string): CompiledRuleset {
  const defaults = serverDefaultRuleset(userId);
  if (sameJson(ruleset as unknown as JsonValue, defaults as unknown as JsonValue)) return sharedDefaultRuleset();
  return compileRuleset(ruleset);
}

function outcomeOf(rule: PushRuleBase): RecipientOutcome {
  const actions = rule.actions.some((action) => NO_OP_ACTIONS.has(action))
    ? Object.freeze(rule.actions.filter((action) => !NO_OP_ACTIONS.has(action)))
    : rule.actions;
  return Object.freeze({ ruleId: rule.rule_id, notify: rule.actions.includes('notify'), actions });
}

/** One empty list for every rule without tests: there are thousands of keyword rules. */
const NO_TESTS: readonly ConditionTest[] = Object.freeze([]);

/** Content, room and sender rules: what decides is outside the rule's conditions. */
function unconditionalRule(rule: PushRuleBase): CompiledRule {
  return Object.freeze({ outcome: outcomeOf(rule), eventTests: NO_TESTS, recipientTests: NO_TESTS });
}

function compileConditionalRule(
  rule: ConditionalPushRule,
  options: ConditionOptions,
): { readonly rule: CompiledRule; readonly estimatedBytes: number } | null {
  const eventTests: ConditionTest[] = [];
  const recipientTests: ConditionTest[] = [];
  let estimatedBytes = OBJECT_BYTES + ARRAY_BYTES * 2 + ruleBytes(rule);
  for (const condition of rule.conditions) {
    const compiled = compileCondition(condition, options);
    // One condition that can never match makes a rule that can never match.
    if (compiled === null) return null;
    (compiled.perRecipient ? recipientTests : eventTests).push(compiled.test);
    estimatedBytes += compiled.estimatedBytes + POINTER_BYTES;
  }
  return {
    rule: Object.freeze({
      outcome: outcomeOf(rule),
      eventTests: eventTests.length === 0 ? NO_TESTS : eventTests,
      recipientTests: recipientTests.length === 0 ? NO_TESTS : recipientTests,
    }),
    estimatedBytes,
  };
}

/** The outcome object, the rule ID and the actions. */
function ruleBytes(rule: PushRuleBase): number {
  return OBJECT_BYTES + stringBytes(rule.rule_id) + jsonBytes(rule.actions as unknown as JsonValue);
}
