import { isJsonObject, type JsonObject, type JsonValue } from '../matrix/json.js';
import { parseUntrustedJson } from '../matrix/parse-untrusted-json.js';
import { checkNewRuleId } from '../push-rules/check-rule-id.js';
import type { PushAction, PushCondition, PushRule, RuleKind } from '../push-rules/push-rule.js';
import { validateActions } from '../push-rules/validate-actions.js';
import { validateConditions } from '../push-rules/validate-conditions.js';
import type { SynapsePushRuleRow } from './synapse-rows.js';

// One `push_rules` row of Synapse, read as Synapse's reader reads it and shaped as its GET shows the rule
// (docs/import-from-synapse.md#how-push-rules-map); which rule it is about is map-push-rules.ts's.

/** Why a row was not imported (docs/import-from-synapse.md#what-is-skipped-and-why). */
export type RuleSkipReason =
  /** A JSON column that does not parse, or is not an array. */
  | 'unparsable-json'
  /** An action word Synapse's reader does not know (its GET fails for the whole user). */
  | 'unknown-action'
  /** Conditions, actions or a pattern our validation refuses, or a rule Synapse could not show. */
  | 'invalid-rule'
  /** A rule ID our validation refuses (`checkNewRuleId`). */
  | 'rule-id-refused'
  /** A second rule with the same ID in a kind. */
  | 'duplicate-rule-id'
  /** A `content` rule without exactly one pattern condition: Synapse's GET leaves it out. */
  | 'not-shown-by-synapse'
  /** An ID with an experimental marker: Synapse's GET hides it. */
  | 'hidden-by-synapse'
  /** A server-default rule Synapse serves and the spec (and this service) no longer has. */
  | 'synapse-only-default-rule'
  /** A changed or toggled server-default rule under an ID no Synapse serves any more. */
  | 'former-default-rule'
  /** A priority class outside 1–5 that is not a changed server-default rule. */
  | 'unknown-priority-class';

/** Why a row is not imported, for the report. */
export interface Skip {
  readonly reason: RuleSkipReason;
  readonly detail: string;
}

/** The action words Synapse's reader knows; `dont_notify` and `coalesce` are kept as stored. */
const KNOWN_ACTION_WORDS: ReadonlySet<string> = new Set(['notify', 'dont_notify', 'coalesce']);

/** Rule JSON is flat; anything deeper than this is no rule. */
const MAX_RULE_JSON_DEPTH = 32;

/** The client's rule ID: the last `/` segment of the namespaced one. */
export function lastSegment(ruleId: string): string {
  return ruleId.slice(ruleId.lastIndexOf('/') + 1);
}

/** A row not taken in. */
export type Failure = { readonly ok: false } & Skip;

/** A row's JSON columns, parsed and served as Synapse's reader does. */
export interface ParsedRow {
  readonly ok: true;
  readonly conditions: readonly JsonValue[];
  readonly actions: readonly PushAction[];
}

/** Both JSON columns, as Synapse's reader parses them, and the actions as it serves them. */
export function parseRow(row: SynapsePushRuleRow, userId: string): ParsedRow | Failure {
  const conditions = parseArray(row.conditions, 'conditions');
  if (!conditions.ok) return conditions;
  const actions = parseArray(row.actions, 'actions');
  if (!actions.ok) return actions;
  const unknown = actions.value.find((action) => typeof action === 'string' && !KNOWN_ACTION_WORDS.has(action));
  if (unknown !== undefined) {
    return { ok: false, reason: 'unknown-action', detail: `action ${JSON.stringify(unknown)}` };
  }
  const checked = validateActions(actions.value.map(servedAction));
  if (!checked.ok) return { ok: false, reason: 'invalid-rule', detail: checked.error.message };
  return { ok: true, conditions: conditions.value.map((c) => servedCondition(c, userId)), actions: checked.value };
}

function parseArray(
  text: string,
  column: string,
): { readonly ok: true; readonly value: readonly JsonValue[] } | Failure {
  const parsed = parseUntrustedJson(text, { maxDepth: MAX_RULE_JSON_DEPTH });
  if (!parsed.ok) return { ok: false, reason: 'unparsable-json', detail: `${column}: ${parsed.message}` };
  if (!Array.isArray(parsed.value))
    return { ok: false, reason: 'unparsable-json', detail: `${column} is not an array` };
  return { ok: true, value: parsed.value as readonly JsonValue[] };
}

/** A tweak whose `value` is null comes back without it. */
function servedAction(action: JsonValue): JsonValue {
  if (!isJsonObject(action) || typeof action['set_tweak'] !== 'string' || action['value'] !== null) return action;
  const { value: _null, ...rest } = action;
  return rest;
}

/** The fields Synapse's reader keeps of a condition of a known kind when each has its type. */
const KNOWN_CONDITION_FIELDS: Readonly<Record<string, Readonly<Record<string, (value: JsonValue) => boolean>>>> = {
  event_match: { key: isString, pattern: isString },
  event_property_is: { key: isString, value: isSimpleValue },
  event_property_contains: { key: isString, value: isSimpleValue },
  contains_display_name: {},
  sender_notification_permission: { key: isString },
};

