import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import type { SynapseUserRows } from '../import/map-user.js';
import type { SynapsePushRuleEnableRow, SynapsePushRuleRow, SynapsePusherRow } from '../import/synapse-rows.js';
import {
  orderedRows,
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
      orderedUsers: () => {
        // BINARY collation: the byte order of UTF-8, as `compareUserIds`.
        const ids = this.#iterate(`SELECT user_name FROM (${USERS_WITH_PUSH_DATA}) ORDER BY user_name`);
        return {
          take: async (limit) => {
            await Promise.resolve();
            const page: string[] = [];
            for (let step = page.length < limit ? ids.next() : undefined; step !== undefined && step.done !== true;) {
              page.push(step.value['user_name'] as string);
              step = page.length < limit ? ids.next() : undefined;
            }
            return page;
          },
          close: async () => {
            await Promise.resolve();
            ids.return?.();
          },
        };
      },
      knownUsers: async (users) => {
        await Promise.resolve();
        const rows = this.#all(`SELECT name FROM users WHERE name IN (${marks(users)})`, ...users);
        return new Set(rows.map((row) => row['name'] as string));
      },
      rulesOf: async (users) => {
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
        };
      },
      pushersOf: async (users) => {
        await Promise.resolve();
        // Synapse lists a user's pushers in table order.
        return this.#all(
          `SELECT ${pusherSelect} FROM pushers WHERE user_name IN (${marks(users)}) ORDER BY id`,
          ...users,
        ) as unknown as SynapsePusherRow[];
      },
      orderedPushers: () => {
        // One sorted pass over the table for the whole run, read as the batches need it.
        const rows = this.#iterate(`SELECT ${pusherSelect} FROM pushers ORDER BY user_name, id`);
        return orderedRows(
          async () => {
            await Promise.resolve();
            const chunk: SynapsePusherRow[] = [];
            for (let step = rows.next(); step.done !== true; step = rows.next()) {
              chunk.push(step.value as unknown as SynapsePusherRow);
              if (chunk.length === PUSHER_CHUNK) break;
            }
            return chunk;
          },
          async () => {
            await Promise.resolve();
            rows.return?.();
          },
        );
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

  #iterate(sql: string): Iterator<Record<string, SQLInputValue>> {
    try {
      return this.#db.prepare(sql).iterate() as Iterator<Record<string, SQLInputValue>>;
    } catch (error) {
      throw new SourceError(`cannot read the SQLite file: ${messageOf(error)}`, { cause: error });
    }
  }

  #all(sql: string, ...params: SQLInputValue[]): Record<string, SQLInputValue>[] {
    try {
      return this.#db.prepare(sql).all(...params);
    } catch (error) {
      throw new SourceError(`cannot read the SQLite file: ${messageOf(error)}`, { cause: error });
    }
  }
}

/** Pushers read from the sorted pass at a time. */
const PUSHER_CHUNK = 1000;

function marks(values: readonly unknown[]): string {
  return values.map(() => '?').join(', ');
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
