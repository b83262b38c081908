import type { JsonObject } from '../../src/matrix/json.js';
import type { ConditionalPushRule, PushCondition, Ruleset } from '../../src/push-rules/push-rule.js';
import { compileRuleset } from '../../src/evaluation/compile-ruleset.js';
import { evaluateRecipient } from '../../src/evaluation/evaluate-recipient.js';
import type { RecipientOutcome } from '../../src/evaluation/compiled-rule.js';
import type { EvaluationEvent, EvaluationRecipient, EvaluationRoom } from '../../src/evaluation/evaluation-input.js';
import { prepareEvent } from '../../src/evaluation/prepared-event.js';

export const BOB = '@bob:example.org';
export const SENDER = '@sender:example.org';
export const ROOM_ID = '!room:example.org';

/** A plain text message from SENDER in ROOM_ID; `content` entries are merged over the default content. */
export function aMessage(overrides: Partial<EvaluationEvent> = {}, content: JsonObject = {}): EvaluationEvent {
  return {
    event_id: '$event',
    type: 'm.room.message',
    room_id: ROOM_ID,
    sender: SENDER,
    ...overrides,
    content: { msgtype: 'm.text', body: 'hello there', ...(overrides.content ?? {}), ...content },
  };
}

export function aBody(body: string): EvaluationEvent {
  return aMessage({}, { body });
}

export function aRoom(overrides: Partial<EvaluationRoom> = {}): EvaluationRoom {
  return { member_count: 10, sender_power_level: 0, notification_power_levels: { room: 50 }, ...overrides };
}

export function aRecipient(overrides: Partial<EvaluationRecipient> = {}): EvaluationRecipient {
  return { user_id: BOB, display_name: 'Bob', ...overrides };
}

export const EMPTY_RULESET: Ruleset = { override: [], content: [], room: [], sender: [], underride: [] };

/** A ruleset of one override rule with these conditions. */
export function ruleWith(...conditions: PushCondition[]): Ruleset {
  const rule: ConditionalPushRule = {
    rule_id: 'test.rule',
    default: false,
    enabled: true,
    conditions,
    actions: ['notify'],
  };
  return { ...EMPTY_RULESET, override: [rule] };
}

/** Evaluates one recipient the way the request evaluator does. */
export function outcomeOf(
  ruleset: Ruleset,
  event: EvaluationEvent = aMessage(),
  room: EvaluationRoom = aRoom(),
  recipient: EvaluationRecipient = aRecipient(),
): RecipientOutcome {
  return evaluateRecipient(prepareEvent(event, room), compileRuleset(ruleset), recipient);
}

/** Whether one condition matches, as the only condition of an override rule. */
export function conditionMatches(
  condition: PushCondition,
  event: EvaluationEvent = aMessage(),
  room: EvaluationRoom = aRoom(),
  recipient: EvaluationRecipient = aRecipient(),
): boolean {
  return outcomeOf(ruleWith(condition), event, room, recipient).ruleId === 'test.rule';
}
