import { MongoBulkWriteError, type Collection, type Db, type WriteError } from 'mongodb';
import type { AcceptedNotify, DeliveryStore, Lease, PendingDelivery, RetryState } from './delivery-store.js';
import { classifyMongoError, DUPLICATE_KEY, isDuplicateKey } from './mongo-errors.js';

/** One gateway request in the pending collection (`PendingDelivery` with the holder's lease). */
export interface PendingDeliveryDocument {
  /** `PendingDelivery.id`: a redelivered `notify` inserts the same IDs, which then collide. */
  _id: string;
  key: string;
  seq: number;
  user_id: string;
  url: string;
  body_json: string;
  devices: { app_id: string; pushkey: string }[];
  /** ms */
  accepted_at: number;
  /** null: released by a worker that shut down cleanly, for anyone to claim. */
  owner: string | null;
  /** ms; the lease is live up to and including it. */
  lease_until: number;
  /** The takeover that gave it to `owner` last, to read back what one claim took. */
  claim?: string;
  retry?: { failures: number; first_failed_at: number; retry_at: number };
}

/** The record of one `notify` taken in; a Date, for the TTL index to expire it. */
export interface AcceptedNotifyDocument {
  _id: string;
  recipients: number;
  devices: number;
  accepted_at: Date;
}

/** The recovery lock: whoever holds it is the only worker taking over expired requests. */
interface RecoveryLockDocument {
  _id: string;
  token: string;
  /** ms */
  until: number;
}

export interface MongoDeliveryStoreOptions {
  readonly pendingCollection: string;
  readonly acceptedCollection: string;
  /** How long the record of a `notify` is kept (its `messageId` answered again), from its intake. */
  readonly acceptedRetentionSeconds: number;
  /** The server gives up an operation after this (`maxTimeMS`); 0 or absent: no limit. */
  readonly operationTimeoutMs?: number | undefined;
}

const RECOVERY_LOCK_ID = 'recovery';
/**
 * How long the recovery lock holds at most: a worker that dies holding it
 * delays recovery by this much. A takeover is one `updateMany`, far
 * shorter — on the test stand-in, which updates some 10,000 documents a
 * second, a dead worker's backlog of 100,000 requests still fits.
 */
const RECOVERY_LOCK_MS = 30_000;
/** How often an intake that must take a dead worker's requests over asks for the lock again. */
const LOCK_POLL_MS = 25;
/** IDs per `deleteMany`: a bounded command, whatever the number of IDs removed. */
const REMOVE_CHUNK = 1_000;
const BY_KEY_THEN_SEQ = { key: 1, seq: 1 } as const;
/**
 * Keys a query lists in `$in` at most; beyond, it reads wider (every
 * request, or the worker's) and keeps those of the keys itself. The test
 * stand-in matches `$in` by going through the list for every document
 * (10,000 keys against 30,000 requests: 20 s, against 0.5 s for reading
 * them all); on MongoDB either is an index scan.
 */
const IN_LIST_KEYS = 256;

/**
 * The delivery store on MongoDB without transactions (the test stand-in has
 * none): every step is a single-collection command, ordered so that a crash
 * between two of them leaves nothing lost — requests before their intake
 * record, and a retried intake fills in what is missing.
 *
 * Two workers must never take requests of one key apart: takeovers of
 * expired leases (`claimExpired`, and an intake whose keys were a dead
 * worker's) run under one short recovery lock, a document of
 * `<pendingCollection>_locks`.
 */
export class MongoDeliveryStore implements DeliveryStore {
  readonly #pending: Collection<PendingDeliveryDocument>;
  readonly #accepted: Collection<AcceptedNotifyDocument>;
  readonly #locks: Collection<RecoveryLockDocument>;
  readonly #retentionSeconds: number;
  /** Spread into every command's options. */
  readonly #limit: { maxTimeMS?: number };

