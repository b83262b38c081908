export interface TokenBucketOptions {
  /** Tokens each key gains per second (an integer); 0 turns the limiter off: every take passes and nothing is tracked. */
  readonly perSecond: number;
  /** A bucket's capacity: how many takes pass at once after a quiet spell (at least 1). */
  readonly burst: number;
  /** The most keys tracked at once; past it the least recently used key is forgotten. */
  readonly maxKeys: number;
  /** Milliseconds on a clock that does not go back; fractions are dropped. */
  readonly now: () => number;
}

export type TakeOutcome = { readonly allowed: true } | { readonly allowed: false; readonly retryAfterMs: number };

interface Bucket {
  /** Thousandths of a token: refilling `perSecond` of them per millisecond keeps every sum an integer. */
  units: number;
  /** When `units` was last brought up to date. */
  at: number;
}

const UNITS_PER_TOKEN = 1000;
const ALLOWED: TakeOutcome = { allowed: true };

/**
 * A token bucket per key, pure apart from its injected clock.
 *
 * Each key starts with `burst` tokens and regains `perSecond` a second; a
 * take spends one, or is refused with the exact wait until one is there:
 * `retryAfterMs` is the least whole number of milliseconds after which the
 * same take passes (one millisecond sooner it would not).
 *
 * Memory stays bounded. A bucket untouched for the time a full refill takes
 * is full, which is what a key without a bucket gets, so it is dropped; the
 * map iterates least recently used first, so each take drops such buckets
 * from its front. A new key at `maxKeys` makes the least recently used one
 * forgotten (counted in `evictions`), which can only let that key through
 * sooner.
 */
export class TokenBucketLimiter {
  readonly #options: TokenBucketOptions;
  readonly #capacity: number;
  /** How long a bucket takes to fill from empty: after that, idle buckets are dropped. */
  readonly #refillMs: number;
  readonly #buckets = new Map<string, Bucket>();
  #evictions = 0;

  constructor(options: TokenBucketOptions) {
    if (!Number.isInteger(options.perSecond) || options.perSecond < 0)
      throw new RangeError('perSecond must be an integer ≥ 0');
    if (!Number.isInteger(options.burst) || options.burst < 1) throw new RangeError('burst must be an integer ≥ 1');
    if (!Number.isInteger(options.maxKeys) || options.maxKeys < 1)
      throw new RangeError('maxKeys must be an integer ≥ 1');
    this.#options = options;
    this.#capacity = options.burst * UNITS_PER_TOKEN;
    this.#refillMs = options.perSecond === 0 ? 0 : Math.ceil(this.#capacity / options.perSecond);
  }

  get enabled(): boolean {
    return this.#options.perSecond > 0;
  }

  /** Keys tracked now. */
  get size(): number {
    return this.#buckets.size;
  }

  /** Keys forgotten at `maxKeys` while their buckets were not yet full. */
  get evictions(): number {
    return this.#evictions;
  }

  take(key: string): TakeOutcome {
    const { perSecond, maxKeys } = this.#options;
    if (perSecond === 0) return ALLOWED;
    const now = Math.floor(this.#options.now());
    this.#dropIdle(now);

    let bucket = this.#buckets.get(key);
    if (bucket === undefined) {
      if (this.#buckets.size >= maxKeys) this.#evictOldest();
      bucket = { units: this.#capacity, at: now };
    } else {
      // Re-inserted below, so that the map stays in order of last use.
      this.#buckets.delete(key);
      // A clock that stood still (or stepped back) refills nothing, and the
      // bucket keeps counting from the latest time it has seen.
      bucket.units = Math.min(this.#capacity, bucket.units + Math.max(0, now - bucket.at) * perSecond);
      bucket.at = Math.max(bucket.at, now);
    }
    this.#buckets.set(key, bucket);

    if (bucket.units >= UNITS_PER_TOKEN) {
      bucket.units -= UNITS_PER_TOKEN;
      return ALLOWED;
    }
    // Integers divided and rounded up once: exact, no drift from float sums.
    return { allowed: false, retryAfterMs: bucket.at - now + Math.ceil((UNITS_PER_TOKEN - bucket.units) / perSecond) };
  }

  #dropIdle(now: number): void {
    for (const [key, bucket] of this.#buckets) {
      if (now - bucket.at < this.#refillMs) return;
      this.#buckets.delete(key);
    }
  }

  #evictOldest(): void {
    const oldest = this.#buckets.keys().next();
    if (oldest.done === true) return;
    this.#buckets.delete(oldest.value);
    this.#evictions += 1;
  }
}
