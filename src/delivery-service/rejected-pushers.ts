import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../logging/logger.js';
import type { PusherKey } from '../pushers/pusher.js';
import type { ChangeEvent } from '../service/push-service.js';
import type { PushStore } from '../store/push-store.js';
import type { RejectedPusherRemover } from './delivery-scheduler.js';

/**
 * Removes the pusher a gateway rejected — that user's, with that app ID and
 * that pushkey, nobody else's — and announces it with an `m.pushers` change
 * event, as for any pusher write, so that fronts and caches see it.
 */
export class RejectedPushers implements RejectedPusherRemover {
  readonly #store: Pick<PushStore, 'deletePusher' | 'bumpPushersVersion'>;
  readonly #announce: (change: ChangeEvent) => Promise<boolean>;
  readonly #log: Logger;

  constructor(
    store: Pick<PushStore, 'deletePusher' | 'bumpPushersVersion'>,
    announce: (change: ChangeEvent) => Promise<boolean>,
    logger: Logger,
  ) {
    this.#store = store;
    this.#announce = announce;
    this.#log = logger;
  }

  async removeRejected(key: PusherKey): Promise<void> {
    // Already gone (removed by the user, or by another rejection): nothing changed, nothing to announce.
    if (!(await this.#store.deletePusher(key))) return;
    // The pusher is gone now; a failure from here on must not leave fronts and caches without the event.
    for (let attempt = 1; ; attempt += 1) {
      try {
        const version = await this.#store.bumpPushersVersion(key.userId);
        if (await this.#announce({ user_id: key.userId, type: 'm.pushers', version })) return;
        throw new Error('the change event was not confirmed');
      } catch (error) {
        if (attempt >= ANNOUNCE_ATTEMPTS) {
          this.#log.warn(
            { user: key.userId, attempts: attempt, reason: error instanceof Error ? error.message : String(error) },
            'a rejected pusher was removed but its change event could not be published',
          );
          return;
        }
        await sleep(Math.min(30_000, 500 * 2 ** attempt));
      }
    }
  }
}

/** About a minute and a half of tries: a broker reconnection, a store failover. */
const ANNOUNCE_ATTEMPTS = 6;
