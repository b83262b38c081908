/**
 * The durable side of push delivery (docs/delivery.md): every gateway request
 * a `notify` message planned, kept until it is delivered, failed for good,
 * given up or dropped, so that a worker crash loses none of them.
 *
 * A pending request belongs to one device queue (`key`: one user's pushers
 * on one gateway URL with one format, the unit a request is sent for) and is
 * sent only after every earlier one of its queue (`seq` order). At any time a
 * request is held by one worker (`owner`) under a lease it renews; a worker
 * that dies stops renewing, and once the lease has expired another worker
 * claims the request and carries on where the dead one stopped.
 */

/** One gateway request waiting to be delivered. */
export interface PendingDelivery {
  /** `<notify id>/<n>`: the same `notify` message always plans the same IDs, which makes its intake idempotent. */
  readonly id: string;
  /** The device queue: one user's pushers with one URL and one format. */
  readonly key: string;
  /** Intake order: within a key, lower first. */
  readonly seq: number;
  readonly userId: string;
  /** Where the request goes: the pushers' `data.url`, exactly. */
  readonly url: string;
  /** The request body, JSON text, exactly as it is sent (an event's keys may be anything, even `$`-prefixed). */
  readonly bodyJson: string;
  /** The pushers it names (app ID and pushkey), to find the one a rejected pushkey means. */
  readonly devices: readonly PendingDevice[];
  /** When the worker accepted the `notify` (ms): the start of its publish-to-delivery latency. */
  readonly acceptedAt: number;
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

/** A worker's hold on requests: until `until` (ms), nobody else takes them. */
export interface Lease {
  readonly owner: string;
  readonly until: number;
}

export interface DeliveryStore {
  /** Creates the indexes the queries below rely on. Idempotent. */
  ensureIndexes(): Promise<void>;

  /** The intake recorded under this ID, if any (`messageId` idempotency). */
  findAccepted(id: string): Promise<AcceptedNotify | undefined>;

  /**
   * Stores the requests of one `notify` message, then its record, so that a
   * record means every request is stored. Idempotent: requests and record
   * already stored (a redelivered message after a crash) are left as they
   * are. Each request goes to the lease holder of its key when the key
   * already has requests held under a live lease (they must go first, and
   * in one worker's hands); otherwise to `lease`, which then also takes any
   * request of that key whose lease expired (a dead worker's), so that the
   * key is not split. Returns, oldest first per key, at least the new
   * requests held under `lease` and the ones taken over; it may also return
   * older requests of those keys that `lease.owner` held already (the
   * worker ignores what it holds).
   */
  accept(
    notify: AcceptedNotify,
    deliveries: readonly PendingDelivery[],
    lease: Lease,
    now: number,
  ): Promise<readonly PendingDelivery[]>;

  /** Extends the lease of every request `lease.owner` holds; returns how many that is. */
  renew(lease: Lease): Promise<number>;

  /**
   * Takes over every request whose lease expired before `now` (their
   * holder died or stalled), unless another worker is taking them over at
   * the same moment; returns the requests it took, oldest first per key
   * (none when it took none: the worker already has the rest).
   */
  claimExpired(lease: Lease, now: number): Promise<readonly PendingDelivery[]>;

  /** Every request `owner` holds, oldest first per key. */
  listHeld(owner: string): Promise<readonly PendingDelivery[]>;

  /** The requests are done with (delivered, failed for good, given up, dropped): deleted. */
  remove(ids: readonly string[]): Promise<void>;

  /** Records a request's retry state. */
  saveRetry(id: string, retry: RetryState): Promise<void>;

  /** Lets go of everything `owner` holds, for another worker to take at once (a clean shutdown). */
  release(owner: string): Promise<void>;
}
