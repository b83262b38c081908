import { Counter, Gauge, type Registry } from 'prom-client';
import type { RulesetCache } from '../service/ruleset-cache.js';

type CacheFigures = Pick<RulesetCache<unknown>, 'size' | 'bytes' | 'stats'>;

/** The help text of each figure of a cache, by figure. */
export interface CacheMetricHelp {
  readonly entries: string;
  readonly bytes: string;
  readonly invalidations: string;
  readonly staleRefreshes: string;
  readonly evictions: string;
  /** Only for a cache whose hits and misses are counted here (absent: counted elsewhere). */
  readonly hits?: string;
  readonly misses?: string;
}

/**
 * A `RulesetCache`'s figures as `<prefix>_entries`, `_bytes` and the
 * `_…_total` counters. The cache counts; a scrape copies its counts into
 * the counters (they only grow).
 */
export function registerCacheMetrics(
  registry: Registry,
  prefix: string,
  cache: CacheFigures,
  help: CacheMetricHelp,
): void {
  const registers = [registry];
  new Gauge({
    name: `${prefix}_entries`,
    help: help.entries,
    registers,
    collect() {
      this.set(cache.size);
    },
  });
  new Gauge({
    name: `${prefix}_bytes`,
    help: help.bytes,
    registers,
    collect() {
      this.set(cache.bytes);
    },
  });
  const counted = (name: string, text: string, read: () => number) =>
    new Counter({
      name: `${prefix}_${name}_total`,
      help: text,
      registers,
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  const { stats } = cache;
  if (help.hits !== undefined) counted('hits', help.hits, () => stats.hits);
  if (help.misses !== undefined) counted('misses', help.misses, () => stats.misses);
  counted('invalidations', help.invalidations, () => stats.invalidations);
  counted('stale_refreshes', help.staleRefreshes, () => stats.staleRefreshes);
  counted('evictions', help.evictions, () => stats.evictions);
}

/** The read cache's figures (`reads.*`): `push_worker_read_cache_*`. */
export function registerReadCacheMetrics(registry: Registry, cache: CacheFigures): void {
  registerCacheMetrics(registry, 'push_worker_read_cache', cache, {
    entries: 'Users whose push rules are kept for reads.',
    bytes: 'Estimated bytes of the push rules kept for reads.',
    hits: 'Push-rule reads answered from memory.',
    misses: 'Push-rule reads that read the store (not kept, or kept too long ago).',
    invalidations: 'Kept push rules dropped by a write, a change event or a reset of the subscription.',
    staleRefreshes: 'Kept push rules older than reads.maxStalenessMs, read again.',
    evictions: 'Kept push rules evicted for the entry or byte bound.',
  });
}
