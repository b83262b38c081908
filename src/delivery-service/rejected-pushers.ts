import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../logging/logger.js';
import type { RejectedRegistration } from '../pushers/rejected-registration.js';
import type { ChangeEvent } from '../service/push-service.js';
import type { PushStore } from '../store/push-store.js';
import type { RejectedPusherRemover } from './send-verdicts.js';

export interface RejectedPushersOptions {
  /**
   * This worker's own caches drop the user (the delivery pusher cache, the
   * scheduler's recheck): called as soon as the pusher is deleted, before
   * any event is tried, so that a failure to announce it leaves at least
   * this worker right.
   */
  readonly droppedHere?: (userId: string) => void;
  /** Waits between attempts at the announcement (tests pass one that does not wait). */
  readonly pause?: (ms: number) => Promise<unknown>;
}

/**
 * Removes the pusher a gateway rejected — that user's, with that app ID and
 * that pushkey, nobody else's, and only while it is still the registration
 * the rejected request was sent for (see `RejectedRegistration`) — and
 * announces it with an `m.pushers` change event, as for any pusher write,
 * so that fronts and caches see it.
 *
 * An event that cannot be published after about a minute and a half of
 * tries (the store or the broker away all that time) is logged at `error`
 * and given up: this worker's caches dropped the user already
 * (`droppedHere`), and every other worker's pusher cache reads the user
 * again within `delivery.pusherCacheMaxStalenessMs` (a send to the removed
 * pusher meanwhile is rejected again, and removes nothing more).
 */
export class RejectedPushers implements RejectedPusherRemover {
  readonly #store: Pick<PushStore, 'deleteRejectedPusher' | 'bumpPushersVersion'>;
  readonly #announce: (change: ChangeEvent) => Promise<boolean>;
  readonly #log: Logger;
  readonly #droppedHere: (userId: string) => void;
  readonly #pause: (ms: number) => Promise<unknown>;

  constructor(
    store: Pick<PushStore, 'deleteRejectedPusher' | 'bumpPushersVersion'>,
    announce: (change: ChangeEvent) => Promise<boolean>,
    logger: Logger,
    options: RejectedPushersOptions = {},
  ) {
    this.#store = store;
    this.#announce = announce;
    this.#log = logger;
    this.#droppedHere = options.droppedHere ?? (() => undefined);
    this.#pause = options.pause ?? (async (ms) => sleep(ms));
  }

  async removeRejected(rejected: RejectedRegistration): Promise<void> {
    // Already gone (removed by the user, or by another rejection), or registered again since the
    // request was planned: nothing of the rejected registration is left, nothing to announce.
    if (!(await this.#store.deleteRejectedPusher(rejected))) return;
    const { userId } = rejected;
    this.#droppedHere(userId);
    // The pusher is gone now; a failure from here on must not leave fronts and caches without the event.
    for (let attempt = 1; ; attempt += 1) {
      try {
        const version = await this.#store.bumpPushersVersion(userId);
        if (await this.#announce({ user_id: userId, type: 'm.pushers', version })) return;
        throw new Error('the change event was not confirmed');
      } catch (error) {
        if (attempt >= ANNOUNCE_ATTEMPTS) {
          this.#log.error(
            { user: userId, attempts: attempt, reason: error instanceof Error ? error.message : String(error) },
            "a rejected pusher was removed but its change event could not be published: other workers' pusher caches keep it until their staleness bound (delivery.pusherCacheMaxStalenessMs)",
          );
          return;
        }
        await this.#pause(Math.min(30_000, 500 * 2 ** attempt));
      }
    }
  }
}

/** About a minute and a half of tries: a broker reconnection, a store failover. */
const ANNOUNCE_ATTEMPTS = 6;
