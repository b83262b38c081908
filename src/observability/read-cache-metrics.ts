import { Counter, Gauge, type Registry } from 'prom-client';
import type { RulesetCache } from '../service/ruleset-cache.js';

/**
 * The read cache's figures (`reads.*`): what it holds, and its counts,
 * copied into counters at each scrape (the cache counts; they only grow).
 */
export function registerReadCacheMetrics(
  registry: Registry,
  cache: Pick<RulesetCache<unknown>, 'size' | 'bytes' | 'stats'>,
): void {
  const registers = [registry];
  new Gauge({
    name: 'push_worker_read_cache_entries',
    help: 'Users whose push rules are kept for reads.',
    registers,
    collect() {
      this.set(cache.size);
    },
  });
  new Gauge({
    name: 'push_worker_read_cache_bytes',
    help: 'Estimated bytes of the push rules kept for reads.',
    registers,
    collect() {
      this.set(cache.bytes);
    },
  });
  const counted = (name: string, help: string, read: () => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  const { stats } = cache;
  counted('push_worker_read_cache_hits_total', 'Push-rule reads answered from memory.', () => stats.hits);
  counted(
    'push_worker_read_cache_misses_total',
    'Push-rule reads that read the store (not kept, or kept too long ago).',
    () => stats.misses,
  );
  counted(
    'push_worker_read_cache_invalidations_total',
    'Kept push rules dropped by a write, a change event or a reset of the subscription.',
    () => stats.invalidations,
  );
  counted(
    'push_worker_read_cache_stale_refreshes_total',
    'Kept push rules older than reads.maxStalenessMs, read again.',
    () => stats.staleRefreshes,
  );
  counted(
    'push_worker_read_cache_evictions_total',
    'Kept push rules evicted for the entry or byte bound.',
    () => stats.evictions,
  );
}
