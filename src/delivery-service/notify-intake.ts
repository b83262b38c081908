import { randomUUID } from 'node:crypto';
import type { NotifyRequestBody } from '../contract/ops.js';
import type { DeliveryPusher } from '../delivery/device-batches.js';
import { planIntake, pushedUserIds } from '../delivery/intake-plan.js';
import type { Logger } from '../logging/logger.js';
import type { StoredPusher } from '../pushers/pusher.js';
import type { BackoffPolicy } from '../retry/backoff.js';
import { retryUntilDone } from '../retry/retry-until-done.js';
import type { DeliveryStore, Lease, PendingDelivery } from '../store/delivery-store.js';
import { StoreUnavailableError } from '../store/push-store.js';
import { loggable, type PusherLookup } from './delivery-scheduler.js';

/** Where the intake hands what it stored: the scheduler (delivery-scheduler.ts). */
export interface DeliveryHolder {
  lease(): Lease;
  hold(deliveries: readonly PendingDelivery[]): void;
}

export interface NotifyIntakeOptions {
  readonly store: DeliveryStore;
  readonly pushers: PusherLookup;
  readonly holder: DeliveryHolder;
  /** The pace of retries while the store does not answer. */
  readonly backoff: BackoffPolicy;
  /** Aborted at shutdown: an intake still waiting for the store gives up, and its message goes back to the queue. */
  readonly signal: AbortSignal;
  readonly logger: Logger;
  readonly observer?: { emailPushersSkipped(count: number): void } | undefined;
  readonly now?: () => number;
}

/** The `notify` reply's body (docs/delivery.md). */
export interface IntakeResult {
  readonly recipients: number;
  readonly devices: number;
  /** Its `messageId` was taken in before: nothing was scheduled again. */
  readonly replayed: boolean;
}

/** The intake stopped (shutdown) before the store took the message: it must go back to the queue. */
export class IntakeStoppedError extends Error {
  constructor() {
    super('delivery intake stopped before the notification was stored');
    this.name = 'IntakeStoppedError';
  }
}

/**
 * Takes a `notify` message in: reads the recipients' pushers, plans the
 * gateway requests (delivery/intake-plan.ts), stores them, and hands the
 * scheduler its share. Once `accept` resolved, every request is in the
 * store: the message may be acknowledged.
 *
 * Messages are stored in the order `accept` was called (the order the
 * single active consumer receives them in), each with a higher `seq`: a
 * message that waits for the store holds back the ones after it, so that
 * one device's notifications never overtake each other.
 */
export class NotifyIntake {
  readonly #options: NotifyIntakeOptions;
  readonly #now: () => number;
  #lastSeq = 0;
  #tail: Promise<unknown> = Promise.resolve();
  #readTail: Promise<void> = Promise.resolve();

  constructor(options: NotifyIntakeOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** Rejects only with `IntakeStoppedError`; the store's failures are retried until it answers. */
  async accept(request: NotifyRequestBody, messageId: string | undefined): Promise<IntakeResult> {
    // Taken now, before any wait: the message's place in intake order.
    const acceptedAt = this.#now();
    const seq = Math.max(this.#lastSeq + 1, acceptedAt * 1000);
    this.#lastSeq = seq;
    const previous = this.#tail;
    // One message reads its pushers at a time (the next while this one is stored): a
    // prefetch of large fan-outs must not hit the store with all their reads at once.
    const previousRead = this.#readTail;
    let readDone: () => void = () => undefined;
    this.#readTail = new Promise<void>((resolve) => {
      readDone = resolve;
    });
    // Once, outside the retries: a retry after a write that half went through stores the same IDs.
    const notifyId = messageId ?? randomUUID();
    const work = this.#retrying(async () => {
      await previousRead;
      if (messageId !== undefined) {
        const found = await this.#options.store.findAccepted(messageId);
        if (found !== undefined) return { recipients: found.recipients, devices: found.devices, replayed: true };
      }
      const pushers = await this.#options.pushers.listPushersOfUsers(pushedUserIds(request));
      readDone();
      const plan = planIntake(request, (userId) => (pushers.get(userId) ?? []).map(toDeliveryPusher), {
        notifyId,
        seq,
        acceptedAt,
      });
      if (plan.emailPushers > 0) this.#options.observer?.emailPushersSkipped(plan.emailPushers);
      // Stored strictly after the message before it.
      await previous;
      const { holder, store } = this.#options;
      const held = await store.accept(
        { id: notifyId, recipients: plan.recipients, devices: plan.devices, acceptedAt },
        plan.deliveries,
        holder.lease(),
        this.#now(),
      );
      holder.hold(held);
      return { recipients: plan.recipients, devices: plan.devices, replayed: false };
    });
    this.#tail = work.catch(() => undefined);
    void work.catch(() => undefined).finally(readDone);
    return work;
  }

  /**
   * Retries while the store is unavailable (it comes back); any other
   * failure (the store refusing the write, a bug) would fail the same way
   * every time and hold back every message after it, so it is thrown.
   */
  async #retrying(operation: () => Promise<IntakeResult>): Promise<IntakeResult> {
    let fatal: { readonly error: unknown } | undefined;
    const guarded = async (): Promise<IntakeResult | undefined> => {
      try {
        return await operation();
      } catch (error) {
        if (error instanceof StoreUnavailableError) throw error;
        fatal = { error };
        return undefined;
      }
    };
    const result = await retryUntilDone(guarded, {
      policy: this.#options.backoff,
      signal: this.#options.signal,
      onFailure: (error, attempt, retryInMs) => {
        this.#options.logger.warn(
          { err: loggable(error), attempt, retryInMs },
          'cannot store a notify message yet; it waits (unacknowledged) and is retried',
        );
      },
    });
    if (fatal !== undefined) throw fatal.error;
    if (result === undefined) throw new IntakeStoppedError();
    return result;
  }
}

/** A stored pusher as delivery plans with it; one stored before its time was recorded is sent `pushkey_ts` 0. */
function toDeliveryPusher(pusher: StoredPusher): DeliveryPusher {
  return {
    user_id: pusher.user_id,
    kind: pusher.kind,
    app_id: pusher.app_id,
    pushkey: pusher.pushkey,
    data: pusher.data,
    enabled: pusher.enabled,
    pushkeyTsMs: pusher.ts ?? 0,
  };
}
