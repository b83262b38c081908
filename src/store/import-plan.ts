import { samePusher, type StoredPusher } from '../pushers/pusher.js';
import type { ImportWriteOptions, UserImport, UserImportOutcome } from './import-store.js';
import { encodePushRulesContent } from './push-rules-entry.js';

/** What the store holds for a user when an import batch reads it. */
export interface StoredUserState {
  /** The push-rules version; 0 when none was ever stored. */
  readonly version: number;
  readonly pushersVersion: number;
  /** The push-rules entry as stored (its text), when there is one, readable or not. */
  readonly entry: { readonly contentJson?: unknown; readonly defaultsRevision?: string | undefined } | undefined;
  readonly pushers: readonly StoredPusher[];
  /** An earlier import claimed the user and stopped before it finished. */
  readonly unfinished: boolean;
}

/** A user to write: the claim at `version`, then the pushers. */
export interface ImportPlan {
  readonly user: UserImport;
  readonly version: number;
  readonly nextVersion: number;
  readonly nextPushersVersion: number;
  readonly contentJson: string;
  readonly rulesChanged: boolean;
  readonly pushersChanged: boolean;
  /** A user an unfinished import claimed is announced whole again: its events may never have gone out. */
  readonly announceRules: boolean;
  readonly announcePushers: boolean;
  readonly existingPushers: readonly StoredPusher[];
}

/**
 * What both adapters do for one user of `importUsers` (see `ImportStore`):
 * nothing when the store holds exactly the import (`unchanged`), nothing
 * for a user with data of their own unless overwriting (`present`),
 * otherwise a plan to write what differs.
 */
export function planUserImport(
  user: UserImport,
  stored: StoredUserState,
  options: ImportWriteOptions,
): ImportPlan | UserImportOutcome {
  const { userId } = user;
  const contentJson = encodePushRulesContent(user.ruleset);
  const { entry, unfinished } = stored;
  const rulesChanged = entry?.contentJson !== contentJson || entry.defaultsRevision !== user.defaultsRevision;
  const pushersChanged = !samePusherSet(stored.pushers, user.pushers);
  if (!unfinished) {
    if (!rulesChanged && !pushersChanged) return { userId, status: 'unchanged' };
    const hasData = entry !== undefined || stored.pushers.length > 0;
    if (hasData && !options.overwrite) return { userId, status: 'present' };
  }
  const { version, pushersVersion } = stored;
  return {
    user,
    version,
    nextVersion: rulesChanged ? version + 1 : version,
    nextPushersVersion: pushersChanged ? pushersVersion + 1 : pushersVersion,
    contentJson,
    rulesChanged,
    pushersChanged,
    announceRules: rulesChanged || (unfinished && version > 0),
    announcePushers: pushersChanged || (unfinished && pushersVersion > 0),
    existingPushers: stored.pushers,
  };
}

/** A pusher's identity within one user: app ID and pushkey. */
export function pusherKey(pusher: StoredPusher): string {
  return JSON.stringify([pusher.app_id, pusher.pushkey]);
}

/** The same pushers with the same values and the same `ts` (an import sets it), in any order. */
function samePusherSet(a: readonly StoredPusher[], b: readonly StoredPusher[]): boolean {
  if (a.length !== b.length) return false;
  const byKey = new Map(a.map((pusher) => [pusherKey(pusher), pusher]));
  return b.every((pusher) => {
    const other = byKey.get(pusherKey(pusher));
    return other !== undefined && samePusher(other, pusher) && other.ts === pusher.ts;
  });
}
