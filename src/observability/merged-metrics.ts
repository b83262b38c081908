import { AggregatorRegistry, type Registry } from 'prom-client';

/** One registry's metrics as `getMetricsAsJSON` gives them: plain data, so they cross a thread's port. */
export type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/**
 * The registries of one worker (its main thread's and its delivery
 * thread's) as one `/metrics`: a family only one of them has is kept as it
 * is (prom-client's own aggregators would drop or average some of the
 * process metrics); a family both have (requests settled, in flight,
 * queues consumed, broker connections) is summed sample by sample, as the
 * worker's single registry counted them before delivery had a thread.
 */
export function mergedMetrics(registries: readonly MetricsJson[]): Registry {
  const seen = new Map<string, number>();
  for (const registry of registries)
    for (const family of registry) seen.set(family.name, (seen.get(family.name) ?? 0) + 1);
  return AggregatorRegistry.aggregate(
    registries.map((registry) =>
      registry.map((family) => ({ ...family, aggregator: (seen.get(family.name) ?? 0) > 1 ? 'sum' : 'first' })),
    ),
  );
}
