import type { StoredPusher } from '../pushers/pusher.js';
import type { PusherLookup } from './pusher-lookup.js';

export interface CachedPusherLookupOptions {
  /** Most estimated bytes of pusher lists kept (`estimateBytes`). */
  readonly maxBytes: number;
  /** Most users kept, users without pushers included. */
  readonly maxEntries: number;
  /**
   * A list read longer ago than this is read again, change event or not:
   * the bound on how long a change that no event announced goes unseen
   * (see the class comment). Counted, like `RulesetCache`'s, from the start
   * of the read that produced it.
   */
  readonly maxStalenessMs: number;
  /** The clock the age is read on (`Date.now`). */
  readonly now?: () => number;
  /**
   * Resolves once the change events queued for this worker are applied
   * (`ChangeSubscription.changesApplied`): a lookup that would serve a kept
   * list waits for it, so no `notify` sent after a pusher write's reply
   * goes by the list from before that write. Absent: kept lists are
   * served at once.
   */
  readonly changesApplied?: () => Promise<void>;
}

/** Counters for the metrics: `hits` and `misses` only grow; `size` and `bytes` are what is kept now. */
export interface CachedPusherLookupStats {
  readonly hits: number;
  readonly misses: number;
  readonly size: number;
  readonly bytes: number;
}

interface Entry {
  readonly pushers: readonly StoredPusher[];
  readonly bytes: number;
  /** When the read that produced it started: the age of the data. */
  readonly readAt: number;
}

/** What a user's entry costs beside its pushers: the map entry, the key, the list, the read time (a boxed double). */
const ENTRY_OVERHEAD = 144;
/** What a pusher object costs beside its strings. */
const PUSHER_OVERHEAD = 160;

/**
 * An estimate of what a user's list takes in memory: strings at two bytes
 * a character (V8 keeps most as one, so it errs high), `data` as its JSON
 * text, and a fixed cost per object.
 */
export function estimateBytes(userId: string, pushers: readonly StoredPusher[]): number {
  let bytes = ENTRY_OVERHEAD + 2 * userId.length;
  for (const p of pushers) {
    const text =
      p.user_id.length +
      p.app_id.length +
      p.pushkey.length +
      p.kind.length +
      p.app_display_name.length +
      p.device_display_name.length +
      p.lang.length +
      (p.profile_tag?.length ?? 0) +
      (p.device_id?.length ?? 0) +
      JSON.stringify(p.data).length;
    bytes += PUSHER_OVERHEAD + 2 * text;
  }
  return bytes;
}

/**
 * The pushers of recently pushed users, in memory, in front of the store
 * (`PusherLookup`): a `notify` fan-out to users it knows reads nothing from
 * the store. Users without pushers are kept too, as empty lists. Bounded by
 * `maxEntries` and by `maxBytes` of estimated size; the least recently used
 * go first.
 *
 * Correctness rests on the change events: `pushersChanged(userId)` drops a
 * user (an `m.pushers` change event, or a pusher this worker removed), and
 * `clear()` drops everyone (the change-event subscription was lost, so
 * events may have been missed). A read under way when either comes for its
 * user is answered but not kept: each read takes the count of changes when
 * it starts, and is kept only if no change of its user (and no `clear`)
 * came since. A few changes have no event (an import run with
 * `--no-events`, a worker that died between a write and its event's
 * confirm, a rejected pusher whose event could not be published): no list
 * older than `maxStalenessMs` is served, which bounds those.
 *
 * Not a `RulesetCache`, which bounds age the same way: that one remembers
 * each invalidation for the whole staleness bound; this one remembers
 * changes only while reads are under way.
 */
export class CachedPusherLookup implements PusherLookup {
  readonly #inner: PusherLookup;
  readonly #maxBytes: number;
  readonly #maxEntries: number;
  readonly #maxStalenessMs: number;
  readonly #now: () => number;
  readonly #changesApplied: (() => Promise<void>) | undefined;
  /** Insertion order is recency order: the first key is the least recently used. */
  readonly #entries = new Map<string, Entry>();
  #bytes = 0;
  #hits = 0;
  #misses = 0;
  /** Changes (`pushersChanged`, `clear`) so far: what a read's ticket is taken from. */
  #changes = 0;
  #clearedAt = 0;
  /** The change count of each user's latest change, kept while reads are under way. */
  readonly #changedAt = new Map<string, number>();
  #readsUnderWay = 0;

  constructor(inner: PusherLookup, options: CachedPusherLookupOptions) {
    this.#inner = inner;
    this.#maxBytes = options.maxBytes;
    this.#maxEntries = options.maxEntries;
    this.#maxStalenessMs = options.maxStalenessMs;
    this.#now = options.now ?? Date.now;
    this.#changesApplied = options.changesApplied;
  }

