import type { Logger } from '../logging/logger.js';
import type { BreakerPolicy, BreakerTicket } from '../delivery/circuit-breaker.js';
import { markSent, nextFreshSend, type AgePolicy, type BacklogPolicy } from '../delivery/device-backlog.js';
import type { RetryPolicy } from '../delivery/retry-schedule.js';
import type { DeliveryStore, PendingDelivery } from '../store/delivery-store.js';
import type { DeliveryObserver, DeliveryOutcome } from './delivery-observer.js';
import { DeviceQueues, type DeviceQueue } from './device-queues.js';
import { GatewaySends, type GatewaySender } from './gateway-sends.js';
import { OriginBreakers } from './origin-breakers.js';
import { PartitionSends, settledWithin } from './partition-sends.js';
import type { PusherLookup } from './pusher-lookup.js';
import { PusherRechecks } from './pusher-rechecks.js';
import { RemovalBatches } from './removal-batches.js';
import { SendVerdicts, type RejectedPusherRemover } from './send-verdicts.js';

/** Requests done with while it is on: what a partition read that started before may still list (`watchFinished`). */
export interface FinishedWatch {
  has(id: string): boolean;
  end(): void;
}

/** Whether this worker may send for a partition now: it holds the partition's lease, and the lease is not in doubt. */
export interface PartitionGate {
  sendable(partition: number, now: number): boolean;
}

export interface DeliverySchedulerOptions {
  readonly store: Pick<DeliveryStore, 'remove' | 'saveRetry'>;
  readonly gate: PartitionGate;
  readonly sender: GatewaySender;
  readonly pushers: PusherLookup;
  readonly remover: RejectedPusherRemover;
  readonly retry: RetryPolicy;
  readonly backlog: BacklogPolicy;
  readonly age: AgePolicy;
  readonly breaker: BreakerPolicy;
  readonly logger: Logger;
  readonly observer?: DeliveryObserver | undefined;
  /** Users whose pusher changes are remembered (pusher-changes.ts). */
  readonly pusherChangesKept?: number;
  /**
   * How long `close` waits for requests in flight before it aborts them
   * (`abortSends`): a gateway that hangs must not hold a shutdown past its
   * timeout, with finished requests not yet deleted.
   */
  readonly closeGraceMs?: number;
  /** Aborts the sends in flight (the gateway client's connections): the requests stay in the store. */
  readonly abortSends?: () => Promise<void>;
  readonly now?: () => number;
  readonly random?: () => number;
}

/**
 * Sends what the intake stored (docs/delivery.md): each device queue one
 * request at a time in order, later ones waiting behind a failing one,
 * retries at the backoff's pace, at most `maxPending` waiting per device,
 * each gateway origin behind its breaker. The pure decisions are
 * delivery/; the rooms of the work are their own files: the device queues
 * (device-queues.ts), the breakers and their probes (origin-breakers.ts),
 * the check against changed pushers (pusher-rechecks.ts), the send
 * (gateway-sends.ts) and what its outcome does (send-verdicts.ts), and the
 * deletion of what is done (removal-batches.ts). This class moves each
 * queue on through them, and keeps the partitions' lifecycle: lease in
 * doubt, handover, shutdown.
 *
 * It sends only for partitions whose lease this worker holds (`gate`);
 * a request leaves the store only once it is done with. A worker that dies
 * loses nothing: another takes its partitions over once their leases have
 * expired, and a gateway may see a request twice (at least once).
 */
export class DeliveryScheduler {
  readonly #options: DeliverySchedulerOptions;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #queues: DeviceQueues;
  readonly #breakers: OriginBreakers;
  readonly #rechecks: PusherRechecks;
  readonly #gateways: GatewaySends;
  readonly #verdicts: SendVerdicts;
  readonly #removals: RemovalBatches;
  /** Sends in flight by partition, and what withdraws those still waiting for a slot. */
  readonly #sends = new PartitionSends();
  /** Device queues that had a request due while their partition's lease was in doubt: moved on by `resume`. */
  readonly #parked = new Set<string>();
  /** The IDs done with under each watch on (`watchFinished`): empty but for partition reads under way. */
  readonly #watches = new Set<Set<string>>();
  #closed = false;