  constructor(db: Db, options: MongoDeliveryStoreOptions) {
    this.#pending = db.collection<PendingDeliveryDocument>(options.pendingCollection);
    this.#accepted = db.collection<AcceptedNotifyDocument>(options.acceptedCollection);
    this.#locks = db.collection<RecoveryLockDocument>(`${options.pendingCollection}_locks`);
    this.#retentionSeconds = options.acceptedRetentionSeconds;
    const timeout = options.operationTimeoutMs ?? 0;
    this.#limit = timeout > 0 ? { maxTimeMS: timeout } : {};
  }

  async ensureIndexes(): Promise<void> {
    await guard(async () => {
      await this.#pending.createIndexes(
        [
          // listHeld and what an intake returns: one owner's requests, in order.
          { key: { owner: 1, key: 1, seq: 1 }, name: 'pending_owner_key_seq' },
          // An intake's holders of its keys, and the takeover of a key.
          { key: { key: 1, seq: 1 }, name: 'pending_key_seq' },
          // claimExpired.
          { key: { lease_until: 1 }, name: 'pending_lease_until' },
        ],
        this.#limit,
      );
      await this.#accepted.createIndex(
        { accepted_at: 1 },
        { name: 'accepted_ttl', expireAfterSeconds: this.#retentionSeconds, ...this.#limit },
      );
    });
  }

  async findAccepted(id: string): Promise<AcceptedNotify | undefined> {
    const doc = await guard(async () => this.#accepted.findOne({ _id: id }, this.#limit));
    if (doc === null) return undefined;
    return { id: doc._id, recipients: doc.recipients, devices: doc.devices, acceptedAt: doc.accepted_at.getTime() };
  }

  async accept(
    notify: AcceptedNotify,
    deliveries: readonly PendingDelivery[],
    lease: Lease,
    now: number,
  ): Promise<readonly PendingDelivery[]> {
    const keys = [...new Set(deliveries.map((d) => d.key))];
    let answer: readonly PendingDelivery[] | undefined = [];
    if (keys.length > 0) {
      let holders = await this.#holdersOf(keys, now);
      if (holders.expired.size === 0) {
        const { live } = holders;
        const inserted = await this.#insert(deliveries, live, lease);
        // Every request went in, to its key's live holder or to `lease`: the worker
        // holds these new ones, and the older ones of its keys it held already. No
        // query reads them back (costly for many keys on the test stand-in, whose
        // `$in` is a scan; bodies and all on MongoDB). When some were stored before
        // (a redelivered message), what is stored is read back instead.
        answer = inserted
          ? deliveries
              .filter((delivery) => (live.get(delivery.key)?.owner ?? lease.owner) === lease.owner)
              .sort(byKeyThenSeq)
          : undefined;
      } else {
        // A dead worker's requests go along with the new ones: under the lock, so
        // that a concurrent claim cannot take part of the key; the holders are
        // read again under it, as the claim may just have taken them.
        const lock = await this.#lockWaiting(lease.owner, now);
        try {
          holders = await this.#holdersOf(keys, now);
          await this.#insert(deliveries, holders.live, lease);
          if (holders.expired.size > 0) {
            await guard(async () =>
              this.#pending.updateMany(
                { key: { $in: [...holders.expired] }, lease_until: { $lt: now } },
                { $set: { owner: lease.owner, lease_until: lease.until } },
                this.#limit,
              ),
            );
          }
        } finally {
          await this.#unlock(lock);
        }
        answer = undefined;
      }
    }
    // After the requests: a record means they are all stored.
    try {
      await guard(async () =>
        this.#accepted.insertOne(
          {
            _id: notify.id,
            recipients: notify.recipients,
            devices: notify.devices,
            accepted_at: new Date(notify.acceptedAt),
          },
          this.#limit,
        ),
      );
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
    }
    if (answer !== undefined) return answer;
    if (keys.length <= IN_LIST_KEYS) return this.#find({ owner: lease.owner, key: { $in: keys } });
    const wanted = new Set(keys);
    return (await this.#find({ owner: lease.owner })).filter((delivery) => wanted.has(delivery.key));
  }

  async renew(lease: Lease): Promise<number> {
    const result = await guard(async () =>
      this.#pending.updateMany({ owner: lease.owner }, { $set: { lease_until: lease.until } }, this.#limit),
    );
    return result.matchedCount;
  }

  async claimExpired(lease: Lease, now: number): Promise<readonly PendingDelivery[]> {
    const lock = await this.#tryLock(lease.owner, now);
    // Not acquired: another worker is taking them over now.
    if (lock === undefined) return [];
    // Marked, so that only what this claim took is read back (not everything the worker holds, bodies and all).
    const claim = `${lease.owner}#${String(now)}`;
    let taken: number;
    try {
      const result = await guard(async () =>
        this.#pending.updateMany(
          { lease_until: { $lt: now } },
          { $set: { owner: lease.owner, lease_until: lease.until, claim } },
          this.#limit,
        ),
      );
      taken = result.matchedCount;
    } finally {
      await this.#unlock(lock);
    }
    return taken === 0 ? [] : this.#find({ owner: lease.owner, claim });
  }

  async listHeld(owner: string): Promise<readonly PendingDelivery[]> {
    return this.#find({ owner });
  }

  async remove(ids: readonly string[]): Promise<void> {
    for (let start = 0; start < ids.length; start += REMOVE_CHUNK) {
      const chunk = ids.slice(start, start + REMOVE_CHUNK);
      await guard(async () => this.#pending.deleteMany({ _id: { $in: chunk } }, this.#limit));
    }
  }

  async saveRetry(id: string, retry: RetryState): Promise<void> {
    await guard(async () =>
      this.#pending.updateOne(
        { _id: id },
        {
          $set: {
            retry: { failures: retry.failures, first_failed_at: retry.firstFailedAt, retry_at: retry.retryAt },
          },
        },
        this.#limit,
      ),
    );
  }

  async release(owner: string): Promise<void> {
    // Expired at once (0 is before any `now`): the next claim takes them.
    await guard(async () =>
      this.#pending.updateMany({ owner }, { $set: { owner: null, lease_until: 0 } }, this.#limit),
    );
  }

  /**
   * Of these keys, the live holder of each that has one, and those whose
   * requests' leases all expired (a dead worker's, or released). One query
   * on the `key` index (for many keys, of every request: `IN_LIST_KEYS`);
   * it reads three fields of the keys' requests, which the backlog cap keeps
   * few per key.
   */
  async #holdersOf(keys: readonly string[], now: number): Promise<{ live: Map<string, Lease>; expired: Set<string> }> {
    const docs = await guard(async () =>
      this.#pending
        .find(keys.length <= IN_LIST_KEYS ? { key: { $in: [...keys] } } : {}, {
          projection: { _id: 0, key: 1, owner: 1, lease_until: 1 },
          ...this.#limit,
        })
        .toArray(),
    );
    const wanted = new Set(keys);
    const live = new Map<string, Lease>();
    const expired = new Set<string>();
    for (const { key, owner, lease_until: until } of docs) {
      if (!wanted.has(key)) continue;
      if (owner !== null && until >= now) {
        // Leases of one key are one holder's; the latest is the one it renewed last.
        const known = live.get(key);
        if (known === undefined || known.until < until) live.set(key, { owner, until });
      } else {
        expired.add(key);
      }
    }
    for (const key of live.keys()) expired.delete(key);
    return { live, expired };
  }

  /**
   * The new requests, each to its key's live holder or else to `lease`, in
   * one `insertMany` (the driver splits it into as few commands as the
   * server takes). Unordered, so that requests already stored (a
   * redelivered `notify`) fail alone on their `_id` and the rest go in.
   * False when some were stored before.
   */
  async #insert(
    deliveries: readonly PendingDelivery[],
    live: ReadonlyMap<string, Lease>,
    lease: Lease,
  ): Promise<boolean> {
    const docs = deliveries.map((delivery) => toDocument(delivery, live.get(delivery.key) ?? lease));
    try {
      await this.#pending.insertMany(docs, { ordered: false, ...this.#limit });
      return true;
    } catch (error) {
      if (!onlyDuplicateKeys(error)) throw classifyMongoError(error);
      return false;
    }
  }

  async #find(filter: { owner: string; key?: { $in: string[] }; claim?: string }): Promise<readonly PendingDelivery[]> {
    const docs = await guard(async () => this.#pending.find(filter, this.#limit).sort(BY_KEY_THEN_SEQ).toArray());
    return docs.map(fromDocument);
  }

  /** The recovery lock if it is free (or its holder's time ran out); undefined if another worker holds it. */
  async #tryLock(owner: string, now: number): Promise<string | undefined> {
    const token = `${owner}/${now}/${Math.random().toString(36).slice(2)}`;
    try {
      const doc = await guard(async () =>
        this.#locks.findOneAndUpdate(
          { _id: RECOVERY_LOCK_ID, until: { $lt: now } },
          { $set: { token, until: now + RECOVERY_LOCK_MS } },
          { upsert: true, returnDocument: 'after', projection: { token: 1 }, ...this.#limit },
        ),
      );
      return doc?.token === token ? token : undefined;
    } catch (error) {
      // The lock exists and is held: the upsert collided with it.
      if (isDuplicateKey(error)) return undefined;
      throw error;
    }
  }

  /**
   * The recovery lock, waited for: a claim holds it for one `updateMany`.
   * The caller's clock moves on by the time waited, so that a lock whose
   * holder died is taken once its time ran out.
   */
  async #lockWaiting(owner: string, now: number): Promise<string> {
    const started = Date.now();
    for (;;) {
      const token = await this.#tryLock(owner, now + (Date.now() - started));
      if (token !== undefined) return token;
      await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
    }
  }

  async #unlock(token: string): Promise<void> {
    await guard(async () => this.#locks.deleteOne({ _id: RECOVERY_LOCK_ID, token }, this.#limit));
  }
}

