export interface RulesetCacheOptions {
  /** Most users kept; the least recently used go first. */
  readonly maxEntries: number;
  /** Most estimated bytes of compiled rulesets kept. */
  readonly maxBytes: number;
  /**
   * An entry read from the store longer ago than this is not served, even
   * if no change event said it changed: the bound on staleness when an
   * event is lost or late.
   */
  readonly maxStalenessMs: number;
  /**
   * Most invalidations remembered for loads that could still race them
   * (`LoadTicket`); past it the oldest is forgotten and loads that started
   * before it are refused instead. Default `MAX_REMEMBERED_INVALIDATIONS`.
   */
  readonly maxRememberedInvalidations?: number;
  readonly now?: () => number;
}

/**
 * What the invalidations remembered hold at most, whatever the rate of
 * change events: about 150 bytes each (a user ID, a map entry), so about
 * 0.6 MB per cache. Loads take milliseconds, so only one that started
 * before the last 4,096 invalidations is refused for it (it reads again
 * next time).
 */
export const MAX_REMEMBERED_INVALIDATIONS = 4_096;

/** Counters for the metrics; they only grow. */
export interface RulesetCacheStats {
  hits: number;
  misses: number;
  /** Entries dropped because a change event named their user. */
  invalidations: number;
  /** Entries found but older than `maxStalenessMs`, so loaded again. */
  staleRefreshes: number;
  evictions: number;
}

interface Entry<V> {
  readonly value: V;
  readonly bytes: number;
  /** When the load that produced it started: the age of the data, not of the entry. */
  readonly readAt: number;
  /** Served since it was last put at the most recent end: spared once by the next eviction (`#evict`). */
  used: boolean;
}

/**
 * Where a load starts: hand it back to `set`, which refuses the result if
 * the user was invalidated (or the cache cleared) after the load started,
 * so a read that raced a write never lands in the cache.
 */
export interface LoadTicket {
  readonly sequence: number;
  readonly readAt: number;
}

/**
 * The compiled rulesets of recently evaluated users, bounded by entries and
 * bytes (the least recently used out first, approximately: second chance,
 * see `#evict`) and by age.
 *
 * Correctness rests on three things: change events drop a user's entry
 * (`invalidate`); losing the change-event subscription drops everything
 * (`clear`), because events may have been missed; and no entry is served
 * once its data is older than `maxStalenessMs`, in case an event never
 * comes. A load that started before an invalidation of its user is not
 * cached (see `LoadTicket`).
 */
export class RulesetCache<V> {
  readonly #options: RulesetCacheOptions;
  readonly #now: () => number;
  /** Insertion order is recency order: the first key is the least recently used. */
  readonly #entries = new Map<string, Entry<V>>();
  /** The sequence number of each user's latest invalidation, kept while a load could still race it. */
  readonly #invalidatedAt = new Map<string, { readonly sequence: number; readonly at: number }>();
  #sequence = 0;
  #clearedAt = 0;
  /** Loads that started before this sequence are refused: an invalidation they could race was forgotten. */
  #forgottenAt = 0;
  /** When the latest load started: invalidations need remembering only while one could still be kept. */
  #lastTicketAt = -Infinity;
  #bytes = 0;
  readonly stats: RulesetCacheStats = { hits: 0, misses: 0, invalidations: 0, staleRefreshes: 0, evictions: 0 };

