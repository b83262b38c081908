import type { StoredPusher } from '../pushers/pusher.js';

/** Reads a user's pushers now (the pusher store, or the cache in front of it: cached-pusher-lookup.ts). */
export interface PusherLookup {
  listPushers(userId: string): Promise<readonly StoredPusher[]>;
  listPushersOfUsers(userIds: readonly string[]): Promise<ReadonlyMap<string, readonly StoredPusher[]>>;
}
