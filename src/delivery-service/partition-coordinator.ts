import type { Logger } from '../logging/logger.js';
import { planOwnership } from '../delivery/partition-ownership.js';
import { partitionOf } from '../delivery/partitions.js';
import type { DeliveryStore, PendingDelivery } from '../store/delivery-store.js';
import type { PartitionLeaseStore } from '../store/partition-lease-store.js';
import type { FinishedWatch, PartitionGate } from './delivery-scheduler.js';
import { loggable } from '../logging/loggable-error.js';
import { settledWithin } from './partition-sends.js';
import type { IntakeGate } from './notify-intake.js';
import { takePartition, type Lapsed } from './partition-take.js';

/** The partition queues' consumers (consumer/partition-queues.ts). */
export interface PartitionSubscriber {
  /** Starts taking the partition's `notify` parts in. */
  subscribe(partition: number): Promise<void>;
  /** Stops taking them in; resolves once those it was taking in are settled (stored and acknowledged, or returned). */
  unsubscribe(partition: number): Promise<void>;
}

export interface PartitionCoordinatorOptions {
  /** This worker's name in the store: unique per process. */
  readonly me: string;
  readonly partitions: number;
  readonly leaseMs: number;
  readonly leases: PartitionLeaseStore;
  readonly deliveries: Pick<DeliveryStore, 'listPartition' | 'assignPartitions'>;
  readonly intake: {
    open(partition: number, highestSeq: number): void;
    drain(partition: number, keep?: boolean): Promise<void>;
  };
  /**
   * Told which requests were read from the store (journal: deleted there once done), and which partitions it let
   * go; `written` resolves once the partition's writes under way have landed or failed.
   */
  readonly journal?: {
    stored(deliveries: readonly PendingDelivery[]): void;
    released(partition: number): void;
    written(partition: number): Promise<void>;
  };
  readonly scheduler: {
    hold(deliveries: readonly PendingDelivery[]): void;
    /** What is done with while a partition is read (partition-take.ts). */
    watchFinished(): FinishedWatch;
    resume(): void;
    releasePartition(partition: number, graceMs: number, handedOver: boolean): Promise<void>;
    close(): Promise<void>;
  };
  readonly consumer: PartitionSubscriber;
  /** How long a handover waits for sends in flight. */
  readonly graceMs: number;
  /**
   * How long after claiming another worker's expired lease the partition
   * is read, and then read once more: a holder that stalled may have
   * started a write just before its lease came into doubt, and it lands at
   * most this long after the lease expired (write-grace.ts). Its own
   * expired lease, this worker reads once its own writes of the partition
   * ended, and once more this long later.
   */
  readonly writeGraceMs: number;
  readonly logger: Logger;
  readonly now?: () => number;
  readonly random?: () => number;
}

/**
 * Shares delivery out among the workers (docs/delivery.md): every third of
 * a lease it beats its heartbeat, renews the leases of its partitions,
 * reads which workers live and who holds what, and follows
 * `planOwnership` — it claims the partitions assigned to it that are free,
 * and hands over those assigned to a worker that joined. The store's work
 * per round is a handful of commands on a document per worker and per
 * partition, whatever is pending.
 *
 * A partition is run (taken in and sent for) only under its lease: from
 * the claim, through the load of what is pending in it, to the release;
 * while the lease is in doubt (renewals failing for a third of it), its
 * intake and sends pause (`sendable`, `takesIn`).
 */
export class PartitionCoordinator implements PartitionGate, IntakeGate {
  readonly #options: PartitionCoordinatorOptions;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #random: () => number;
  /** Partitions this worker runs, with until when their lease is known to hold. */
  readonly #running = new Map<number, number>();
  /** Being handed over or stopped: nothing more taken in or sent. */
  readonly #leaving = new Set<number>();
  /** Claimed, its pending requests not loaded yet: renewed, but nothing taken in or sent. */
  readonly #loading = new Set<number>();
  /**
   * Each partition's claim, while it lasts: a take goes on after each wait
   * only if its claim still does. Its lease may run out while it waits for
   * the store, and the partition be let go and even claimed again, by the
   * time its read ends.
   */
  readonly #claims = new Map<number, object>();
  readonly #handovers = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  /** Lets the partitions go once their lease ran out by this worker's clock, whether or not a round ends. */
  #expiry: NodeJS.Timeout | undefined;
  /** When the last round that reached the store began. */
  #lastRound: number | undefined;
  /**
   * Until when this worker holds still (claims no partition another worker
   * held, hands none over): it could not see the pool for a while, and the
   * heartbeats it finds expired may be those of workers cut off as it was,
   * which beat again within a round. Taking their partitions would move
   * every partition twice, through the crash path.
   */
  #stillUntil = Number.NEGATIVE_INFINITY;
  #round: Promise<void> | undefined;
  #migrated = false;
  #closed = false;