  get stats(): CachedPusherLookupStats {
    return { hits: this.#hits, misses: this.#misses, size: this.#entries.size, bytes: this.#bytes };
  }

  async listPushers(userId: string): Promise<readonly StoredPusher[]> {
    const caughtUp = this.#caughtUp([userId]);
    const cached = caughtUp === true || (await caughtUp) ? this.#get(userId) : undefined;
    if (cached !== undefined) return cached;
    return this.#read(async () => {
      const pushers = await this.#inner.listPushers(userId);
      return new Map([[userId, pushers]]);
    }).then((read) => read.get(userId) ?? []);
  }

  async listPushersOfUsers(userIds: readonly string[]): Promise<ReadonlyMap<string, readonly StoredPusher[]>> {
    const found = new Map<string, readonly StoredPusher[]>();
    const missing: string[] = [];
    const caughtUp = this.#caughtUp(userIds);
    // Awaited only when there is something to wait for: a read of users not kept starts in this turn.
    const useKept = caughtUp === true || (await caughtUp);
    const now = this.#now();
    for (const userId of userIds) {
      if (found.has(userId)) continue;
      const cached = useKept ? this.#get(userId, now) : undefined;
      if (cached === undefined) {
        if (!missing.includes(userId)) missing.push(userId);
      } else found.set(userId, cached);
    }
    const read =
      missing.length === 0 ? new Map() : await this.#read(async () => this.#inner.listPushersOfUsers(missing));
    return new Map(userIds.map((userId) => [userId, found.get(userId) ?? read.get(userId) ?? []]));
  }

  /** A user's pushers changed: their entry goes, and a read of them under way is not kept. */
  pushersChanged(userId: string): void {
    this.#changes += 1;
    if (this.#readsUnderWay > 0) {
      this.#changedAt.delete(userId);
      this.#changedAt.set(userId, this.#changes);
    }
    this.#remove(userId);
  }

  /** Changes may have been missed: everything goes, and no read under way is kept. */
  clear(): void {
    this.#changes += 1;
    this.#clearedAt = this.#changes;
    this.#changedAt.clear();
    this.#entries.clear();
    this.#bytes = 0;
  }

  /**
   * Whether kept lists may be served: at once when none of `userIds` is
   * kept (or there are no change events to wait for); else once the events
   * queued now are applied, and not at all when they cannot be waited for
   * (the subscription ended: the store answers).
   */
  #caughtUp(userIds: readonly string[]): true | Promise<boolean> {
    const changesApplied = this.#changesApplied;
    if (changesApplied === undefined) return true;
    const now = this.#now();
    const kept = userIds.some((userId) => {
      const entry = this.#entries.get(userId);
      return entry !== undefined && now - entry.readAt <= this.#maxStalenessMs;
    });
    if (!kept) return true;
    return changesApplied().then(
      () => true,
      () => false,
    );
  }

  #get(userId: string, now = this.#now()): readonly StoredPusher[] | undefined {
    const entry = this.#entries.get(userId);
    if (entry === undefined || now - entry.readAt > this.#maxStalenessMs) {
      // A stale entry goes at once: its bytes are not held until eviction.
      if (entry !== undefined) this.#remove(userId);
      this.#misses += 1;
      return undefined;
    }
    this.#hits += 1;
    // To the most recent end.
    this.#entries.delete(userId);
    this.#entries.set(userId, entry);
    return entry.pushers;
  }

  /** Reads from the inner lookup and keeps what no change since its start makes stale. */
  async #read(
    read: () => Promise<ReadonlyMap<string, readonly StoredPusher[]>>,
  ): Promise<ReadonlyMap<string, readonly StoredPusher[]>> {
    const ticket = this.#changes;
    const readAt = this.#now();
    this.#readsUnderWay += 1;
    try {
      const pushers = await read();
      if (this.#clearedAt <= ticket) {
        for (const [userId, list] of pushers) {
          if ((this.#changedAt.get(userId) ?? 0) > ticket) continue;
          this.#put(userId, list, readAt);
        }
      }
      return pushers;
    } finally {
      this.#readsUnderWay -= 1;
      // No read left that a change could race: the changes need not be remembered.
      if (this.#readsUnderWay === 0) this.#changedAt.clear();
    }
  }

  #put(userId: string, pushers: readonly StoredPusher[], readAt: number): void {
    const bytes = estimateBytes(userId, pushers);
    this.#remove(userId);
    if (bytes > this.#maxBytes || this.#maxEntries < 1) return;
    this.#entries.set(userId, { pushers, bytes, readAt });
    this.#bytes += bytes;
    while (this.#entries.size > this.#maxEntries || this.#bytes > this.#maxBytes) {
      const oldest = this.#entries.keys().next();
      if (oldest.done === true) return;
      this.#remove(oldest.value);
    }
  }

  #remove(userId: string): void {
    const entry = this.#entries.get(userId);
    if (entry === undefined) return;
    this.#entries.delete(userId);
    this.#bytes -= entry.bytes;
  }
}