/** An unordered insert whose every failure is a duplicate `_id`: those requests were stored before. */
function onlyDuplicateKeys(error: unknown): boolean {
  if (!(error instanceof MongoBulkWriteError) || error.writeConcernError !== undefined) return false;
  const writeErrors: readonly WriteError[] = Array.isArray(error.writeErrors) ? error.writeErrors : [error.writeErrors];
  return writeErrors.length > 0 && writeErrors.every((writeError) => writeError.code === DUPLICATE_KEY);
}

/** Oldest first per key; keys in code-point order, as the server sorts them. */
function byKeyThenSeq(a: PendingDelivery, b: PendingDelivery): number {
  if (a.key !== b.key) return a.key < b.key ? -1 : 1;
  return a.seq - b.seq;
}

function toDocument(delivery: PendingDelivery, holder: Lease): PendingDeliveryDocument {
  return {
    _id: delivery.id,
    key: delivery.key,
    seq: delivery.seq,
    user_id: delivery.userId,
    url: delivery.url,
    body_json: delivery.bodyJson,
    devices: delivery.devices.map((device) => ({ app_id: device.appId, pushkey: device.pushkey })),
    accepted_at: delivery.acceptedAt,
    owner: holder.owner,
    lease_until: holder.until,
    ...(delivery.retry === undefined
      ? {}
      : {
          retry: {
            failures: delivery.retry.failures,
            first_failed_at: delivery.retry.firstFailedAt,
            retry_at: delivery.retry.retryAt,
          },
        }),
  };
}

function fromDocument(doc: PendingDeliveryDocument): PendingDelivery {
  const delivery: PendingDelivery = {
    id: doc._id,
    key: doc.key,
    seq: doc.seq,
    userId: doc.user_id,
    url: doc.url,
    bodyJson: doc.body_json,
    devices: doc.devices.map((device) => ({ appId: device.app_id, pushkey: device.pushkey })),
    acceptedAt: doc.accepted_at,
  };
  const { retry } = doc;
  if (retry === undefined) return delivery;
  return {
    ...delivery,
    retry: { failures: retry.failures, firstFailedAt: retry.first_failed_at, retryAt: retry.retry_at },
  };
}

async function guard<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    throw classifyMongoError(error);
  }
}
