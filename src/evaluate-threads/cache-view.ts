import type { RulesetCacheStats } from '../service/ruleset-cache.js';

/** A cache's counts as the metrics read them (a `RulesetCache`, or the pool's threads summed). */
export interface CacheView {
  readonly size: number;
  readonly bytes: number;
  readonly stats: RulesetCacheStats;
}

/**
 * Several caches as one, read when asked: the metrics keep the object (and
 * its `stats`) they are given and read it at each scrape, and the caches
 * behind it may come later (the evaluator is made once the store answers).
 */
export function summedCacheView(parts: () => readonly CacheView[]): CacheView {
  const sum = (read: (part: CacheView) => number) => parts().reduce((total, part) => total + read(part), 0);
  return {
    get size() {
      return sum((part) => part.size);
    },
    get bytes() {
      return sum((part) => part.bytes);
    },
    stats: {
      get hits() {
        return sum((part) => part.stats.hits);
      },
      get misses() {
        return sum((part) => part.stats.misses);
      },
      get invalidations() {
        return sum((part) => part.stats.invalidations);
      },
      get staleRefreshes() {
        return sum((part) => part.stats.staleRefreshes);
      },
      get evictions() {
        return sum((part) => part.stats.evictions);
      },
    },
  };
}
