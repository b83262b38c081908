import type { PushAction } from '../push-rules/push-rule.js';
import type { EvaluationRecipient } from './evaluation-input.js';
import type { PreparedEvent } from './prepared-event.js';

/** What a recipient's rules decided for one event. */
export interface RecipientOutcome {
  /** The matched rule, or `null` when none matched (or the recipient sent the event). */
  readonly ruleId: string | null;
  /** The matched rule's actions contain `"notify"`. */
  readonly notify: boolean;
  /** The matched rule's actions as stored, in order, without `dont_notify` and `coalesce`. */
  readonly actions: readonly PushAction[];
}

/** No enabled rule matched, or the recipient is the sender: not notified. */
export const NOT_NOTIFIED: RecipientOutcome = Object.freeze({
  ruleId: null,
  notify: false,
  actions: Object.freeze([]),
});

/** One condition, compiled. Pure: the same event and recipient give the same answer. */
export type ConditionTest = (event: PreparedEvent, recipient: EvaluationRecipient) => boolean;

export interface CompiledRule {
  /** The answer when this rule is the first to match; one object shared by every evaluation. */
  readonly outcome: RecipientOutcome;
  /** Conditions that look only at the event and the room. */
  readonly eventTests: readonly ConditionTest[];
  /** Conditions that also look at the recipient (display name, the user ID of a shared ruleset). */
  readonly recipientTests: readonly ConditionTest[];
}
