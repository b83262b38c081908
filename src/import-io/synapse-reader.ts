import type { SynapseUserRows } from '../import/map-user.js';
import type { SynapsePushRuleEnableRow, SynapsePushRuleRow, SynapsePusherRow } from '../import/synapse-rows.js';

/**
 * Synapse's database, read-only, in one snapshot taken when it opens
 * (docs/import-from-synapse.md#reading-the-database). Users come in batches
 * by user ID, from ordered passes over the tables, so a run holds a batch's
 * rows at a time.
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
  /**
   * Every user ID with push data, each once, in the byte order of their
   * UTF-8, read once from start to end. Not keyset pages: `pushers` has no
   * index on the user, so every page's query would read the whole table.
   */
  orderedUsers(): OrderedUsers;
  /** Of these users, those in Synapse's `users` table. */
  knownUsers(users: readonly string[]): Promise<ReadonlySet<string>>;
  /** These users' rows of `push_rules` and `push_rules_enable` (both indexed by user). */
  rulesOf(users: readonly string[]): Promise<{
    readonly rules: readonly SynapsePushRuleRow[];
    readonly enables: readonly SynapsePushRuleEnableRow[];
  }>;
  /** These users' pushers, by a query (for a few users named). */
  pushersOf(users: readonly string[]): Promise<readonly SynapsePusherRow[]>;
  /**
   * Every pusher in user ID order (the byte order of `userPage`), read
   * once from start to end: `pushers` has no index on the user, so a
   * query per batch would read the whole table each time.
   */
  orderedPushers(): OrderedRows<SynapsePusherRow>;
}

/** User IDs in order, taken a page at a time. */
export interface OrderedUsers {
  /** The next `limit` user IDs; fewer (none) at the end. */
  take(limit: number): Promise<readonly string[]>;
  close(): Promise<void>;
}

/** Rows in user ID order, taken a stretch at a time. */
export interface OrderedRows<T extends { readonly user_name: string }> {
  /** The next rows, up to those of `lastUser` included. */
  upTo(lastUser: string): Promise<readonly T[]>;
  close(): Promise<void>;
}

/** User IDs compare as their UTF-8 bytes: SQLite's BINARY collation, PostgreSQL's "C". */
export function compareUserIds(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * `OrderedRows` over a source of rows in user ID order, fetched `chunk` at
 * a time; a row past the stretch asked for waits for the next call.
 */
export function orderedRows<T extends { readonly user_name: string }>(
  fetch: () => Promise<readonly T[]>,
  close: () => Promise<void>,
): OrderedRows<T> {
  let buffer: readonly T[] = [];
  let at = 0;
  let exhausted = false;
  return {
    async upTo(lastUser) {
      const taken: T[] = [];
      for (;;) {
        if (at === buffer.length) {
          if (exhausted) return taken;
          buffer = await fetch();
          at = 0;
          if (buffer.length === 0) {
            exhausted = true;
            return taken;
          }
        }
        const row = buffer[at] as T;
        if (compareUserIds(row.user_name, lastUser) > 0) return taken;
        taken.push(row);
        at += 1;
      }
    },
    close,
  };
}

/**
 * The users' rows in batches: every user with push data, a page at a
 * time from one ordered pass, their pushers from another, or the users
 * named, in their order (a named user Synapse does not know comes with `known:
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
      yield rowsByUser(page, known, await tables.rulesOf(page), await tables.pushersOf(page));
    }
    return;
  }
  const ids = tables.orderedUsers();
  const pushers = tables.orderedPushers();
  try {
    for (;;) {
      const page = await ids.take(batchSize);
      if (page.length === 0) return;
      const last = page[page.length - 1] as string;
      yield rowsByUser(page, undefined, await tables.rulesOf(page), await pushers.upTo(last));
    }
  } finally {
    await pushers.close();
    await ids.close();
  }
}

function rowsByUser(
  page: readonly string[],
  known: ReadonlySet<string> | undefined,
  { rules, enables }: Awaited<ReturnType<SynapseTables['rulesOf']>>,
  pushers: readonly SynapsePusherRow[],
): readonly SynapseUserRows[] {
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
