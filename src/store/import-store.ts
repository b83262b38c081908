import type { Ruleset } from '../push-rules/push-rule.js';
import type { StoredPusher } from '../pushers/pusher.js';

/**
 * One user's data as an import from another homeserver brings it: the
 * whole ruleset and every pusher, replacing what the store holds for the
 * user (docs/import-from-synapse.md).
 */
export interface UserImport {
  readonly userId: string;
  readonly ruleset: Ruleset;
  readonly defaultsRevision: string;
  /** Every pusher of the user, each with its `ts` (Synapse's) when known; none when the user has none. */
  readonly pushers: readonly StoredPusher[];
}

/**
 * What became of one user of `importUsers`:
 * - `imported`: written; `pushRulesVersion` / `pushersVersion` are the
 *   versions to announce (a type that did not change has none);
 * - `unchanged`: the store already held exactly this (nothing written);
 * - `present`: the user has data of their own in the store and the import
 *   does not overwrite, so it was left alone;
 * - `conflict`: another writer changed the user between the read and the
 *   write (compare-and-set lost); nothing of the import is kept for the
 *   rules, the caller tries the user again.
 */
export type UserImportOutcome =
  | {
      readonly userId: string;
      readonly status: 'imported';
      readonly pushRulesVersion?: number;
      readonly pushersVersion?: number;
    }
  | { readonly userId: string; readonly status: 'unchanged' | 'present' | 'conflict' };

export interface ImportWriteOptions {
  /** Replace what a user already has; otherwise such a user is `present` and left alone. */
  readonly overwrite: boolean;
  /**
   * Leave each user written marked as an unfinished import, for
   * `finishImports` to clear once their change events are out: a run that
   * stops before then (a publish that fails) completes and announces them
   * again when started again.
   */
  readonly keepMarks?: boolean;
}

/**
 * The store's side of an import, beside the worker's `PushStore`: many
 * users in few round trips. Both adapters implement it and pass the import
 * cases of `test/store/push-store-contract.ts`.
 *
 * Per user it is a compare-and-set on the push-rules version, like every
 * write of the worker: the user's document is claimed at the version read
 * (marked as an import in progress), the pushers are written, then the
 * mark is removed. A run stopped in between leaves the mark, and the next
 * run treats that user as its own unfinished import (never `present`), so
 * a re-run completes it. Idempotent: the same users imported again are
 * `unchanged` (or `present` without `overwrite`), and nothing is written.
 *
 * "Has data of their own": a push-rules entry (even a corrupt one), or any
 * pusher, that no unfinished import of this kind left. Adapters may rely on
 * what the service does on every pusher write, bump the owner's pushers
 * version: a user with no account-data document has no pushers.
 */
export interface ImportStore {
  /** One outcome per user, in the order given; user IDs are distinct. */
  importUsers(users: readonly UserImport[], options: ImportWriteOptions): Promise<readonly UserImportOutcome[]>;
  /** Clears the marks `importUsers` left with `keepMarks` (the users' events are out). */
  finishImports(userIds: readonly string[]): Promise<void>;
}
