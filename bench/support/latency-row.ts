import { percentile } from './closed-loop.js';

const log = (line: string) => {
  console.error(line);
};

/** One row of round trips as the caller saw them (ms), and what was left out. */
export interface LatencyRow {
  readonly id: string;
  readonly what: string;
  readonly recipients: number;
  readonly samples: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly errors: number;
  /** Requests left out because the worker's counters showed another cache state than the row's. */
  readonly excluded: number;
  readonly targetP99Ms?: number;
  /** The worker's CPU time per request over the row's requests (`/proc/<pid>/stat`). */
  readonly workerCpuMsPerRequest?: number;
  /** How long per request the worker's JavaScript thread was runnable but waited for a CPU (`/proc/<pid>/schedstat`). */
  readonly workerWaitMsPerRequest?: number;
}

export function latencyRow(
  fields: Pick<LatencyRow, 'id' | 'what' | 'recipients'> &
    Partial<
      Pick<LatencyRow, 'errors' | 'excluded' | 'targetP99Ms' | 'workerCpuMsPerRequest' | 'workerWaitMsPerRequest'>
    >,
  latenciesMs: readonly number[],
): LatencyRow {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  return {
    errors: 0,
    excluded: 0,
    ...fields,
    samples: sorted.length,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted.length === 0 ? Number.NaN : (sorted[sorted.length - 1] ?? Number.NaN),
  };
}

export function logRow(row: LatencyRow | undefined): void {
  if (row === undefined) return;
  const left = row.excluded > 0 ? `, ${row.excluded} left out` : '';
  const errors = row.errors > 0 ? `, ${row.errors} errors` : '';
  log(
    `${row.id.padEnd(36)} p50 ${row.p50Ms.toFixed(2)} ms  p99 ${row.p99Ms.toFixed(2)} ms  max ${row.maxMs.toFixed(2)} ms  (${row.samples} requests${left}${errors})`,
  );
}
