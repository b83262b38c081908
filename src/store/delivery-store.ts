/**
 * The durable side of push delivery (docs/delivery.md): every gateway request
 * a `notify` message planned, kept until it is delivered, failed for good,
 * given up, dropped or expired, so that a worker crash loses none of them.
 *
 * A pending request belongs to one partition (its user's,
 * delivery/partitions.ts) and to one device queue (`key`: one user's
 * pushers on one gateway URL with one format, the unit a request is sent
 * for), and is sent only after every earlier one of its queue (`seq`
 * order). Requests carry no lease of their own: the worker that holds the
 * partition's lease (partition-lease-store.ts) is the only one that writes
 * or sends them, so a renewal costs the same whatever is pending.
 */

/** One gateway request waiting to be delivered. */
export interface PendingDelivery {
  /** `<notify id>/<device queue tag>[.<n>]`: the same `notify` message always plans the same IDs, which makes its intake idempotent. */
  readonly id: string;
  /** The partition of `userId`: whoever holds its lease sends it. */
  readonly partition: number;
  /** The device queue: one user's pushers with one URL and one format. */
  readonly key: string;
  /** Intake order: within a key, lower first. */
  readonly seq: number;
  readonly userId: string;
  /** Where the request goes: the pushers' `data.url`, exactly. */
  readonly url: string;
  /**
   * The request body: JSON text as it is sent (an event's keys may be anything, even `$`-prefixed), or, for
   * a request planned by this worker, what the text is built from, encoded when it is sent or stored: a
   * waiting request does not hold its text (delivery/request-body.ts).
   */
  readonly body: string | { encodeBody(): string };
  /** The pushers it names (app ID and pushkey), to find the one a rejected pushkey means. */
  readonly devices: readonly PendingDevice[];
  /**
   * When the `notify` was published (ms; the publisher's `timestamp`, else
   * when the router first took it), not when a partition took it in: the
   * start of its publish-to-delivery latency and of its maximum age.
   */
  readonly acceptedAt: number;
  /** A badge update (a `notify` without `event_id`): of several waiting for one device, only the newest is sent. */
  readonly countsOnly?: boolean | undefined;
  /** The retry state of the request while it fails (absent: never failed). */
  readonly retry?: RetryState | undefined;
}

export interface PendingDevice {
  readonly appId: string;
  readonly pushkey: string;
}

/** Kept across a crash, so that a device's backoff and give-up window carry on where they were. */
export interface RetryState {
  /** The device's consecutive failed attempts. */
  readonly failures: number;
  /** When this request first failed (ms): its give-up window starts there. */
  readonly firstFailedAt: number;
  /** Not sent again before this (ms). */
  readonly retryAt: number;
}

/** What the intake of one `notify` message answered, kept for its `messageId` to be answered again. */
export interface AcceptedNotify {
  readonly id: string;
  readonly recipients: number;
  readonly devices: number;
  readonly acceptedAt: number;
}

export interface DeliveryStore {
  /** Creates the indexes the queries below rely on. Idempotent. */
  ensureIndexes(): Promise<void>;

  /**
   * Requests whose partition was not computed with this store's partition
   * count (stored before partitions existed, before the count was stored
   * with each request, or under another `delivery.partitions`) get the
   * partition of their user, `partitionOfUser` computing it with that
   * count; returns how many. A store given no count moves only requests
   * without a partition. Idempotent, and a no-op once none is left.
   */
  assignPartitions(partitionOfUser: (userId: string) => number): Promise<number>;

  /** The intake recorded under this ID, if any (`messageId` idempotency). */
  findAccepted(id: string): Promise<AcceptedNotify | undefined>;

  /**
   * What is known of a part before it is taken in: its record, if it was
   * secured; otherwise the requests of it already done with (`markDone`),
   * which a part taken in again (after a crash) does not send again.
   */
  findProgress(id: string): Promise<{ readonly accepted?: AcceptedNotify; readonly done: ReadonlySet<string> }>;

  /** Requests done with, by the ID of the part that planned them; kept as long as the records. */
  markDone(doneByPart: ReadonlyMap<string, readonly string[]>): Promise<void>;

  /** The intakes recorded under these IDs, those there are (a router waiting for its parts to be taken in). */
  findAcceptedMany(ids: readonly string[]): Promise<readonly AcceptedNotify[]>;

  /**
   * Stores the requests of one `notify` message part, then its record, so
   * that a record means every request is stored. Idempotent: requests and
   * record already stored (a redelivered message after a crash) are left as
   * they are.
   */
  accept(notify: AcceptedNotify, deliveries: readonly PendingDelivery[]): Promise<void>;

  /** `accept` for several parts at once: every request, then every record. */
  acceptAll(notifies: readonly AcceptedNotify[], deliveries: readonly PendingDelivery[]): Promise<void>;

  /** Every pending request of a partition, oldest first per key: what a worker that takes the partition over holds. */
  listPartition(partition: number): Promise<readonly PendingDelivery[]>;

  /** The requests are done with (delivered, failed for good, given up, dropped, expired): deleted. */
  remove(ids: readonly string[]): Promise<void>;

  /** Records a request's retry state. */
  saveRetry(id: string, retry: RetryState): Promise<void>;
}