  constructor(options: PartitionCoordinatorOptions) {
    this.#options = options;
    this.#log = options.logger;
    this.#now = options.now ?? Date.now;
    this.#random = options.random ?? Math.random;
  }

  /** The partitions this worker runs now (for metrics and tests). */
  get partitions(): readonly number[] {
    return [...this.#running.keys()].filter((p) => !this.#leaving.has(p)).sort((a, b) => a - b);
  }

  sendable(partition: number, now: number): boolean {
    const until = this.#running.get(partition);
    return (
      until !== undefined &&
      !this.#leaving.has(partition) &&
      !this.#loading.has(partition) &&
      now < until - this.#options.leaseMs / 3
    );
  }

  takesIn(partition: number, now: number): boolean {
    return this.sendable(partition, now);
  }

  /** This worker holds the partition's lease, not in doubt: it may write to the partition (a handover included). */
  writable(partition: number, now: number): boolean {
    const until = this.#running.get(partition);
    return until !== undefined && now < until - this.#options.leaseMs / 3;
  }

  /** Runs the first round now and the next ones every third of a lease. */
  start(): void {
    const next = () => {
      if (this.#closed) return;
      // Jittered, so that workers started together do not all write at once.
      const interval = (this.#options.leaseMs / 3) * (0.9 + 0.2 * this.#random());
      this.#timer = setTimeout(() => {
        this.#round = this.round().finally(next);
      }, interval);
      this.#timer.unref();
    };
    this.#round = this.round().finally(next);
  }

  /** One round (also called by tests): never rejects; a store that does not answer is logged and tried next round. */
  async round(): Promise<void> {
    if (this.#closed) return;
    const { me, leaseMs, leases } = this.#options;
    try {
      if (!this.#migrated) {
        const count = this.#options.partitions;
        const moved = await this.#options.deliveries.assignPartitions((userId) => partitionOf(userId, count));
        if (moved > 0)
          this.#log.info(
            { requests: moved },
            'pending notifications moved to their partition under this delivery.partitions (stored without one, or under another)',
          );
        this.#migrated = true;
      }
      const now = this.#now();
      const until = now + leaseMs;
      // A gap longer than a lease since the last round (a store that hung, a stalled process): hold still.
      if (this.#lastRound !== undefined && now - this.#lastRound > leaseMs) this.#stillUntil = now + leaseMs;
      // Side by side: a heartbeat (membership) that the store is slow to answer, or fails, must not hold back or
      // undo the renewal (the leases). One after the other, a store answering each in seconds let leases run out.
      const [beat, renewal] = await Promise.allSettled([
        leases.heartbeat(me, until),
        leases.renew(me, [...this.#running.keys()], until),
      ]);
      if (renewal.status === 'fulfilled') {
        // Only those still run: one handed over while the renewal was under way stays gone.
        for (const partition of renewal.value) if (this.#running.has(partition)) this.#running.set(partition, until);
        this.#options.scheduler.resume();
      }
      if (beat.status === 'rejected') throw beat.reason;
      if (renewal.status === 'rejected') throw renewal.reason;
      this.#lastRound = now;
      const workers = await leases.liveWorkers(now);
      const stored = await leases.leases();
      if (this.#isClosed()) return;
      const running = new Set([...this.#running.keys()].filter((p) => !this.#leaving.has(p)));
      const steps = planOwnership({ me, count: this.#options.partitions, workers, leases: stored, running, now });
      for (const partition of steps.lost) {
        this.#log.warn(
          { partition },
          'another worker took a delivery partition over (this one missed its lease): stopped',
        );
        this.#handOver(partition, false);
      }
      const still = now < this.#stillUntil;
      if (!still) for (const partition of steps.release) this.#handOver(partition, true);
      for (const partition of steps.claim) {
        if (this.#isClosed()) return;
        const previous = stored.find((lease) => lease.partition === partition)?.owner;
        // Its lease ran out, not released: a write its holder started under it may still land.
        const lapsed: Lapsed =
          previous === undefined || previous === null ? undefined : previous === me ? 'mine' : 'another';
        if (lapsed === 'another' && still) continue;
        if (!(await leases.claim(partition, me, until, now))) continue;
        const claim = {};
        this.#claims.set(partition, claim);
        this.#running.set(partition, until);
        this.#loading.add(partition);
        const taking = takePartition(this.#options, partition, lapsed, {
          holds: () => this.#holdsClaim(partition, claim),
          loaded: () => {
            this.#loading.delete(partition);
          },
          failed: () => {
            this.#loading.delete(partition);
            this.#handOver(partition, true);
          },
        });
        this.#handovers.add(taking);
        void taking.finally(() => this.#handovers.delete(taking));
      }
    } catch (error) {
      this.#log.warn({ err: loggable(error) }, 'cannot coordinate delivery partitions now; trying again next round');
      this.#stillUntil = this.#now() + leaseMs;
    }
    this.#dropExpired();
    this.#armExpiry();
  }

  /**
   * Lets go, without the store, of the partitions whose lease ran out by
   * this worker's clock (renewals failing for a whole lease): another
   * worker may hold them now, and the partition queue's single active
   * consumer would keep that worker waiting for as long as this one stays
   * subscribed.
   */
  #dropExpired(): void {
    const now = this.#now();
    for (const [partition, until] of this.#running) {
      if (now < until || this.#leaving.has(partition)) continue;
      this.#log.warn(
        { partition, worker: this.#options.me },
        'the lease of a delivery partition ran out unrenewed (the store cannot be reached): stopped',
      );
      this.#handOver(partition, false);
    }
  }

  #armExpiry(): void {
    clearTimeout(this.#expiry);
    this.#expiry = undefined;
    if (this.#closed || this.#running.size === 0) return;
    const first = Math.min(...this.#running.values());
    this.#expiry = setTimeout(
      () => {
        this.#dropExpired();
      },
      Math.max(0, first - this.#now()),
    );
    this.#expiry.unref();
  }

  /** A method, not the field: `close()` flips it while a round awaits the store. */
  #isClosed(): boolean {
    return this.#closed;
  }

  /** Whether the claim is still the partition's, and not being let go. */
  #holdsClaim(partition: number, claim: object): boolean {
    return !this.#isClosed() && this.#claims.get(partition) === claim && !this.#leaving.has(partition);
  }

  /** The partition's queue cannot be consumed here (consumer/partition-queues.ts): its lease goes back. */
  letGo(partition: number): void {
    if (this.#running.has(partition)) this.#handOver(partition, true);
  }

  /** Stops the partition: no more intake, its sends let go; with `release`, its lease given up for the next holder. */
  #handOver(partition: number, release: boolean): void {
    if (this.#leaving.has(partition)) return;
    this.#leaving.add(partition);
    const work = (async () => {
      try {
        // Drained while unsubscribing: what waits for the partition gives up, and goes back to the queue in order.
        await Promise.all([
          this.#options.consumer.unsubscribe(partition),
          this.#options.intake.drain(partition, release),
        ]);
        await this.#options.scheduler.releasePartition(partition, release ? this.#options.graceMs : 0, release);
        // After the sends let go (done ones deleted, when handed over): what the journal kept of it is the next holder's.
        this.#options.journal?.released(partition);
        if (release) {
          await this.#options.leases.release(partition, this.#options.me);
          this.#log.info({ partition, worker: this.#options.me }, 'handed a delivery partition over');
        }
      } catch (error) {
        this.#log.warn(
          { err: loggable(error), partition },
          'could not release a delivery partition: another worker takes it once its lease expires',
        );
      } finally {
        this.#running.delete(partition);
        this.#leaving.delete(partition);
        this.#loading.delete(partition);
        this.#claims.delete(partition);
      }
    })();
    this.#handovers.add(work);
    void work.finally(() => this.#handovers.delete(work));
  }

  /**
   * Stops delivering: the partition queues are let go (what was being
   * taken in is stored or returned to them), the scheduler closed (sends
   * in flight finish or are aborted, done ones deleted), then every lease
   * released and this worker's heartbeat removed, so that the others take
   * over at once. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    clearTimeout(this.#expiry);
    const { graceMs } = this.#options;
    // Bounded: with a store that does not answer, a round, the parts being taken in (their journal write) and
    // the releases would each wait on it for as long as it hangs. What is not let go in time goes back to the
    // partition queues when the connection closes, and the leases expire (the others take over a lease later).
    const partitions = [...this.#running.keys()];
    const letGo = (async () => {
      await this.#round;
      for (const partition of this.#running.keys()) this.#leaving.add(partition);
      await Promise.all(
        [...this.#running.keys()].flatMap((partition) => [
          this.#options.consumer.unsubscribe(partition),
          this.#options.intake.drain(partition),
        ]),
      );
      await Promise.allSettled([...this.#handovers]);
    })();
    if (!(await settledWithin([letGo], graceMs)))
      this.#log.warn(
        { partitions, graceMs },
        'delivery partitions not let go in time at shutdown (the store does not answer?): their parts go back to the queues with the connection',
      );
    await this.#options.scheduler.close();
    const released = (async () => {
      for (const partition of partitions) {
        await this.#options.leases.release(partition, this.#options.me).catch((error: unknown) => {
          this.#log.warn({ err: loggable(error), partition }, 'could not release a delivery partition at shutdown');
        });
      }
      await this.#options.leases.leave(this.#options.me).catch(() => undefined);
    })();
    if (!(await settledWithin([released], graceMs)))
      this.#log.warn(
        { partitions, graceMs },
        'delivery leases not released in time at shutdown: the other workers take these partitions once they expire',
      );
    this.#running.clear();
    this.#claims.clear();
  }
}
