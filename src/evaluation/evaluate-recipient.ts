import { NOT_NOTIFIED, type CompiledRule, type ConditionTest, type RecipientOutcome } from './compiled-rule.js';
import type { CompiledRuleset, RecipientPlan } from './compiled-ruleset.js';
import type { EvaluationRecipient } from './evaluation-input.js';
import type { PreparedEvent } from './prepared-event.js';

/**
 * The first rule of `ruleset` that matches `event` for `recipient`: kinds in
 * the order override, content, room, sender, underride; inside a kind, in
 * the ruleset's order. The sender of the event is never notified of it.
 *
 * The returned outcome is shared (one object per rule): do not change it.
 */
export function evaluateRecipient(
  event: PreparedEvent,
  ruleset: CompiledRuleset,
  recipient: EvaluationRecipient,
): RecipientOutcome {
  if (recipient.user_id === event.event.sender) return NOT_NOTIFIED;
  if (ruleset.shared) return outcomeFromPlan(event.plan(ruleset, buildPlan), event, recipient);
  return firstMatch(event, ruleset, recipient);
}

function allPass(tests: readonly ConditionTest[], event: PreparedEvent, recipient: EvaluationRecipient): boolean {
  for (const test of tests) if (!test(event, recipient)) return false;
  return true;
}

function firstMatch(event: PreparedEvent, ruleset: CompiledRuleset, recipient: EvaluationRecipient): RecipientOutcome {
  for (const rule of ruleset.override) {
    if (allPass(rule.eventTests, event, recipient) && allPass(rule.recipientTests, event, recipient))
      return rule.outcome;
  }
  const decided = eventOnlyKinds(event, ruleset);
  if (decided !== undefined) return decided.outcome;
  for (const rule of ruleset.underride) {
    if (allPass(rule.eventTests, event, recipient) && allPass(rule.recipientTests, event, recipient))
      return rule.outcome;
  }
  return NOT_NOTIFIED;
}

/** Content, room and sender rules depend on the event alone. */
function eventOnlyKinds(event: PreparedEvent, ruleset: CompiledRuleset): CompiledRule | undefined {
  const content = ruleset.content.firstMatch(event);
  if (content !== undefined) return content;
  const room = ruleset.room.size === 0 ? undefined : ruleset.room.get(event.event.room_id);
  if (room !== undefined) return room;
  return ruleset.sender.size === 0 ? undefined : ruleset.sender.get(event.event.sender);
}

/** Event-only tests never look at the recipient; they are given this one. */
const NO_RECIPIENT: EvaluationRecipient = Object.freeze({ user_id: '' });

/**
 * Once per event and shared ruleset: every rule whose event-only conditions
 * hold, in order, until one that has nothing left to check per recipient.
 */
function buildPlan(event: PreparedEvent, ruleset: CompiledRuleset): RecipientPlan {
  const plan: CompiledRule[] = [];
  for (const rule of ruleset.override) {
    if (!allPass(rule.eventTests, event, NO_RECIPIENT)) continue;
    plan.push(rule);
    if (rule.recipientTests.length === 0) return plan;
  }
  const decided = eventOnlyKinds(event, ruleset);
  if (decided !== undefined) {
    plan.push(decided);
    return plan;
  }
  for (const rule of ruleset.underride) {
    if (!allPass(rule.eventTests, event, NO_RECIPIENT)) continue;
    plan.push(rule);
    if (rule.recipientTests.length === 0) return plan;
  }
  return plan;
}

function outcomeFromPlan(plan: RecipientPlan, event: PreparedEvent, recipient: EvaluationRecipient): RecipientOutcome {
  for (const rule of plan) if (allPass(rule.recipientTests, event, recipient)) return rule.outcome;
  return NOT_NOTIFIED;
}
