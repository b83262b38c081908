/**
 * A map that keeps at most `capacity` entries, dropping the least recently
 * used. Compiled matchers are cached by pattern so that users with the same
 * keyword share one; the bound keeps a stream of distinct patterns from
 * growing the worker without limit.
 */
export class BoundedCache<K, V> {
  private readonly entries = new Map<K, V>();

  constructor(private readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('capacity must be a positive integer');
  }

  get size(): number {
    return this.entries.size;
  }

  /** The cached value for `key`, built and stored by `build` when absent. */
  getOrCreate(key: K, build: (key: K) => V): V {
    const cached = this.entries.get(key);
    if (cached !== undefined) {
      // Map iterates in insertion order: re-inserting marks it most recent.
      this.entries.delete(key);
      this.entries.set(key, cached);
      return cached;
    }
    const value = build(key);
    if (this.entries.size >= this.capacity) {
      const oldest = this.entries.keys().next();
      if (oldest.done !== true) this.entries.delete(oldest.value);
    }
    this.entries.set(key, value);
    return value;
  }
}
