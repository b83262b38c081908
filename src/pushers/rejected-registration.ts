import { pusherMatches, type PusherKey, type StoredPusher } from './pusher.js';

/**
 * A pusher a gateway rejected, as the rejected request knew it. The key
 * alone is not enough: the app may have moved the same pushkey to another
 * gateway, or registered it again, while the request to the old one was in
 * flight, and the old gateway's rejection says nothing of that newer
 * registration.
 */
export interface RejectedRegistration extends PusherKey {
  /** Where the rejected request went: the pusher's `data.url` when it was planned. */
  readonly url: string;
  /**
   * The latest time (ms) at which the registration the request was planned
   * with can have been set (the pusher's `ts` then). A pusher whose `ts` is
   * later was registered again since. A pusher stored before `ts` was kept
   * counts as 0.
   */
  readonly setAtMost: number;
}

/** Whether `pusher` is still the registration a gateway rejected: the one to delete. */
export function stillRejected(pusher: StoredPusher, rejected: RejectedRegistration): boolean {
  return pusherMatches(pusher, rejected) && pusher.data.url === rejected.url && (pusher.ts ?? 0) <= rejected.setAtMost;
}
