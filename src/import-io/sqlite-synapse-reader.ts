import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import type { SynapseUserRows } from '../import/map-user.js';
import type { SynapsePushRuleEnableRow, SynapsePushRuleRow, SynapsePusherRow } from '../import/synapse-rows.js';
import {
  pusherColumns,
  REQUIRED_TABLES,
  SourceError,
  USERS_WITH_PUSH_DATA,
  userBatches,
  type SynapseReader,
  type SynapseTables,
} from './synapse-reader.js';

/**
 * Synapse's SQLite file through Node's built-in `node:sqlite`, opened
 * read-only. One read transaction spans the run: in WAL mode (Synapse's
 * while it runs) it reads one snapshot, whatever Synapse writes meanwhile.
 */
export class SqliteSynapseReader implements SynapseReader {
  readonly #db: DatabaseSync;
  readonly #tables: SynapseTables;

  private constructor(db: DatabaseSync, pusherSelect: string) {
    this.#db = db;
    this.#tables = {
      userPage: async (after, limit) => {
        await Promise.resolve();
        const rows =
          after === undefined
            ? this.#all(`SELECT user_name FROM (${USERS_WITH_PUSH_DATA}) ORDER BY user_name LIMIT ?`, limit)
            : this.#all(
                `SELECT user_name FROM (${USERS_WITH_PUSH_DATA}) WHERE user_name > ? ORDER BY user_name LIMIT ?`,
                after,
                limit,
              );
        return rows.map((row) => row['user_name'] as string);
      },
      knownUsers: async (users) => {
        await Promise.resolve();
        const rows = this.#all(`SELECT name FROM users WHERE name IN (${marks(users)})`, ...users);
        return new Set(rows.map((row) => row['name'] as string));
      },
      rowsOf: async (users) => {
        await Promise.resolve();
        const among = `user_name IN (${marks(users)})`;
        return {
          rules: this.#all(
            `SELECT user_name, rule_id, priority_class, priority, conditions, actions FROM push_rules WHERE ${among}`,
            ...users,
          ) as unknown as SynapsePushRuleRow[],
          enables: this.#all(
            `SELECT user_name, rule_id, enabled FROM push_rules_enable WHERE ${among}`,
            ...users,
          ) as unknown as SynapsePushRuleEnableRow[],
          // Synapse lists a user's pushers in table order.
          pushers: this.#all(
            `SELECT ${pusherSelect} FROM pushers WHERE ${among} ORDER BY id`,
            ...users,
          ) as unknown as SynapsePusherRow[],
        };
      },
    };
  }

  /** Opens the file read-only and starts the snapshot; `SourceError` when it is no Synapse database. */
  static open(path: string): SqliteSynapseReader {
    let db: DatabaseSync;
    try {
      db = new DatabaseSync(path, { readOnly: true });
    } catch (error) {
      throw new SourceError(`cannot open the SQLite file ${path}: ${messageOf(error)}`, { cause: error });
    }
    try {
      const tables = new Set(
        db
          .prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`)
          .all()
          .map((row) => row['name'] as string),
      );
      const missing = REQUIRED_TABLES.filter((table) => !tables.has(table));
      if (missing.length > 0)
        throw new SourceError(`${path} is not a Synapse database: no table ${missing.join(', ')}`);
      const columns = new Set(
        db
          .prepare('PRAGMA table_info(pushers)')
          .all()
          .map((row) => row['name'] as string),
      );
      // Deferred: the snapshot is taken by the first read below and kept until close.
      db.exec('BEGIN');
      db.prepare('SELECT count(*) FROM push_rules').get();
      return new SqliteSynapseReader(db, pusherColumns(columns));
    } catch (error) {
      db.close();
      if (error instanceof SourceError) throw error;
      throw new SourceError(`cannot read the SQLite file ${path}: ${messageOf(error)}`, { cause: error });
    }
  }

  async countUsers(users?: readonly string[]): Promise<number> {
    await Promise.resolve();
    if (users !== undefined) return users.length;
    const row = this.#db.prepare(`SELECT count(*) AS n FROM (${USERS_WITH_PUSH_DATA})`).get();
    return Number(row?.['n'] ?? 0);
  }

  batches(batchSize: number, users?: readonly string[]): AsyncGenerator<readonly SynapseUserRows[]> {
    return userBatches(this.#tables, batchSize, users);
  }

  async close(): Promise<void> {
    await Promise.resolve();
    if (!this.#db.isOpen) return;
    if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
    this.#db.close();
  }

  #all(sql: string, ...params: SQLInputValue[]): Record<string, SQLInputValue>[] {
    try {
      return this.#db.prepare(sql).all(...params);
    } catch (error) {
      throw new SourceError(`cannot read the SQLite file: ${messageOf(error)}`, { cause: error });
    }
  }
}

function marks(values: readonly unknown[]): string {
  return values.map(() => '?').join(', ');
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
