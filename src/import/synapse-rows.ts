/**
 * Rows of Synapse's database as its tables hold them, column for column.
 * Nothing here is trusted: JSON columns are text to be parsed, and a
 * column may hold what no current Synapse writes. The facts come from
 * element-hq/synapse 1.157 to 1.163 (exercised against 1.163.2): the full
 * schemas (`synapse/storage/schema/main/full_schemas/72/`) and deltas
 * 73/02–03, `storage/databases/main/push_rule.py` and `pusher.py`,
 * `rust/src/push/base_rules.rs`, `push/clientformat.py`,
 * `rest/client/push_rule.py` and `pusher.py`, `push/pusherpool.py`. How the
 * rows map: docs/import-from-synapse.md#how-push-rules-map.
 */

/** A row of `push_rules`. */
export interface SynapsePushRuleRow {
  readonly user_name: string;
  /** Namespaced: `global/<kind>/<rule ID>`. */
  readonly rule_id: string;
  /** 5 override, 4 content, 3 room, 2 sender, 1 underride; −1 a changed server-default rule. */
  readonly priority_class: number;
  /** Higher first within a class. */
  readonly priority: number;
  /** JSON text: an array of conditions (`[]` on a changed server-default rule). */
  readonly conditions: string;
  /** JSON text: an array of actions. */
  readonly actions: string;
}

/** A row of `push_rules_enable`: a user rule's, or a server-default rule the user toggled. */
export interface SynapsePushRuleEnableRow {
  readonly user_name: string;
  /** Namespaced, as in `push_rules`. */
  readonly rule_id: string;
  /** A nullable smallint (a boolean on some PostgreSQL schemas); NULL reads as disabled. */
  readonly enabled: number | boolean | null;
}

/** A row of `pushers` (no index on `user_name` alone); the delivery state columns are not needed. */
export interface SynapsePusherRow {
  readonly user_name: string;
  readonly access_token?: number | string | null;
  /** `""` when the client gave none. */
  readonly profile_tag: string;
  readonly kind: string;
  readonly app_id: string;
  readonly app_display_name: string;
  readonly device_display_name: string;
  readonly pushkey: string;
  /** `pushkey_ts` in milliseconds, set at every `set_pusher`; a `bigint` column, which node-postgres returns as a string. */
  readonly ts: number | string | bigint;
  readonly lang: string | null;
  /** JSON text of the pusher's `data`. */
  readonly data: string | null;
  /** From Synapse 1.69; NULL (or an older schema without the column) reads as enabled. */
  readonly enabled?: number | boolean | null | undefined;
  /** From Synapse 1.69; NULL when unknown. */
  readonly device_id?: string | null | undefined;
}
