import type { Logger } from '../logging/logger.js';
import { loggable } from '../logging/loggable-error.js';
import { markSent, settleDone } from '../delivery/device-backlog.js';
import { PusherChanges } from '../delivery/pusher-changes.js';
import { recheckDevices } from '../delivery/pusher-recheck.js';
import type { PendingDelivery } from '../store/delivery-store.js';
import type { DeliveryObserver, DeliveryOutcome } from './delivery-observer.js';
import type { DeviceQueue } from './device-queues.js';
import type { PusherLookup } from './pusher-lookup.js';

export interface PusherRechecksOptions {
  readonly pushers: PusherLookup;
  readonly logger: Logger;
  readonly observer?: DeliveryObserver | undefined;
  /** Users whose pusher changes are remembered (pusher-changes.ts). */
  readonly kept: number;
  /** A front whose pushers cannot be read is tried again this much later. */
  readonly retryMs: number;
  readonly now: () => number;
  /** Requests done with: counted and removed (the scheduler's). */
  readonly finish: (items: readonly PendingDelivery[], outcome: DeliveryOutcome) => void;
  /** The checked queue moves on (the scheduler's). */
  readonly moveOn: (key: string) => void;
}

/**
 * A request planned before its user's pushers changed (a change event, or
 * events missed) is checked against them again before it goes: sent as
 * planned, narrowed to the devices still registered, or not at all.
 */
export class PusherRechecks {
  readonly #options: PusherRechecksOptions;
  readonly #changes: PusherChanges;

  constructor(options: PusherRechecksOptions) {
    this.#options = options;
    this.#changes = new PusherChanges(options.kept);
  }

  /** The pushers of `userId` changed: requests planned before are checked again before they go. */
  changed(userId: string): void {
    this.#changes.changed(userId, this.#options.now());
  }

  /** Change events may have been missed: every request planned so far is checked again. */
  missed(): void {
    this.#changes.forgetAll(this.#options.now());
  }

  /** Whether the front must be checked before it goes (`plannedAt` `-Infinity`: taken over, planned elsewhere). */
  due(queue: DeviceQueue, item: PendingDelivery, plannedAt: number): boolean {
    return queue.checked?.id === item.id
      ? this.#changes.changedAfter(item.userId, queue.checked.tick)
      : plannedAt === Number.NEGATIVE_INFINITY || this.#changes.changedSince(item.userId, plannedAt);
  }

  /** Checks the front against its user's pushers now; the queue waits (`checking`) until it moves on. */
  start(queue: DeviceQueue, item: PendingDelivery): void {
    queue.checking = true;
    void this.#check(queue, item);
  }

  async #check(queue: DeviceQueue, item: PendingDelivery): Promise<void> {
    const at = this.#options.now();
    const tick = this.#changes.tick;
    try {
      const pushers = await this.#options.pushers.listPushers(item.userId);
      const verdict = recheckDevices(item, pushers);
      // The front changed during the read (dropped by the cap, say): the new front is checked when the
      // queue moves on below, which it must (returning here left the queue waiting for its next notify).
      if (queue.backlog.queue[0]?.id === item.id && !queue.backlog.inFlight) {
        if (verdict.kind === 'none') {
          queue.backlog = settleDone(markSent(queue.backlog));
          this.#options.finish([item], 'pusher_removed');
        } else if (verdict.kind === 'narrowed') {
          const removed = item.devices.length - verdict.devices.length;
          this.#options.observer?.settled(item.url, 'pusher_removed', removed);
          const narrowed: PendingDelivery = { ...item, body: verdict.body, devices: verdict.devices };
          queue.backlog = { ...queue.backlog, queue: [narrowed, ...queue.backlog.queue.slice(1)] };
        }
        // A change after the read began is caught next time (counted, not timed: the same millisecond too).
        // A front with no device left says nothing of the next one's devices: that one is checked on its own.
        // A narrowed front keeps its ID.
        if (verdict.kind !== 'none') queue.checked = { id: queue.backlog.queue[0]?.id ?? item.id, tick };
      }
    } catch (error) {
      // The pushers cannot be read now: try again at the retry pace, without counting it against the gateway.
      this.#options.logger.warn(
        { err: loggable(error), user: item.userId },
        'cannot read the pushers of a pending notification; retrying',
      );
      queue.backlog = { ...queue.backlog, retryAt: at + this.#options.retryMs };
    } finally {
      queue.checking = false;
    }
    this.#options.moveOn(queue.key);
  }
}