  constructor(options: DeliverySchedulerOptions) {
    this.#options = options;
    this.#log = options.logger;
    const now = options.now ?? Date.now;
    const random = options.random ?? Math.random;
    this.#now = now;
    const { logger, observer } = options;
    const closed = () => this.#closed;
    const moveOn = (key: string) => {
      this.#pump(key);
    };
    const finish = (items: readonly PendingDelivery[], outcome: DeliveryOutcome) => {
      this.#finish(items, outcome);
    };
    const done = (id: string) => {
      this.#remove(id);
    };
    this.#queues = new DeviceQueues(options.backlog, now, moveOn);
    this.#breakers = new OriginBreakers({ policy: options.breaker, logger, observer, now, random, wake: moveOn });
    this.#rechecks = new PusherRechecks({
      pushers: options.pushers,
      logger,
      observer,
      kept: options.pusherChangesKept ?? 100_000,
      retryMs: options.retry.baseMs,
      now,
      finish,
      moveOn,
    });
    this.#gateways = new GatewaySends({
      sender: options.sender,
      sends: this.#sends,
      sendable: (partition, at) => options.gate.sendable(partition, at),
      closed,
      logger,
      observer,
      now,
    });
    this.#verdicts = new SendVerdicts({
      store: options.store,
      remover: options.remover,
      retry: options.retry,
      backlog: options.backlog,
      logger,
      observer,
      random,
      closed,
      finish,
      done,
    });
    this.#removals = new RemovalBatches(options.store, logger, closed);
  }

  /** Requests this worker holds and has not finished. */
  get pending(): number {
    return this.#queues.pending;
  }

  /** When the oldest request this worker holds was taken in; undefined when it holds none. */
  oldestAcceptedAt(): number | undefined {
    return this.#queues.oldestAcceptedAt();
  }

  /** The pushers of `userId` changed (a change event): requests planned before are checked again before they go. */
  pushersChanged(userId: string): void {
    this.#rechecks.changed(userId);
  }

  /** Change events may have been missed (the subscription was lost): every request planned so far is checked again. */
  changesMissed(): void {
    this.#rechecks.missed();
  }

  /**
   * Takes requests into the device queues: the intake's new ones
   * (`plannedAt` when they were planned, on this worker's clock), or those
   * of a partition taken over (`plannedAt` undefined: checked against the
   * pushers before they go). Those already held are ignored.
   */
  hold(deliveries: readonly PendingDelivery[], plannedAt?: number): void {
    if (this.#closed) return;
    const taken = this.#queues.take(deliveries, plannedAt, (id) => this.#removals.has(id));
    for (const [key, list] of taken) {
      this.#finish(this.#queues.add(key, list), 'dropped');
      this.#queues.adopt(key);
      this.#pump(key);
    }
  }

  /** Moves a device queue on: sends its front, or waits for its retry, its pushers' check, its lease, its breaker. */
  #pump(key: string): void {
    const queue = this.#queues.get(key);
    if (queue === undefined || this.#closed || queue.checking) return;
    const now = this.#now();
    const { backlog, gaveUp, next, expired, dropped } = nextFreshSend(queue.backlog, now, {
      retry: this.#options.retry,
      age: this.#options.age,
    });
    queue.backlog = backlog;
    this.#finish(gaveUp, 'given_up');
    this.#finish(expired, 'expired');
    this.#finish(dropped, 'dropped');
    switch (next.kind) {
      case 'empty':
        this.#queues.delete(queue);
        return;
      case 'in-flight':
        return;
      case 'wait':
        this.#queues.wakeAt(queue, next.until);
        return;
      case 'send':
        break;
    }
    const item = next.item;
    if (this.#rechecks.due(queue, item, this.#queues.plannedAt(item.id))) {
      this.#rechecks.start(queue, item);
      return;
    }
    // The partition's lease is in doubt (renewals failing) or being handed over: another worker may send these soon.
    if (!this.#options.gate.sendable(queue.partition, now)) {
      this.#parked.add(key);
      return;
    }
    const ticket = this.#breakers.admit(queue.origin, key, item.url, now);
    if (ticket === undefined) return;
    queue.backlog = markSent(queue.backlog);
    this.#track(this.#send(queue, item, ticket), queue.partition);
  }

  async #send(sentBy: DeviceQueue, item: PendingDelivery, ticket: BreakerTicket): Promise<void> {
    const result = await this.#gateways.send(sentBy.partition, item);
    // Let go while out, and taken back since: the queue now holding the device waits for this verdict.
    const queue = this.#queues.current(sentBy, item.id);
    this.#breakers.settle(queue.origin, ticket, result.outcome, result.now);
    // Settled even while closing: a delivered request is deleted before the lease is given up.
    this.#verdicts.settle(queue, item, result);
    // Its partition was handed over meanwhile: what it still holds is the next holder's now.
    if (!this.#queues.holds(queue)) {
      this.#queues.releaseAll(queue);
      return;
    }
    this.#pump(queue.key);
  }

  /** Requests done with without a send of their own: counted and removed. */
  #finish(items: readonly PendingDelivery[], outcome: DeliveryOutcome): void {
    for (const item of items) {
      this.#options.observer?.settled(item.url, outcome, item.devices.length);
      this.#remove(item.id);
    }
  }

  #remove(id: string): void {
    this.#queues.release(id);
    this.#removals.add(id);
    for (const finished of this.#watches) finished.add(id);
  }

  /**
   * Watches what is done with from now on, until `end`: a read of a
   * partition's store that started before a request was done with, and
   * ends after its deletion landed, still lists it, and must not hold it
   * again (the scheduler and the removal batches know of it no more).
   */
  watchFinished(): FinishedWatch {
    const finished = new Set<string>();
    this.#watches.add(finished);
    return {
      has: (id) => finished.has(id),
      end: () => {
        this.#watches.delete(finished);
      },
    };
  }

  /**
   * The partition's lease is in doubt no more (a renewal went through):
   * the device queues that waited for it move on.
   */
  resume(): void {
    const parked = [...this.#parked];
    this.#parked.clear();
    for (const key of parked) this.#pump(key);
  }

  /**
   * Hands a partition over: its device queues are let go (what waits
   * stays in the store for the next holder), the sends in flight are
   * awaited for up to `graceMs`, and what is done is deleted. A send still
   * in flight after the grace may reach its gateway twice (the next holder
   * sends it again). Not `handedOver` (its lease lost or run out): nothing
   * is awaited. The deletions go on by themselves; waited for, they would
   * hold the partition, neither run nor free to claim, for as long as the
   * store takes to delete every partition's backlog (minutes, under load).
   */
  async releasePartition(partition: number, graceMs: number, handedOver = true): Promise<void> {
    // What waits for a slot never goes out now: the next holder sends it, and newer ones.
    this.#sends.withdraw(partition);
    const keys = this.#queues.letGo(partition);
    for (const key of keys) this.#parked.delete(key);
    this.#breakers.forget(keys);
    if (!handedOver) return;
    await settledWithin(this.#sends.started(partition), graceMs);
    await this.#removals.flush();
  }

  #track(work: Promise<void>, partition: number): void {
    const logged = work.catch((error: unknown) => {
      this.#log.error({ err: error }, 'delivery failed unexpectedly');
    });
    this.#sends.track(logged, partition);
  }

  /**
   * Stops sending: timers cleared, requests in flight awaited (each ends
   * within the client's timeouts, or at once when the client closes),
   * and finished ones deleted. The caller then gives the partitions'
   * leases up, so that another worker carries on at once.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#removals.stopTimer();
    this.#queues.stopTimers();
    this.#breakers.stopTimers();
    // The leases are still renewed while the sends in flight finish: they are still this worker's.
    // Those still waiting for a slot stay in the store for the next holder.
    this.#sends.withdrawAll();
    const inFlight = Promise.allSettled(this.#sends.started());
    const graceMs = this.#options.closeGraceMs ?? 5_000;
    const finished = await settledWithin(this.#sends.started(), graceMs);
    if (!finished) {
      this.#log.warn({ inFlight: this.#sends.size, graceMs }, 'gateway requests still in flight at shutdown: aborted');
      await this.#options.abortSends?.();
      await inFlight;
    }
    await this.#removals.flush();
  }
}
