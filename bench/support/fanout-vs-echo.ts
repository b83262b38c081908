import type { LatencyRow } from './latency-row.js';

/** Issue 35: the warm 10,000-recipient fan-out's p99 at most this many times the echo's of its body (same run). */
export const FANOUT_ECHO_RATIO_TARGET = 1.5;

export interface FanoutVsEcho {
  readonly warm: LatencyRow;
  /** The echo of the body the client sends (grouped by server): what the ratio is judged on. */
  readonly grouped: LatencyRow;
  /** The echo of the plain-list body, as before the grouped form: a diagnostic. */
  readonly plain: LatencyRow | undefined;
  readonly ratio: number;
}

/**
 * The warm fan-out of `recipients` against the echo consumer given the
 * very body the client sent for it, p99 ÷ p99. Undefined when a row is
 * missing or empty.
 */
export function fanoutVsEcho(latency: readonly LatencyRow[], recipients = 10_000): FanoutVsEcho | undefined {
  const warm = latency.find((r) => r.id === `evaluate/warm/${recipients}`);
  const grouped = latency.find((r) => r.id === `broker/echo/evaluate-${recipients}-grouped`);
  if (warm === undefined || grouped === undefined || warm.samples === 0 || grouped.samples === 0) return undefined;
  const plain = latency.find((r) => r.id === `broker/echo/evaluate-${recipients}`);
  return { warm, grouped, plain, ratio: warm.p99Ms / grouped.p99Ms };
}
