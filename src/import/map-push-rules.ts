import { RULE_KINDS, type PushAction, type PushRule, type RuleKind, type Ruleset } from '../push-rules/push-rule.js';
import { serverDefaultRuleset } from '../push-rules/server-default-rules.js';
import { upgradeRuleset } from '../push-rules/upgrade-ruleset.js';
import { buildUserRule, lastSegment, parseRow, type RuleSkipReason, type Skip } from './synapse-rule-row.js';
import type { SynapsePushRuleEnableRow, SynapsePushRuleRow } from './synapse-rows.js';

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

function isHiddenBySynapse(ruleId: string): boolean {
  return HIDDEN_IDS.has(ruleId) || HIDDEN_MARKERS.some((marker) => ruleId.includes(marker));
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

const HIDDEN: Skip = { reason: 'hidden-by-synapse', detail: 'an experimental rule ID Synapse does not show' };
const SYNAPSE_ONLY: Skip = {
  reason: 'synapse-only-default-rule',
  detail: 'a default rule of Synapse the spec no longer has',
};
const FORMER_DEFAULT: Skip = { reason: 'former-default-rule', detail: 'a default rule ID Synapse no longer serves' };
