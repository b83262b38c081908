import type { Config } from '../config/config-schema.js';
import { PartitionCountMismatchError } from '../delivery-service/partition-count-guard.js';
import type { MetricsJson } from '../observability/merged-metrics.js';
import type { WorkerBeat } from '../store/partition-lease-store.js';

/**
 * What a worker's main thread and its delivery thread say to each other
 * (structured clone over the thread's port). The thread runs everything
 * delivery does on connections of its own; the main thread only starts
 * it, asks for its metrics, writes its log lines and closes it.
 */

/** Given to the thread when it starts (`workerData`). */
export interface DeliveryThreadData {
  /** Validated once, on the main thread; the thread freezes its copy. */
  readonly config: Config;
  /** The main thread's logger's: the thread logs at the same level, under the same name. */
  readonly logLevel: string;
  readonly logName: string;
}

export type ToDeliveryThread =
  /** The thread's registry, for a scrape of the worker's `/metrics`. */
  | { readonly type: 'metrics'; readonly id: number }
  /** Close delivery as a shutdown does (idempotent), then say `closed`. */
  | { readonly type: 'close' };

export type FromDeliveryThread =
  /** Delivery is wired, its partitions' round has begun and the `notify` queue is consumed (or being consumed). */
  | { readonly type: 'started' }
  /** Whether the thread consumes the `notify` queue now; sent when it changes. */
  | { readonly type: 'consuming'; readonly consuming: boolean }
  /** One log line, formatted and filtered by level in the thread. */
  | { readonly type: 'log'; readonly line: string }
  | { readonly type: 'metrics'; readonly id: number; readonly metrics: MetricsJson }
  /** Delivery could not start (the partition count the pool does not share, …); the thread closed what it opened. */
  | { readonly type: 'start-failed'; readonly error: ErrorDescription }
  /** Delivery is closed: the thread may be ended. */
  | { readonly type: 'closed' };

/** An error that crossed the port. */
export interface ErrorDescription {
  readonly name: string;
  readonly message: string;
  readonly stack?: string | undefined;
  /** A `PartitionCountMismatchError`'s. */
  readonly partitions?: number;
  readonly disagreeing?: readonly WorkerBeat[];
}

export function describeError(error: unknown, partitions?: number): ErrorDescription {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  return {
    name: error.name,
    message: error.message,
    stack: error.stack,
    ...(error instanceof PartitionCountMismatchError && partitions !== undefined
      ? { partitions, disagreeing: error.disagreeing }
      : {}),
  };
}

/** The error again, on the main thread: a partition count mismatch as its own class (the start fails with it). */
export function revivedError(description: ErrorDescription): Error {
  const { partitions, disagreeing } = description;
  const error =
    partitions !== undefined && disagreeing !== undefined
      ? new PartitionCountMismatchError(partitions, disagreeing)
      : Object.assign(new Error(description.message), { name: description.name });
  if (description.stack !== undefined) error.stack = description.stack;
  return error;
}

/** The longest wait before another thread is started after threads that failed before they started. */
const MAX_RESTART_DELAY_MS = 30_000;

/**
 * How long to wait before starting another delivery thread: at once after
 * one that had started (a crash), longer each time after threads that
 * failed before they started (so a store or a broker that is down is not
 * hammered).
 */
export function restartDelayMs(failedStarts: number, baseMs: number): number {
  if (failedStarts === 0) return 0;
  return Math.min(MAX_RESTART_DELAY_MS, baseMs * 2 ** (failedStarts - 1));
}

/** Freezes `value` and everything it holds: the thread's configuration stays as the main thread validated it. */
export function deepFrozen<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFrozen(inner);
  }
  return value;
}
