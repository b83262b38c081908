import pg from 'pg';
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
 * Synapse's PostgreSQL database through `pg`: one connection, one
 * `REPEATABLE READ READ ONLY` transaction for the whole run, so every
 * batch reads the same snapshot while Synapse keeps writing, and nothing
 * can be written through it. `bigint` columns come back as strings, which
 * the mapping reads.
 */
export class PostgresSynapseReader implements SynapseReader {
  readonly #client: pg.Client;
  readonly #display: string;
  readonly #tables: SynapseTables;

  private constructor(client: pg.Client, display: string, pusherSelect: string) {
    this.#client = client;
    this.#display = display;
    this.#tables = {
      // "C": the byte order of UTF-8, as `compareUserIds` (Synapse's own databases use it anyway).
      orderedUsers: () => {
        const cursor = this.#cursor(
          'import_users',
          `SELECT user_name FROM (${USERS_WITH_PUSH_DATA}) AS u ORDER BY user_name COLLATE "C"`,
        );
        return {
          take: async (limit) => (await cursor.fetch(limit)).map((row) => String(row['user_name'])),
          close: async () => cursor.close(),
        };
      },
      knownUsers: async (users) => {
        const rows = await this.#all('SELECT name FROM users WHERE name = ANY($1)', [users]);
        return new Set(rows.map((row) => String(row['name'])));
      },
      rulesOf: async (users) => {
        const rules = await this.#all(
          'SELECT user_name, rule_id, priority_class, priority, conditions, actions FROM push_rules WHERE user_name = ANY($1)',
          [users],
        );
        const enables = await this.#all(
          'SELECT user_name, rule_id, enabled FROM push_rules_enable WHERE user_name = ANY($1)',
          [users],
        );
        return {
          rules: rules as unknown as SynapsePushRuleRow[],
          enables: enables as unknown as SynapsePushRuleEnableRow[],
        };
      },
      pushersOf: async (users) =>
        // Synapse lists a user's pushers in table order.
        (await this.#all(`SELECT ${pusherSelect} FROM pushers WHERE user_name = ANY($1) ORDER BY id`, [
          users,
        ])) as unknown as SynapsePusherRow[],
      orderedPushers: () => {
        const cursor = this.#cursor(
          'import_pushers',
          `SELECT ${pusherSelect} FROM pushers ORDER BY user_name COLLATE "C", id`,
        );
        return orderedRows(
          async () => (await cursor.fetch(PUSHER_CHUNK)) as unknown as SynapsePusherRow[],
          async () => cursor.close(),
        );
      },
    };
  }

  /** Connects, starts the snapshot, checks the tables; `SourceError` with a message that shows no password. */
  static async open(url: string, display: string): Promise<PostgresSynapseReader> {
    const client = new pg.Client({ connectionString: url, application_name: 'matrix-push-import' });
    // A connection that breaks later is reported by the query it fails.
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch (error) {
      throw new SourceError(`cannot connect to ${display}: ${messageOf(error)}`, { cause: error });
    }
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const tables = await client.query<{ table_name: string }>(
        'SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ANY($1)',
        [[...REQUIRED_TABLES]],
      );
      const found = new Set(tables.rows.map((row) => row.table_name));
      const missing = REQUIRED_TABLES.filter((table) => !found.has(table));
      if (missing.length > 0)
        throw new SourceError(`${display} is not a Synapse database: no table ${missing.join(', ')}`);
      const columns = await client.query<{ column_name: string }>(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'pushers'",
      );
      return new PostgresSynapseReader(
        client,
        display,
        pusherColumns(new Set(columns.rows.map((row) => row.column_name))),
      );
    } catch (error) {
      await client.end().catch(() => undefined);
      if (error instanceof SourceError) throw error;
      throw new SourceError(`cannot read ${display}: ${messageOf(error)}`, { cause: error });
    }
  }

  async countUsers(users?: readonly string[]): Promise<number> {
    if (users !== undefined) return users.length;
    const rows = await this.#all(`SELECT count(*) AS n FROM (${USERS_WITH_PUSH_DATA}) AS u`, []);
    return Number(rows[0]?.['n'] ?? 0);
  }

  batches(batchSize: number, users?: readonly string[]): AsyncGenerator<readonly SynapseUserRows[]> {
    return userBatches(this.#tables, batchSize, users);
  }

  async close(): Promise<void> {
    await this.#client.query('ROLLBACK').catch(() => undefined);
    await this.#client.end().catch(() => undefined);
  }

  /**
   * A server-side cursor in the snapshot's transaction, declared at the
   * first fetch: the query runs once, its rows come `count` at a time.
   */
  #cursor(
    name: string,
    sql: string,
  ): { fetch(count: number): Promise<Record<string, unknown>[]>; close(): Promise<void> } {
    let declared = false;
    return {
      fetch: async (count) => {
        if (!declared) {
          await this.#all(`DECLARE ${name} NO SCROLL CURSOR FOR ${sql}`, []);
          declared = true;
        }
        return this.#all(`FETCH ${count} FROM ${name}`, []);
      },
      close: async () => {
        if (declared) await this.#client.query(`CLOSE ${name}`).catch(() => undefined);
        declared = false;
      },
    };
  }

  async #all(sql: string, params: readonly unknown[]): Promise<Record<string, unknown>[]> {
    try {
      return (await this.#client.query<Record<string, unknown>>(sql, [...params])).rows;
    } catch (error) {
      throw new SourceError(`cannot read ${this.#display}: ${messageOf(error)}`, { cause: error });
    }
  }
}

/** Pushers fetched from the sorted cursor at a time. */
const PUSHER_CHUNK = 1000;

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