function isString(value: JsonValue): boolean {
  return typeof value === 'string';
}

function isSimpleValue(value: JsonValue): boolean {
  return value === null || typeof value !== 'object';
}

/**
 * A condition as Synapse's GET shows it: a known kind with its fields typed
 * keeps only those fields; any other object is shown as stored, except that
 * a legacy `pattern_type` or `value_type` (`user_id`, `user_localpart`) is
 * replaced by the owner's ID or localpart.
 */
function servedCondition(condition: JsonValue, userId: string): JsonValue {
  if (!isJsonObject(condition)) return condition;
  const kind = condition['kind'];
  const fields =
    typeof kind === 'string' && Object.hasOwn(KNOWN_CONDITION_FIELDS, kind) ? KNOWN_CONDITION_FIELDS[kind] : undefined;
  if (fields !== undefined && Object.entries(fields).every(([name, check]) => isPresent(condition, name, check))) {
    const kept: Record<string, JsonValue> = { kind: kind as string };
    for (const name of Object.keys(fields)) kept[name] = condition[name] as JsonValue;
    return kept;
  }
  if (kind === 'room_member_count' && (condition['is'] === undefined || typeof condition['is'] === 'string')) {
    return condition['is'] === undefined ? { kind } : { kind, is: condition['is'] };
  }
  return withTypesReplaced(condition, userId);
}

function isPresent(object: JsonObject, name: string, check: (value: JsonValue) => boolean): boolean {
  const value = object[name];
  return value !== undefined && check(value);
}

function withTypesReplaced(object: JsonObject, userId: string): JsonObject {
  const replaced: Record<string, JsonValue> = {};
  for (const [name, value] of Object.entries(object)) {
    const typed = TYPED_FIELDS.get(name);
    if (typed === undefined) replaced[name] = value;
    else if (value === 'user_id') replaced[typed] = userId;
    else if (value === 'user_localpart') replaced[typed] = localpartOf(userId);
  }
  return replaced;
}

/** Legacy fields that name a value instead of giving it, and the field they fill. */
const TYPED_FIELDS: ReadonlyMap<string, string> = new Map([
  ['pattern_type', 'pattern'],
  ['value_type', 'value'],
]);

function localpartOf(userId: string): string {
  const colon = userId.indexOf(':');
  return userId.slice(1, colon < 0 ? undefined : colon);
}

/** A user rule of a kind from its parsed row, shaped as Synapse's GET shows it. */
export function buildUserRule(
  kind: RuleKind,
  namespacedId: string,
  row: ParsedRow,
  enabled: boolean,
): { readonly ok: true; readonly rule: PushRule } | Failure {
  const shown = shownIdAndBody(kind, namespacedId, row);
  if (!shown.ok) return shown;
  const id = checkNewRuleId(kind, shown.ruleId);
  if (!id.ok) return { ok: false, reason: 'rule-id-refused', detail: `${shown.ruleId}: ${id.error.message}` };
  return { ok: true, rule: { rule_id: shown.ruleId, default: false, enabled, actions: row.actions, ...shown.body } };
}

type NoBody = Readonly<Record<string, never>>;

type ShownRule =
  | {
      readonly ok: true;
      readonly ruleId: string;
      readonly body: { readonly conditions: readonly PushCondition[] } | { readonly pattern: string } | NoBody;
    }
  | Failure;

function shownIdAndBody(kind: RuleKind, namespacedId: string, row: ParsedRow): ShownRule {
  const first = row.conditions[0];
  switch (kind) {
    case 'override':
    case 'underride': {
      const conditions = validateConditions(row.conditions);
      if (!conditions.ok) return { ok: false, reason: 'invalid-rule', detail: conditions.error.message };
      return { ok: true, ruleId: lastSegment(namespacedId), body: { conditions: conditions.value } };
    }
    case 'content': {
      if (row.conditions.length !== 1 || !isJsonObject(first) || !('pattern' in first)) {
        return {
          ok: false,
          reason: 'not-shown-by-synapse',
          detail: 'a content rule needs exactly one pattern condition',
        };
      }
      const pattern = first['pattern'];
      if (typeof pattern !== 'string')
        return { ok: false, reason: 'invalid-rule', detail: 'the pattern is not a string' };
      return { ok: true, ruleId: lastSegment(namespacedId), body: { pattern } };
    }
    case 'room':
    case 'sender': {
      // Synapse shows the pattern of the first condition as the rule ID.
      const pattern = isJsonObject(first) ? first['pattern'] : undefined;
      if (typeof pattern !== 'string') {
        return { ok: false, reason: 'invalid-rule', detail: `a ${kind} rule needs a first condition with a pattern` };
      }
      return { ok: true, ruleId: pattern, body: {} };
    }
  }
}
