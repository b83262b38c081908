import { isJsonObject, type JsonObject, type JsonValue } from '../matrix/json.js';
import { parseUntrustedJson } from '../matrix/parse-untrusted-json.js';
import { checkNewRuleId } from '../push-rules/check-rule-id.js';
import {
  RULE_KINDS,
  type PushAction,
  type PushCondition,
  type PushRule,
  type RuleKind,
  type Ruleset,
} from '../push-rules/push-rule.js';
import { serverDefaultRuleset } from '../push-rules/server-default-rules.js';
import { upgradeRuleset } from '../push-rules/upgrade-ruleset.js';
import { validateActions } from '../push-rules/validate-actions.js';
import { validateConditions } from '../push-rules/validate-conditions.js';
import type { SynapsePushRuleEnableRow, SynapsePushRuleRow } from './synapse-rows.js';

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

export interface SkippedRuleRow {
  readonly table: 'push_rules' | 'push_rules_enable';
  /** The namespaced rule ID of the row. */
  readonly ruleId: string;
  readonly reason: RuleSkipReason;
  readonly detail: string;
}

/** Something imported that an operator may want to know of; nothing was lost. */
export interface RuleImportNote {
  readonly kind: 'priority-tie' | 'ignored-enable-row';
  readonly ruleId: string;
  readonly detail: string;
}

export interface MappedPushRules {
  /** The ruleset `get_pushrules` answers after the import. */
  readonly ruleset: Ruleset;
  readonly skipped: readonly SkippedRuleRow[];
  readonly notes: readonly RuleImportNote[];
}

const KIND_OF_CLASS: ReadonlyMap<number, RuleKind> = new Map([
  [5, 'override'],
  [4, 'content'],
  [3, 'room'],
  [2, 'sender'],
  [1, 'underride'],
]);

/** Server-default rules Synapse serves (and shows by default) that the spec no longer has. */
const SYNAPSE_ONLY_DEFAULTS: ReadonlySet<string> = new Set([
  'global/override/.m.rule.contains_display_name',
  'global/override/.m.rule.roomnotif',
  'global/content/.m.rule.contains_user_name',
  'global/underride/.im.vector.jitsi',
]);

/** Parts of a namespaced ID that make Synapse's GET hide the rule while the experiment is off. */
const HIDDEN_MARKERS = ['org.matrix.msc1767', 'org.matrix.msc3933', 'org.matrix.msc3930', '/.io.element.msc4306.rule.'];
const HIDDEN_IDS: ReadonlySet<string> = new Set([
  'global/override/.im.nheko.msc3664.reply',
  'global/override/.org.matrix.msc4028.encrypted_event',
]);

/** The action words Synapse's reader knows; `dont_notify` and `coalesce` are kept as stored. */
const KNOWN_ACTION_WORDS: ReadonlySet<string> = new Set(['notify', 'dont_notify', 'coalesce']);

/** Rule JSON is flat; anything deeper than this is no rule. */
const MAX_RULE_JSON_DEPTH = 32;

function isHiddenBySynapse(ruleId: string): boolean {
  return HIDDEN_IDS.has(ruleId) || HIDDEN_MARKERS.some((marker) => ruleId.includes(marker));
}

/** The client's rule ID: the last `/` segment of the namespaced one. */
function lastSegment(ruleId: string): string {
  return ruleId.slice(ruleId.lastIndexOf('/') + 1);
}

