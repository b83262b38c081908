import { performance } from 'node:perf_hooks';

export interface LoopOptions {
  /** Callers, each with one request outstanding at a time. */
  readonly concurrency: number;
  /** Requests before this are not counted (connections, JIT, caches). */
  readonly warmupMs: number;
  readonly measureMs: number;
  /** One request of caller `lane`; its `i`th. Throwing counts as an error. */
  readonly call: (lane: number, i: number) => Promise<unknown>;
}

export interface LoopResult {
  readonly concurrency: number;
  /** Requests that started and finished inside the measured window. */
  readonly ops: number;
  readonly errors: number;
  readonly firstError: string | undefined;
  readonly throughput: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

/**
 * A closed-loop load: `concurrency` callers, each sending its next request
 * when the last one is answered, so throughput and latency are those of the
 * system at that many requests in flight.
 */
export async function runClosedLoop(options: LoopOptions): Promise<LoopResult> {
  const latencies: number[] = [];
  const counted = { errors: 0, firstError: undefined as string | undefined };
  const startedAt = performance.now();
  const measureFrom = startedAt + options.warmupMs;
  const measureTo = measureFrom + options.measureMs;
  const lane = async (index: number) => {
    for (let i = 0; ; i += 1) {
      const begin = performance.now();
      if (begin >= measureTo) return;
      let failed = false;
      try {
        await options.call(index, i);
      } catch (error) {
        failed = true;
        if (begin >= measureFrom) counted.firstError ??= error instanceof Error ? error.message : String(error);
      }
      const end = performance.now();
      if (begin < measureFrom || end > measureTo) continue;
      if (failed) counted.errors += 1;
      else latencies.push(end - begin);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, async (_, index) => lane(index)));
  latencies.sort((a, b) => a - b);
  return {
    concurrency: options.concurrency,
    ops: latencies.length,
    errors: counted.errors,
    firstError: counted.firstError,
    throughput: latencies.length / (options.measureMs / 1000),
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
  };
}

/** Nearest-rank percentile of sorted values; NaN when there are none. */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] ?? Number.NaN;
}
