import { DatabaseSync } from 'node:sqlite';
import type { SynapsePushRuleEnableRow, SynapsePushRuleRow, SynapsePusherRow } from '../../src/import/synapse-rows.js';

/**
 * A SQLite file shaped like Synapse's (the four tables the importer reads,
 * with Synapse's columns, unique keys and indexes), filled with the given
 * rows: for tests and the bench, without a Synapse.
 */
export interface SynapseSqliteContent {
  /** Iterables, so that the bench can stream a large population through without holding it. */
  readonly users?: Iterable<string>;
  readonly rules?: Iterable<SynapsePushRuleRow>;
  readonly enables?: Iterable<SynapsePushRuleEnableRow>;
  readonly pushers?: Iterable<SynapsePusherRow>;
  /** A schema from before Synapse 1.69: `pushers` without `enabled` and `device_id`. */
  readonly oldPushers?: boolean;
  /** Tables to leave out (a database that is not Synapse's). */
  readonly without?: readonly string[];
}

export function writeSynapseSqlite(path: string, content: SynapseSqliteContent): void {
  const db = new DatabaseSync(path);
  try {
    fill(db, content);
  } finally {
    db.close();
  }
}

function fill(db: DatabaseSync, content: SynapseSqliteContent): void {
  const skip = new Set(content.without ?? []);
  const ddl: Record<string, string> = {
    users:
      'CREATE TABLE users (name TEXT, password_hash TEXT, creation_ts BIGINT, admin SMALLINT DEFAULT 0 NOT NULL, UNIQUE(name))',
    push_rules:
      'CREATE TABLE push_rules (id BIGINT PRIMARY KEY, user_name TEXT NOT NULL, rule_id TEXT NOT NULL, priority_class SMALLINT NOT NULL, priority INTEGER NOT NULL DEFAULT 0, conditions TEXT NOT NULL, actions TEXT NOT NULL, UNIQUE(user_name, rule_id)); CREATE INDEX push_rules_user_name on push_rules (user_name)',
    push_rules_enable:
      'CREATE TABLE push_rules_enable (id BIGINT PRIMARY KEY, user_name TEXT NOT NULL, rule_id TEXT NOT NULL, enabled SMALLINT, UNIQUE(user_name, rule_id)); CREATE INDEX push_rules_enable_user_name on push_rules_enable (user_name)',
    pushers: `CREATE TABLE pushers (id BIGINT PRIMARY KEY, user_name TEXT NOT NULL, access_token BIGINT DEFAULT NULL, profile_tag TEXT NOT NULL, kind TEXT NOT NULL, app_id TEXT NOT NULL, app_display_name TEXT NOT NULL, device_display_name TEXT NOT NULL, pushkey TEXT NOT NULL, ts BIGINT NOT NULL, lang TEXT, data TEXT, last_stream_ordering INTEGER, last_success BIGINT, failing_since BIGINT${content.oldPushers === true ? '' : ', enabled BOOLEAN, device_id TEXT'}, UNIQUE (app_id, pushkey, user_name))`,
  };
  for (const [table, sql] of Object.entries(ddl)) if (!skip.has(table)) db.exec(sql);
  db.exec('BEGIN');
  if (!skip.has('users')) {
    const insert = db.prepare('INSERT INTO users (name, creation_ts) VALUES (?, 0)');
    for (const user of content.users ?? []) insert.run(user);
  }
  if (!skip.has('push_rules')) {
    const insert = db.prepare(
      'INSERT INTO push_rules (id, user_name, rule_id, priority_class, priority, conditions, actions) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    for (const [id, row] of numbered(content.rules))
      insert.run(id, row.user_name, row.rule_id, row.priority_class, row.priority, row.conditions, row.actions);
  }
  if (!skip.has('push_rules_enable')) {
    const insert = db.prepare('INSERT INTO push_rules_enable (id, user_name, rule_id, enabled) VALUES (?, ?, ?, ?)');
    for (const [id, row] of numbered(content.enables))
      insert.run(id, row.user_name, row.rule_id, typeof row.enabled === 'boolean' ? Number(row.enabled) : row.enabled);
  }
  if (!skip.has('pushers')) {
    const columns =
      'id, user_name, access_token, profile_tag, kind, app_id, app_display_name, device_display_name, pushkey, ts, lang, data';
    const insert =
      content.oldPushers === true
        ? db.prepare(`INSERT INTO pushers (${columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
        : db.prepare(
            `INSERT INTO pushers (${columns}, enabled, device_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          );
    for (const [id, row] of numbered(content.pushers)) {
      const values = [
        id,
        row.user_name,
        row.access_token === undefined || row.access_token === null ? null : Number(row.access_token),
        row.profile_tag,
        row.kind,
        row.app_id,
        row.app_display_name,
        row.device_display_name,
        row.pushkey,
        Number(row.ts),
        row.lang,
        row.data,
      ];
      if (content.oldPushers === true) insert.run(...values);
      else
        insert.run(
          ...values,
          row.enabled === undefined || row.enabled === null ? null : Number(row.enabled),
          row.device_id ?? null,
        );
    }
  }
  db.exec('COMMIT');
}

function* numbered<T>(rows: Iterable<T> | undefined): Generator<[number, T]> {
  let id = 0;
  for (const row of rows ?? []) yield [(id += 1), row];
}
