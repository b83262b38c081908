import type { SynapseUserRows } from '../import/map-user.js';
import type { SynapsePushRuleEnableRow, SynapsePushRuleRow, SynapsePusherRow } from '../import/synapse-rows.js';

/**
 * Synapse's database, read-only, in one snapshot taken when it opens
 * (docs/import-from-synapse.md#reading-the-database). Users come in batches
 * by user ID (keyset pagination), so a run holds one batch's rows at a time.
 */
export interface SynapseReader {
  /** Users the run will read: those named, or every user with a push rule, an enable row or a pusher. */
  countUsers(users?: readonly string[]): Promise<number>;
  /** The users' rows, `batchSize` users at a time, in user ID order (or the order named). */
  batches(batchSize: number, users?: readonly string[]): AsyncGenerator<readonly SynapseUserRows[]>;
  /** Ends the snapshot and the connection. */
  close(): Promise<void>;
}

/** The source cannot be read: a message fit for the operator (never a password), no stack. */
export class SourceError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SourceError';
  }
}

/** The tables the importer reads; a database without them is not Synapse's. */
export const REQUIRED_TABLES = ['push_rules', 'push_rules_enable', 'pushers', 'users'] as const;

/** Columns of `pushers` that only Synapse 1.69 and later have. */
export const OPTIONAL_PUSHER_COLUMNS = ['enabled', 'device_id'] as const;

/** What one dialect of SQL answers; `userBatches` does the rest the same way for both. */
export interface SynapseTables {
  /** Up to `limit` user IDs with push data after `after` (exclusive), in the database's order. */
  userPage(after: string | undefined, limit: number): Promise<readonly string[]>;
  /** Of these users, those in Synapse's `users` table. */
  knownUsers(users: readonly string[]): Promise<ReadonlySet<string>>;
  /** Every row of these users in the three tables. */
  rowsOf(users: readonly string[]): Promise<{
    readonly rules: readonly SynapsePushRuleRow[];
    readonly enables: readonly SynapsePushRuleEnableRow[];
    readonly pushers: readonly SynapsePusherRow[];
  }>;
}

/**
 * The users' rows in batches: every user with push data, page by page
 * after the last user ID of the previous page, or the users named, in
 * their order (a named user Synapse does not know comes with `known:
 * false`; one it knows without any row comes with none: the defaults).
 */
export async function* userBatches(
  tables: SynapseTables,
  batchSize: number,
  users?: readonly string[],
): AsyncGenerator<readonly SynapseUserRows[]> {
  if (users !== undefined) {
    for (let start = 0; start < users.length; start += batchSize) {
      const page = users.slice(start, start + batchSize);
      const known = await tables.knownUsers(page);
      yield await rowsByUser(tables, page, known);
    }
    return;
  }
  let after: string | undefined;
  for (;;) {
    const page = await tables.userPage(after, batchSize);
    if (page.length === 0) return;
    yield await rowsByUser(tables, page, undefined);
    after = page[page.length - 1];
  }
}

async function rowsByUser(
  tables: SynapseTables,
  page: readonly string[],
  known: ReadonlySet<string> | undefined,
): Promise<readonly SynapseUserRows[]> {
  const { rules, enables, pushers } = await tables.rowsOf(page);
  const byUser = new Map(
    page.map((userId) => [
      userId,
      {
        userId,
        known: known === undefined || known.has(userId),
        rules: [] as SynapsePushRuleRow[],
        enables: [] as SynapsePushRuleEnableRow[],
        pushers: [] as SynapsePusherRow[],
      },
    ]),
  );
  for (const row of rules) byUser.get(row.user_name)?.rules.push(row);
  for (const row of enables) byUser.get(row.user_name)?.enables.push(row);
  for (const row of pushers) byUser.get(row.user_name)?.pushers.push(row);
  return [...byUser.values()];
}

/** The columns of `pushers` to select, the newer ones only where the schema has them. */
export function pusherColumns(present: ReadonlySet<string>): string {
  const columns = [
    'user_name',
    'access_token',
    'profile_tag',
    'kind',
    'app_id',
    'app_display_name',
    'device_display_name',
    'pushkey',
    'ts',
    'lang',
    'data',
    ...OPTIONAL_PUSHER_COLUMNS.filter((column) => present.has(column)),
  ];
  return columns.join(', ');
}

/** Every user with push data: the three tables' user names, each once. */
export const USERS_WITH_PUSH_DATA =
  'SELECT user_name FROM push_rules UNION SELECT user_name FROM push_rules_enable UNION SELECT user_name FROM pushers';