/** Namespaced IDs sort by their UTF-8 bytes, as the `(user_name, rule_id)` index orders them. */
function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * One user's rows of `push_rules` and `push_rules_enable` as the ruleset
 * Synapse's `GET /pushrules/` showed, in this service's stored shape, with
 * every row not imported named with its reason
 * (docs/import-from-synapse.md#how-push-rules-map).
 */
export function mapPushRules(
  userId: string,
  rows: readonly SynapsePushRuleRow[],
  enableRows: readonly SynapsePushRuleEnableRow[],
): MappedPushRules {
  for (const row of [...rows, ...enableRows]) {
    if (row.user_name !== userId) throw new Error(`a row of ${row.user_name} among the rows of ${userId}`);
  }
  const mapping = new UserMapping(userId, enableRows);
  const sorted = [...rows].sort(
    (a, b) => b.priority_class - a.priority_class || b.priority - a.priority || compareBytes(a.rule_id, b.rule_id),
  );
  for (const [index, row] of sorted.entries()) {
    const previous = sorted[index - 1];
    if (previous !== undefined && sameRank(previous, row) && KIND_OF_CLASS.has(row.priority_class)) {
      mapping.note('priority-tie', row.rule_id, `same class and priority as ${previous.rule_id}; placed after it`);
    }
    mapping.addRuleRow(row);
  }
  mapping.applyEnableRows(enableRows);
  return mapping.result();
}

function sameRank(a: SynapsePushRuleRow, b: SynapsePushRuleRow): boolean {
  return a.priority_class === b.priority_class && a.priority === b.priority;
}

class UserMapping {
  private readonly defaults: Ruleset;
  /** Our server-default rules by namespaced ID. */
  private readonly defaultKinds = new Map<string, RuleKind>();
  private readonly changedActions = new Map<string, readonly PushAction[]>();
  private readonly userRules: Record<RuleKind, PushRule[]> = {
    override: [],
    content: [],
    room: [],
    sender: [],
    underride: [],
  };
  /** Namespaced IDs of the `push_rules` rows, imported or not: their enable rows are theirs. */
  private readonly ruleRowIds = new Set<string>();
  private readonly enabledById: ReadonlyMap<string, boolean>;
  private readonly skipped: SkippedRuleRow[] = [];
  private readonly notes: RuleImportNote[] = [];

  constructor(
    private readonly userId: string,
    enableRows: readonly SynapsePushRuleEnableRow[],
  ) {
    this.defaults = serverDefaultRuleset(userId);
    for (const kind of RULE_KINDS) {
      for (const rule of this.defaults[kind]) this.defaultKinds.set(`global/${kind}/${rule.rule_id}`, kind);
    }
    // Synapse reads the column as a truth value: NULL and 0 are disabled.
    this.enabledById = new Map(enableRows.map((row) => [row.rule_id, Boolean(row.enabled)]));
  }

  note(kind: RuleImportNote['kind'], ruleId: string, detail: string): void {
    this.notes.push({ kind, ruleId, detail });
  }

  private skip(table: SkippedRuleRow['table'], ruleId: string, reason: RuleSkipReason, detail: string): void {
    this.skipped.push({ table, ruleId, reason, detail });
  }

  addRuleRow(row: SynapsePushRuleRow): void {
    this.ruleRowIds.add(row.rule_id);
    const refused = this.importRuleRow(row);
    if (refused !== undefined) this.skip('push_rules', row.rule_id, refused.reason, refused.detail);
  }

  /** Takes in one row, or says why not. */
  private importRuleRow(row: SynapsePushRuleRow): Skip | undefined {
    const classified = this.classify(row.rule_id, row.priority_class);
    if (classified.skip !== undefined) return classified.skip;
    const parsed = parseRow(row, this.userId);
    if (!parsed.ok) return parsed;
    if (classified.kind === 'default') {
      this.changedActions.set(row.rule_id, parsed.actions);
      return undefined;
    }
    const built = buildUserRule(classified.kind, row.rule_id, parsed, this.enabledById.get(row.rule_id) ?? true);
    if (!built.ok) return built;
    const rules = this.userRules[classified.kind];
    if (rules.some((rule) => rule.rule_id === built.rule.rule_id)) {
      return {
        reason: 'duplicate-rule-id',
        detail: `a ${classified.kind} rule ${built.rule.rule_id} is already imported`,
      };
    }
    rules.push(built.rule);
    return undefined;
  }

  /** Which rule a row is about, in the order Synapse's reader decides it. */
  private classify(
    ruleId: string,
    priorityClass: number,
  ): { readonly kind: RuleKind | 'default'; readonly skip?: undefined } | { readonly skip: Skip } {
    if (isHiddenBySynapse(ruleId)) return { skip: HIDDEN };
    if (this.defaultKinds.has(ruleId)) return { kind: 'default' };
    if (SYNAPSE_ONLY_DEFAULTS.has(ruleId)) return { skip: SYNAPSE_ONLY };
    const kind = KIND_OF_CLASS.get(priorityClass);
    if (kind !== undefined) return { kind };
    if (lastSegment(ruleId).startsWith('.')) return { skip: FORMER_DEFAULT };
    return { skip: { reason: 'unknown-priority-class', detail: `priority class ${priorityClass}` } };
  }

  /** Enable rows of server-default rules; those of user rules were read with their rules. */
  applyEnableRows(enableRows: readonly SynapsePushRuleEnableRow[]): void {
    for (const row of enableRows) {
      if (this.ruleRowIds.has(row.rule_id) || this.defaultKinds.has(row.rule_id)) continue;
      const skip = isHiddenBySynapse(row.rule_id)
        ? HIDDEN
        : SYNAPSE_ONLY_DEFAULTS.has(row.rule_id)
          ? SYNAPSE_ONLY
          : lastSegment(row.rule_id).startsWith('.')
            ? FORMER_DEFAULT
            : undefined;
      if (skip === undefined)
        this.note('ignored-enable-row', row.rule_id, 'no rule of that ID; Synapse ignores the row too');
      else this.skip('push_rules_enable', row.rule_id, skip.reason, skip.detail);
    }
  }

  result(): MappedPushRules {
    const stored: Partial<Record<RuleKind, readonly PushRule[]>> = {};
    for (const kind of RULE_KINDS) {
      const defaults = this.defaults[kind].map((rule) => {
        const id = `global/${kind}/${rule.rule_id}`;
        return {
          ...rule,
          actions: this.changedActions.get(id) ?? rule.actions,
          enabled: this.enabledById.get(id) ?? rule.enabled,
        };
      });
      stored[kind] = [...this.userRules[kind], ...defaults];
    }
    // Lays the rules out as the spec orders them: master, the user's rules, the other defaults.
    return { ruleset: upgradeRuleset(stored as Ruleset, this.userId), skipped: this.skipped, notes: this.notes };
  }
}

interface Skip {
  readonly reason: RuleSkipReason;
  readonly detail: string;
}

const HIDDEN: Skip = { reason: 'hidden-by-synapse', detail: 'an experimental rule ID Synapse does not show' };
const SYNAPSE_ONLY: Skip = {
  reason: 'synapse-only-default-rule',
  detail: 'a default rule of Synapse the spec no longer has',
};
const FORMER_DEFAULT: Skip = { reason: 'former-default-rule', detail: 'a default rule ID Synapse no longer serves' };

type Failure = { readonly ok: false } & Skip;

interface ParsedRow {
  readonly ok: true;
  readonly conditions: readonly JsonValue[];
  readonly actions: readonly PushAction[];
}

/** Both JSON columns, as Synapse's reader parses them, and the actions as it serves them. */
function parseRow(row: SynapsePushRuleRow, userId: string): ParsedRow | Failure {
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
function buildUserRule(
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
