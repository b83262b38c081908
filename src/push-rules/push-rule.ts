import type { JsonObject } from '../matrix/json.js';

/**
 * Push-rule domain types. Field names are the Matrix wire names (`rule_id`,
 * `set_tweak`): a ruleset is stored and returned exactly in this shape, so
 * there is no translation layer to keep in step.
 */

export const RULE_KINDS = ['override', 'content', 'room', 'sender', 'underride'] as const;
export type RuleKind = (typeof RULE_KINDS)[number];

export function isRuleKind(value: string): value is RuleKind {
  return (RULE_KINDS as readonly string[]).includes(value);
}

// ---- Conditions ----------------------------------------------------------

/** Values `event_property_is` / `event_property_contains` may compare against. */
export type ScalarJsonValue = string | number | boolean | null;

export interface EventMatchCondition {
  readonly kind: 'event_match';
  readonly key: string;
  readonly pattern: string;
}
export interface EventPropertyIsCondition {
  readonly kind: 'event_property_is';
  readonly key: string;
  readonly value: ScalarJsonValue;
}
export interface EventPropertyContainsCondition {
  readonly kind: 'event_property_contains';
  readonly key: string;
  readonly value: ScalarJsonValue;
}
export interface ContainsDisplayNameCondition {
  readonly kind: 'contains_display_name';
}
export interface RoomMemberCountCondition {
  readonly kind: 'room_member_count';
  readonly is: string;
}
export interface SenderNotificationPermissionCondition {
  readonly kind: 'sender_notification_permission';
  readonly key: string;
}

export type KnownPushCondition =
  | EventMatchCondition
  | EventPropertyIsCondition
  | EventPropertyContainsCondition
  | ContainsDisplayNameCondition
  | RoomMemberCountCondition
  | SenderNotificationPermissionCondition;

export type KnownConditionKind = KnownPushCondition['kind'];

/**
 * A condition kind this server does not know (a newer spec, an MSC). The spec
 * says such conditions never match; they are stored and returned unchanged.
 */
export interface UnknownPushCondition extends JsonObject {
  readonly kind: string;
}

export type PushCondition = KnownPushCondition | UnknownPushCondition;

// ---- Actions --------------------------------------------------------------

export interface SoundTweak {
  readonly set_tweak: 'sound';
  readonly value: string;
}
export interface HighlightTweak {
  readonly set_tweak: 'highlight';
  readonly value?: boolean;
}
/** Any other tweak: kept as sent, value of any JSON type. */
export interface CustomTweak extends JsonObject {
  readonly set_tweak: string;
}
export type Tweak = SoundTweak | HighlightTweak | CustomTweak;

/**
 * `notify` is the one action the spec still defines; `dont_notify`,
 * `coalesce` and unknown words, and objects that are not tweaks, are kept as
 * sent so that clients written against other spec versions round-trip.
 */
export type PushAction = 'notify' | (string & Record<never, never>) | Tweak | JsonObject;

// ---- Rules ------------------------------------------------------------------

export interface PushRuleBase {
  readonly rule_id: string;
  readonly default: boolean;
  readonly enabled: boolean;
  readonly actions: readonly PushAction[];
}

/** `override` and `underride` rules. */
export interface ConditionalPushRule extends PushRuleBase {
  readonly conditions: readonly PushCondition[];
}

/** `content` rules. */
export interface PatternedPushRule extends PushRuleBase {
  readonly pattern: string;
}

/** `room` and `sender` rules: the rule ID is the room or user ID. */
export type SimplePushRule = PushRuleBase;

export interface Ruleset {
  readonly override: readonly ConditionalPushRule[];
  readonly content: readonly PatternedPushRule[];
  readonly room: readonly SimplePushRule[];
  readonly sender: readonly SimplePushRule[];
  readonly underride: readonly ConditionalPushRule[];
}

export type PushRule = ConditionalPushRule | PatternedPushRule | SimplePushRule;

/** The per-kind part of a rule a client supplies (the body of `PUT`). */
export interface RuleBody {
  readonly actions: readonly PushAction[];
  readonly conditions?: readonly PushCondition[];
  readonly pattern?: string;
}

export const MASTER_RULE_ID = '.m.rule.master';

/** Server-default rule IDs, and only those, start with a dot. */
export function isServerDefaultRuleId(ruleId: string): boolean {
  return ruleId.startsWith('.');
}
