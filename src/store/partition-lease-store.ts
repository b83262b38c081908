/**
 * Who delivers which partition (docs/delivery.md): the workers that take
 * part in delivery, each with a heartbeat, and one lease per partition.
 * Both collections hold a document per worker or per partition, so every
 * call here costs the same however many notifications are pending.
 */

/** A partition's lease; `owner` null: released, for anyone to claim at once. */
export interface PartitionLease {
  readonly partition: number;
  readonly owner: string | null;
  /** ms; the lease holds up to and including it. */
  readonly until: number;
}

/** A live worker's heartbeat. */
export interface WorkerBeat {
  readonly worker: string;
  /** The `delivery.partitions` it runs with; absent: a worker of a version that did not say. */
  readonly partitions?: number | undefined;
}

export interface PartitionLeaseStore {
  /** Creates what the queries below rely on. Idempotent. */
  ensureIndexes(): Promise<void>;

  /**
   * `worker` takes part in delivery until `until` (ms), unless it beats
   * again, partitioning users into `partitions` (the pool must agree on it).
   */
  heartbeat(worker: string, until: number, partitions?: number): Promise<void>;

  /** The workers whose heartbeat holds at `now`. */
  liveWorkers(now: number): Promise<readonly string[]>;

  /** The same, each with the partition count it beat with. */
  liveBeats(now: number): Promise<readonly WorkerBeat[]>;

  /** `worker` leaves (a clean shutdown): the others share its partitions out at once. */
  leave(worker: string): Promise<void>;

  /** Every partition lease stored (a partition never claimed has none). */
  leases(): Promise<readonly PartitionLease[]>;

  /**
   * Takes the partition's lease until `until` when nobody holds it at
   * `now` (never claimed, released, or expired); true when taken. Two
   * workers claiming at once: one wins.
   */
  claim(partition: number, owner: string, until: number, now: number): Promise<boolean>;

  /** Extends the leases `owner` still holds among `partitions`; returns those it holds. */
  renew(owner: string, partitions: readonly number[], until: number): Promise<readonly number[]>;

  /** Gives the partition's lease up, if `owner` holds it. */
  release(partition: number, owner: string): Promise<void>;
}