  constructor(options: RulesetCacheOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** Invalidations remembered for loads that could still race them: bounded by count and by age. */
  get rememberedInvalidations(): number {
    return this.#invalidatedAt.size;
  }

  /** The cache's clock: read once, passed to `get` for many users. */
  now(): number {
    return this.#now();
  }

  /** The cached value, fresh enough to serve, or undefined (a miss); `now` may be read once for many gets. */
  get(userId: string, now: number = this.#now()): V | undefined {
    const entry = this.#entries.get(userId);
    if (entry === undefined) {
      this.stats.misses += 1;
      return undefined;
    }
    if (now - entry.readAt > this.#options.maxStalenessMs) {
      this.#entries.delete(userId);
      this.#bytes -= entry.bytes;
      this.stats.staleRefreshes += 1;
      this.stats.misses += 1;
      return undefined;
    }
    // Only marked: a large room's 10,000 hits per request each moving a map
    // entry to the most recent end cost more than evaluating them (issue 35);
    // eviction, which is rare, moves the marked ones instead.
    entry.used = true;
    this.stats.hits += 1;
    return entry.value;
  }

  /** Whether `get` would serve the user now; counts nothing and keeps nothing from being evicted. */
  has(userId: string, now: number = this.#now()): boolean {
    const entry = this.#entries.get(userId);
    return entry !== undefined && now - entry.readAt <= this.#options.maxStalenessMs;
  }

  /** Take one before reading from the store; pass it to `set` with what was read. */
  ticket(): LoadTicket {
    const readAt = this.#now();
    this.#lastTicketAt = readAt;
    return { sequence: this.#sequence, readAt };
  }

  /** Caches what a load read; false when an invalidation since the ticket makes it unsafe to keep. */
  set(userId: string, value: V, bytes: number, ticket: LoadTicket): boolean {
    if (ticket.sequence < this.#clearedAt || ticket.sequence < this.#forgottenAt) return false;
    const invalidated = this.#invalidatedAt.get(userId);
    if (invalidated !== undefined && invalidated.sequence > ticket.sequence) return false;
    if (bytes > this.#options.maxBytes) return false;
    this.#remove(userId);
    // Room is made first, so the entry being cached is never the one evicted.
    this.#evict(1, bytes);
    this.#entries.set(userId, { value, bytes, readAt: ticket.readAt, used: false });
    this.#bytes += bytes;
    return true;
  }

  /**
   * Something kept with `userId`'s entry (an encoded reply) makes it weigh
   * `bytes` now: others are evicted to stay under `maxBytes`, and an entry
   * that alone is over it goes. Only while the entry still holds `value`
   * (it may have been replaced or dropped since it was read); false when it
   * is not kept.
   */
  reweigh(userId: string, value: V, bytes: number): boolean {
    const entry = this.#entries.get(userId);
    if (entry?.value !== value) return false;
    this.#remove(userId);
    if (bytes > this.#options.maxBytes) return false;
    this.#evict(1, bytes);
    this.#entries.set(userId, { ...entry, bytes });
    this.#bytes += bytes;
    return true;
  }

  /**
   * A change event for this user: drop its entry, and refuse loads already
   * under way. Remembered for such loads only while one could race it:
   * not when no load started within `maxStalenessMs` (what one older read
   * is never served), and at most `maxRememberedInvalidations` of them
   * (past it, the oldest is forgotten and every load that started before
   * it is refused).
   */
  invalidate(userId: string): void {
    this.#sequence += 1;
    const now = this.#now();
    this.#invalidatedAt.delete(userId);
    if (now - this.#lastTicketAt <= this.#options.maxStalenessMs)
      this.#invalidatedAt.set(userId, { sequence: this.#sequence, at: now });
    if (this.#remove(userId)) this.stats.invalidations += 1;
    this.#forgetOldInvalidations(now);
  }

  /** Change events may have been missed: drop everything, and refuse loads already under way. */
  clear(): void {
    this.#sequence += 1;
    this.#clearedAt = this.#sequence;
    this.stats.invalidations += this.#entries.size;
    this.#entries.clear();
    this.#invalidatedAt.clear();
    this.#bytes = 0;
  }

  #remove(userId: string): boolean {
    const entry = this.#entries.get(userId);
    if (entry === undefined) return false;
    this.#entries.delete(userId);
    this.#bytes -= entry.bytes;
    return true;
  }

  /**
   * Second chance: the oldest entry goes unless it was served since it was
   * put at the most recent end; then it is put there again, unmarked, and
   * the next oldest is looked at. Ends: each entry is spared at most once.
   * Until `entries` more entries of `bytes` more bytes fit.
   */
  #evict(entries: number, bytes: number): void {
    const { maxEntries, maxBytes } = this.#options;
    while (this.#entries.size + entries > maxEntries || this.#bytes + bytes > maxBytes) {
      const oldest = this.#entries.entries().next();
      if (oldest.done === true) return;
      const [userId, entry] = oldest.value;
      this.#entries.delete(userId);
      if (entry.used) {
        entry.used = false;
        this.#entries.set(userId, entry);
        continue;
      }
      this.#bytes -= entry.bytes;
      this.stats.evictions += 1;
    }
  }

  /**
   * A load that started more than `maxStalenessMs` ago produces an entry
   * that is already too old to serve, so older invalidations need not be
   * remembered. Past `maxRememberedInvalidations`, the oldest are forgotten
   * and the loads that could have raced them refused (`#forgottenAt`).
   * Oldest first, in insertion order.
   */
  #forgetOldInvalidations(now: number): void {
    const most = this.#options.maxRememberedInvalidations ?? MAX_REMEMBERED_INVALIDATIONS;
    for (const [userId, invalidated] of this.#invalidatedAt) {
      if (this.#invalidatedAt.size > most) this.#forgottenAt = invalidated.sequence;
      else if (now - invalidated.at <= this.#options.maxStalenessMs) return;
      this.#invalidatedAt.delete(userId);
    }
  }
}
