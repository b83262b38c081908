import { createHash } from 'node:crypto';
import { isValidUserId } from '../matrix/user-id.js';
import type { Ruleset } from '../push-rules/push-rule.js';
import { DEFAULT_RULES_REVISION } from '../push-rules/server-default-rules.js';
import type { PusherPolicy } from '../pushers/decide-pusher-set.js';
import type { StoredPusher } from '../pushers/pusher.js';
import { mapPushRules, type RuleImportNote } from './map-push-rules.js';
import type { RuleSkipReason } from './synapse-rule-row.js';
import { mapPushers, type PusherSkipReason } from './map-pushers.js';
import type { SynapsePushRuleEnableRow, SynapsePushRuleRow, SynapsePusherRow } from './synapse-rows.js';

/** Everything Synapse holds for one user's push rules and pushers, as a reader hands it over. */
export interface SynapseUserRows {
  readonly userId: string;
  /** False for a user named with `--users` whom Synapse does not know. */
  readonly known: boolean;
  readonly rules: readonly SynapsePushRuleRow[];
  readonly enables: readonly SynapsePushRuleEnableRow[];
  readonly pushers: readonly SynapsePusherRow[];
}

/** Why a user, rather than a row, was not imported. */
export type UserSkipReason =
  /** Named with `--users`, not in Synapse's `users` table. */
  | 'unknown-user'
  /** Not a user ID this service accepts in a request: nobody could read the data. */
  | 'invalid-user-id';

export type SkipReason = RuleSkipReason | PusherSkipReason | UserSkipReason;

/** One item not imported, for the report. Pushkeys are device tokens: only a tag of one is written. */
export interface ReportedSkip {
  readonly table: 'push_rules' | 'push_rules_enable' | 'pushers' | 'users';
  readonly reason: SkipReason;
  readonly detail: string;
  /** The namespaced rule ID (rule rows). */
  readonly ruleId?: string;
  /** The pusher's app ID and its pushkey's tag (pusher rows). */
  readonly appId?: string;
  readonly pushkeyTag?: string;
}

/** What one user's rows became, before anything is written. */
export interface MappedUser {
  readonly userId: string;
  /** What to write; absent when the whole user is skipped. */
  readonly ruleset?: Ruleset;
  readonly pushers: readonly StoredPusher[];
  /** `push_rules` rows imported. */
  readonly rules: number;
  readonly skipped: readonly ReportedSkip[];
  readonly notes: readonly (RuleImportNote | { readonly kind: 'lang-was-null'; readonly appId: string })[];
}

/**
 * One user's rows mapped onto what the store gets: the ruleset Synapse's
 * GET showed and the pushers its `set_pusher` checks accept, each row not
 * imported reported with its reason (docs/import-from-synapse.md).
 */
export function mapUser(rows: SynapseUserRows, policy: PusherPolicy): MappedUser {
  const { userId } = rows;
  if (!rows.known) {
    return skipWhole(userId, 'unknown-user', 'named with --users, not in Synapse\u2019s users table');
  }
  if (!isValidUserId(userId)) {
    return skipWhole(userId, 'invalid-user-id', 'not a user ID this service accepts in a request');
  }
  const rules = mapPushRules(userId, rows.rules, rows.enables);
  const pushers = mapPushers(rows.pushers, policy);
  const skipped: ReportedSkip[] = [
    ...rules.skipped.map((skip) => ({ ...skip })),
    ...pushers.skipped.map((skip) => ({
      table: 'pushers' as const,
      reason: skip.reason,
      detail: skip.detail,
      appId: skip.appId,
      pushkeyTag: pushkeyTag(skip.pushkey),
    })),
  ];
  return {
    userId,
    ruleset: rules.ruleset,
    pushers: pushers.pushers.map(({ pusher, pushkeyTs }) => ({ ...pusher, ts: pushkeyTs })),
    rules: rows.rules.length - rules.skipped.filter((skip) => skip.table === 'push_rules').length,
    skipped,
    notes: [
      ...rules.notes,
      ...pushers.pushers
        .filter((imported) => imported.langWasNull)
        .map((imported) => ({ kind: 'lang-was-null' as const, appId: imported.pusher.app_id })),
    ],
  };
}

/** The defaults revision every imported ruleset is built from. */
export const IMPORTED_DEFAULTS_REVISION = DEFAULT_RULES_REVISION;

function skipWhole(userId: string, reason: UserSkipReason, detail: string): MappedUser {
  return { userId, pushers: [], rules: 0, skipped: [{ table: 'users', reason, detail }], notes: [] };
}

/** The first 8 hex characters of a pushkey's SHA-256: it names a device in a report without giving its token. */
export function pushkeyTag(pushkey: string): string {
  return createHash('sha256').update(pushkey, 'utf8').digest('hex').slice(0, 8);
}
