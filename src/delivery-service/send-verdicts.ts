import type { Logger } from '../logging/logger.js';
import { loggable } from '../logging/loggable-error.js';
import { settleDone, settleRetry, settleWithdrawn, type BacklogPolicy } from '../delivery/device-backlog.js';
import { pushkeyTag } from '../delivery/pushkey-tag.js';
import type { GatewayExchange, ResponseOutcome } from '../delivery/response-outcome.js';
import type { RetryPolicy } from '../delivery/retry-schedule.js';
import { sentRegistration } from '../delivery/sent-registration.js';
import type { RejectedRegistration } from '../pushers/rejected-registration.js';
import type { DeliveryStore, PendingDelivery } from '../store/delivery-store.js';
import type { DeliveryObserver, DeliveryOutcome } from './delivery-observer.js';
import type { DeviceQueue } from './device-queues.js';
import type { SendResult } from './gateway-sends.js';

/**
 * Removes the pusher a gateway rejected, if it is still the registration
 * the request was sent for, and announces the change (an `m.pushers`
 * change event).
 */
export interface RejectedPusherRemover {
  removeRejected(rejected: RejectedRegistration): Promise<void>;
}

export interface SendVerdictsOptions {
  readonly store: Pick<DeliveryStore, 'saveRetry'>;
  readonly remover: RejectedPusherRemover;
  readonly retry: RetryPolicy;
  readonly backlog: BacklogPolicy;
  readonly logger: Logger;
  readonly observer?: DeliveryObserver | undefined;
  readonly random: () => number;
  /** The scheduler is closing. */
  readonly closed: () => boolean;
  /** Requests done with without a send of their own: counted and removed (the scheduler's). */
  readonly finish: (items: readonly PendingDelivery[], outcome: DeliveryOutcome) => void;
  /** A sent request is done with: removed (the scheduler's). */
  readonly done: (id: string) => void;
}

const REFUSED_LOGGED_MAX = 100_000;
const NONE: readonly PendingDelivery['devices'][number][] = [];

/**
 * What a send's outcome does to its device queue (the front leaves, or
 * waits for its retry), to the pushers a gateway rejected, to the store
 * (the retry state) and to the logs and metrics.
 */
export class SendVerdicts {
  readonly #options: SendVerdictsOptions;
  readonly #log: Logger;
  /** Pushers whose refused address was logged: once per pusher. */
  readonly #refusedLogged = new Set<string>();

  constructor(options: SendVerdictsOptions) {
    this.#options = options;
    this.#log = options.logger;
  }

  /** Settles the front `item` of `queue`, in flight until now. */
  settle(queue: DeviceQueue, item: PendingDelivery, { exchange, outcome, now }: SendResult): void {
    switch (outcome.kind) {
      case 'delivered':
        this.#delivered(queue, item, outcome.rejected, now);
        break;
      case 'failed':
        this.#failed(queue, item, outcome, exchange);
        break;
      case 'retry':
        // Withdrawn is no failure of the device: it waits for the lease (parked), or is the next holder's.
        if (exchange.kind === 'not-sent' && exchange.reason === 'withdrawn') this.#withdrawn(queue);
        else this.#retry(queue, item, outcome, now);
        break;
    }
  }

  /** Back to waiting, unsent; past the cap now, it is the oldest and is dropped (counted as the cap's). */
  #withdrawn(queue: DeviceQueue): void {
    const change = settleWithdrawn(queue.backlog, this.#options.backlog);
    queue.backlog = change.backlog;
    this.#options.finish(change.dropped, 'dropped');
  }

