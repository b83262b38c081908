import type { Logger } from '../logging/logger.js';
import type { BackoffPolicy } from '../retry/backoff.js';
import { retryUntilDone } from '../retry/retry-until-done.js';
import type { PartitionLease, PartitionLeaseStore, WorkerBeat } from '../store/partition-lease-store.js';

/** Where docs/operations.md tells how to change `delivery.partitions`: named by every refusal. */
export const PARTITIONS_PROCEDURE = 'docs/operations.md, "Changing delivery.partitions"';

/**
 * Live workers partition users with another `delivery.partitions` than
 * this one: the pool would deliver a user's notifications from two
 * partitions at once (out of order), or from none.
 */
export class PartitionCountMismatchError extends Error {
  readonly disagreeing: readonly WorkerBeat[];

  constructor(partitions: number, disagreeing: readonly WorkerBeat[]) {
    const others = disagreeing.map((beat) => `${beat.worker} (${String(beat.partitions)})`).join(', ');
    super(
      `delivery.partitions is ${String(partitions)} here, but live workers run with another count: ${others}. ` +
        `Every worker of a pool must run with the same count; change it only as ${PARTITIONS_PROCEDURE} says.`,
    );
    this.name = 'PartitionCountMismatchError';
    this.disagreeing = disagreeing;
  }
}

export interface PartitionCountGuardOptions {
  /** This worker's `delivery.partitions`. */
  readonly partitions: number;
  readonly logger: Logger;
  readonly now?: () => number;
}

/**
 * The partition leases as the coordinator sees them, with this worker's
 * partition count in each heartbeat and checked against every live
 * worker's. While the live workers disagree, reading who is live fails,
 * so the coordinator plans nothing that round: it claims and hands over
 * nothing (the partitions it runs it keeps renewing), which delivers
 * nothing new rather than anything wrongly. A worker of a version that
 * did not say its count is taken to agree.
 */
export class PartitionCountGuard implements PartitionLeaseStore {
  readonly #inner: PartitionLeaseStore;
  readonly #partitions: number;
  readonly #log: Logger;
  readonly #now: () => number;

  constructor(inner: PartitionLeaseStore, options: PartitionCountGuardOptions) {
    this.#inner = inner;
    this.#partitions = options.partitions;
    this.#log = options.logger;
    this.#now = options.now ?? Date.now;
  }

  /**
   * At start, before this worker beats: throws `PartitionCountMismatchError`
   * when a live worker runs with another count (the worker does not
   * start), retrying while the store does not answer.
   */
  async refuseMismatch(options: { readonly signal: AbortSignal; readonly backoff: BackoffPolicy }): Promise<void> {
    const disagreeing = await retryUntilDone(async () => this.disagreeing(this.#now()), {
      policy: options.backoff,
      signal: options.signal,
      onFailure: (error, attempt, retryInMs) => {
        this.#log.warn({ err: error, attempt, retryInMs }, 'cannot read the delivery pool; retrying');
      },
    });
    if (disagreeing !== undefined && disagreeing.length > 0)
      throw new PartitionCountMismatchError(this.#partitions, disagreeing);
  }

  /** The live workers whose count is another one (none: the pool agrees with this worker). */
  async disagreeing(now: number): Promise<readonly WorkerBeat[]> {
    return this.#disagreeingOf(await this.#inner.liveBeats(now));
  }

  async ensureIndexes(): Promise<void> {
    await this.#inner.ensureIndexes();
  }

  async heartbeat(worker: string, until: number): Promise<void> {
    await this.#inner.heartbeat(worker, until, this.#partitions);
  }

  async liveWorkers(now: number): Promise<readonly string[]> {
    return (await this.liveBeats(now)).map((beat) => beat.worker);
  }

  async liveBeats(now: number): Promise<readonly WorkerBeat[]> {
    const beats = await this.#inner.liveBeats(now);
    const disagreeing = this.#disagreeingOf(beats);
    if (disagreeing.length > 0) {
      const error = new PartitionCountMismatchError(this.#partitions, disagreeing);
      this.#log.error({ partitions: this.#partitions, disagreeing }, error.message);
      throw error;
    }
    return beats;
  }

  #disagreeingOf(beats: readonly WorkerBeat[]): readonly WorkerBeat[] {
    return beats.filter((beat) => beat.partitions !== undefined && beat.partitions !== this.#partitions);
  }

  async leave(worker: string): Promise<void> {
    await this.#inner.leave(worker);
  }

  async leases(): Promise<readonly PartitionLease[]> {
    return this.#inner.leases();
  }

  async claim(partition: number, owner: string, until: number, now: number): Promise<boolean> {
    return this.#inner.claim(partition, owner, until, now);
  }

  async renew(owner: string, partitions: readonly number[], until: number): Promise<readonly number[]> {
    return this.#inner.renew(owner, partitions, until);
  }

  async release(partition: number, owner: string): Promise<void> {
    await this.#inner.release(partition, owner);
  }
}
