import type { EvaluationEvent, EvaluationRecipient, EvaluationRoom } from '../../src/evaluation/evaluation-input.js';
import { percentile } from './closed-loop.js';

/**
 * The end-to-end `evaluate` requests: a plain text message in a large room
 * whose members are all on the server-default rules, as a homeserver would
 * ask after persisting it. `.m.rule.message` notifies every member, so the
 * reply names all of them: the reply is as large as the request.
 */
export const EVALUATE_SENDER = '@sender:bench.example.org';

export function evaluateEvent(i: number): EvaluationEvent {
  return {
    event_id: `$bench-${i}`,
    type: 'm.room.message',
    room_id: '!benchroom:bench.example.org',
    sender: EVALUATE_SENDER,
    origin_server_ts: 1_763_900_000_000 + i,
    content: { msgtype: 'm.text', body: `The meeting moves to room 3 at half past two (${i})`, 'm.mentions': {} },
  };
}

export function evaluateRoom(recipients: number): EvaluationRoom {
  return { member_count: recipients + 1, sender_power_level: 0, notification_power_levels: { room: 50 } };
}

/** `count` members `@<prefix>-<offset + k>:bench.example.org`, each with a display name. */
export function recipientsOf(prefix: string, count: number, offset = 0): EvaluationRecipient[] {
  return Array.from({ length: count }, (_, k) => ({
    user_id: `@${prefix}-${offset + k}:bench.example.org`,
    display_name: `Member ${offset + k}`,
  }));
}

/** The worker's `evaluate` counters and cache gauges, from its `/metrics`. */
export interface EvaluateCounters {
  readonly recipients: number;
  readonly hits: number;
  readonly misses: number;
  readonly storeQueries: number;
  readonly staleRefreshes: number;
  readonly evictions: number;
  readonly entries: number;
  readonly bytes: number;
  /** Requests of any queue the worker has taken and not yet answered. */
  readonly inFlight: number;
}

const COUNTER_NAMES: Record<keyof EvaluateCounters, string> = {
  recipients: 'push_worker_evaluate_recipients_total',
  hits: 'push_worker_evaluate_cache_hits_total',
  misses: 'push_worker_evaluate_cache_misses_total',
  storeQueries: 'push_worker_evaluate_store_queries_total',
  staleRefreshes: 'push_worker_evaluate_cache_stale_refreshes_total',
  evictions: 'push_worker_evaluate_cache_evictions_total',
  entries: 'push_worker_evaluate_cache_entries',
  bytes: 'push_worker_evaluate_cache_bytes',
  inFlight: 'push_worker_requests_in_flight',
};

/** Reads the counters out of Prometheus text; a counter that is absent is 0 (prom-client omits none, but a fresh one may be). */
export function parseEvaluateCounters(text: string): EvaluateCounters {
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(?:\{[^}]*\})? ([-+0-9.eE]+|NaN)$/.exec(line);
    if (match?.[1] !== undefined && match[2] !== undefined)
      values.set(match[1], (values.get(match[1]) ?? 0) + Number(match[2]));
  }
  return Object.fromEntries(
    Object.entries(COUNTER_NAMES).map(([key, name]) => [key, values.get(name) ?? 0]),
  ) as unknown as EvaluateCounters;
}

export async function scrapeEvaluateCounters(port: number): Promise<EvaluateCounters> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  return parseEvaluateCounters(await response.text());
}

export function counterDelta(before: EvaluateCounters, after: EvaluateCounters): EvaluateCounters {
  return Object.fromEntries(
    Object.keys(COUNTER_NAMES).map((key) => [
      key,
      after[key as keyof EvaluateCounters] - before[key as keyof EvaluateCounters],
    ]),
  ) as unknown as EvaluateCounters;
}

export interface OpenLoopOptions {
  /** Requests sent per second, on a fixed schedule whatever the replies do. */
  readonly ratePerSecond: number;
  /** Requests scheduled in [0, durationMs). */
  readonly durationMs: number;
  /** Only requests sent in [measureFromMs, measureToMs) count in the figures. */
  readonly measureFromMs: number;
  readonly measureToMs: number;
  readonly call: (i: number) => Promise<unknown>;
  readonly now?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
}

export interface OpenLoopResult {
  readonly ratePerSecond: number;
  /** Requests sent in the measured window, answered, failed. */
  readonly sent: number;
  readonly answered: number;
  readonly errors: number;
  readonly firstError: string | undefined;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** The most requests outstanding at once. */
  readonly maxInFlight: number;
  /** How late the schedule's sends were, at worst (the sender's own lag). */
  readonly maxSendLagMs: number;
}

/**
 * An open loop: request `i` is sent at `i / rate` seconds whether or not
 * earlier ones were answered (a timer, not a closed loop), as events arrive
 * at a homeserver. Resolves when every request sent has settled.
 */
export async function runOpenLoop(options: OpenLoopOptions): Promise<OpenLoopResult> {
  const now = options.now ?? (() => performance.now());
  const sleep = options.sleep ?? (async (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const interval = 1000 / options.ratePerSecond;
  const started = now();
  const latencies: number[] = [];
  const state = {
    errors: 0,
    firstError: undefined as string | undefined,
    inFlight: 0,
    maxInFlight: 0,
    maxLag: 0,
    sent: 0,
  };
  const settled: Promise<void>[] = [];
  for (let i = 0; i * interval < options.durationMs; i += 1) {
    const due = started + i * interval;
    const wait = due - now();
    if (wait > 0) await sleep(wait);
    const sentAt = now();
    state.maxLag = Math.max(state.maxLag, sentAt - due);
    const offset = i * interval;
    const counted = offset >= options.measureFromMs && offset < options.measureToMs;
    if (counted) state.sent += 1;
    state.inFlight += 1;
    state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
    settled.push(
      options.call(i).then(
        () => {
          state.inFlight -= 1;
          if (counted) latencies.push(now() - sentAt);
        },
        (error: unknown) => {
          state.inFlight -= 1;
          if (!counted) return;
          state.errors += 1;
          state.firstError ??= error instanceof Error ? error.message : String(error);
        },
      ),
    );
  }
  await Promise.all(settled);
  latencies.sort((a, b) => a - b);
  return {
    ratePerSecond: options.ratePerSecond,
    sent: state.sent,
    answered: latencies.length,
    errors: state.errors,
    firstError: state.firstError,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    maxMs: latencies.length === 0 ? Number.NaN : (latencies[latencies.length - 1] ?? Number.NaN),
    maxInFlight: state.maxInFlight,
    maxSendLagMs: state.maxLag,
  };
}