  #delivered(queue: DeviceQueue, item: PendingDelivery, rejected: readonly string[], now: number): void {
    queue.backlog = settleDone(queue.backlog);
    // Almost always none: no set and no list per request then.
    const rejectedSet = rejected.length === 0 ? undefined : new Set(rejected);
    const gone = rejectedSet === undefined ? NONE : item.devices.filter((device) => rejectedSet.has(device.pushkey));
    for (const device of gone) {
      const key = sentRegistration(item, device);
      this.#log.info(
        { user: item.userId, appId: device.appId, pushkey: pushkeyTag(device.pushkey) },
        'the gateway rejected a pushkey: its pusher is removed',
      );
      this.#options.remover.removeRejected(key).catch((error: unknown) => {
        this.#log.warn(
          { err: loggable(error), user: item.userId, appId: device.appId, pushkey: pushkeyTag(device.pushkey) },
          'could not remove a rejected pusher; the next push to it will try again',
        );
      });
    }
    const { observer } = this.#options;
    if (gone.length > 0) observer?.settled(item.url, 'rejected', gone.length);
    observer?.settled(item.url, 'delivered', item.devices.length - gone.length);
    observer?.deliveredAfter(Math.max(0, now - item.acceptedAt) / 1000);
    this.#options.done(item.id);
  }

  #failed(
    queue: DeviceQueue,
    item: PendingDelivery,
    outcome: Extract<ResponseOutcome, { kind: 'failed' }>,
    exchange: GatewayExchange,
  ): void {
    queue.backlog = settleDone(queue.backlog);
    const devices = item.devices.map((device) => `${device.appId}/${pushkeyTag(device.pushkey)}`);
    if (outcome.cause === 'address-refused') {
      const first = devices.some((device) => !this.#refusedLogged.has(`${item.userId} ${device}`));
      if (first) {
        if (this.#refusedLogged.size > REFUSED_LOGGED_MAX) this.#refusedLogged.clear();
        for (const device of devices) this.#refusedLogged.add(`${item.userId} ${device}`);
        this.#log.warn(
          {
            user: item.userId,
            devices,
            host: hostOf(item.url),
            ...(exchange.kind === 'address-refused' ? { rule: exchange.rule, reason: exchange.reason } : {}),
          },
          "a pusher's gateway address is not allowed: nothing sent (PUSH_GATEWAY_IP_ALLOWLIST opens ranges)",
        );
      }
      this.#options.observer?.settled(item.url, 'refused', item.devices.length);
    } else {
      this.#log.warn(
        { user: item.userId, devices, host: hostOf(item.url), status: outcome.status, cause: outcome.cause },
        'the gateway refused a notification for good; the pushers are kept',
      );
      this.#options.observer?.settled(item.url, 'failed', item.devices.length);
    }
    this.#options.done(item.id);
  }

  #retry(
    queue: DeviceQueue,
    item: PendingDelivery,
    outcome: Extract<ResponseOutcome, { kind: 'retry' }>,
    now: number,
  ): void {
    const { retry, backlog, random, finish } = this.#options;
    // A gateway's wait longer than the longest backoff would give the notification up unsent (it ends past the window).
    const retryAfterMs = outcome.retryAfterMs === undefined ? undefined : Math.min(outcome.retryAfterMs, retry.maxMs);
    const change = settleRetry(queue.backlog, { now, retryAfterMs }, { retry, backlog }, random);
    queue.backlog = change.backlog;
    this.#options.observer?.settled(item.url, 'retried', item.devices.length);
    finish(change.dropped, 'dropped');
    if (change.gaveUp.length > 0) {
      this.#log.warn(
        { user: item.userId, host: hostOf(item.url), cause: outcome.cause, status: outcome.status },
        'a notification failed for its whole retry window: given up',
      );
      finish(change.gaveUp, 'given_up');
      return;
    }
    const { failures, frontFailedAt, retryAt } = queue.backlog;
    // A send cut short by the shutdown says nothing about the gateway: the next holder keeps the backoff as it was.
    if (this.#options.closed()) return;
    if (queue.backlog.queue[0]?.id === item.id && frontFailedAt !== undefined && retryAt !== undefined) {
      this.#options.store.saveRetry(item.id, { failures, firstFailedAt: frontFailedAt, retryAt }).catch(() => {
        // Only the pace after a crash depends on it: the next holder starts the backoff again.
      });
    }
  }
}

function hostOf(url: string): string {
  return URL.parse(url)?.host ?? 'invalid';
}
