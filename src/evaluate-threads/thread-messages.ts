import type { Config } from '../config/config-schema.js';
import type { MatrixErrorBody } from '../errors/error-catalogue.js';
import type { EvaluateStats } from '../service/evaluate-service.js';
import type { AbandonReason } from '../service/bounded-store.js';

/**
 * What the worker's event loop and its evaluation threads say to each
 * other (structured clone over the thread's port). One port carries both
 * the requests and the cache invalidations, so a thread always sees an
 * invalidation before any request the event loop took after it.
 */

/** Given to every thread when it starts (`workerData`). */
export interface EvaluateThreadData {
  readonly evaluate: Config['evaluate'];
  readonly mongodb: Config['mongodb'];
  readonly maxJsonDepth: number;
  /** This thread's share of the cache's bounds. */
  readonly cacheMaxEntries: number;
  readonly cacheMaxBytes: number;
}

export type ToThread =
  | {
      readonly type: 'evaluate';
      readonly id: number;
      /** The message body, copied once and transferred. */
      readonly body: Uint8Array;
      readonly deadline: number | undefined;
    }
  | { readonly type: 'invalidate'; readonly userId: string }
  | { readonly type: 'clear' };

/** A thread's cache, as the worker's metrics show it (summed over the threads). */
export interface CacheSnapshot {
  readonly size: number;
  readonly bytes: number;
  readonly hits: number;
  readonly misses: number;
  readonly invalidations: number;
  readonly staleRefreshes: number;
  readonly evictions: number;
}

/** An error that crossed the port, for the log. */
export interface ErrorDescription {
  readonly name: string;
  readonly message: string;
  readonly stack?: string | undefined;
}

export type FromThread =
  /** The thread has set itself up and takes requests. */
  | { readonly type: 'ready' }
  | {
      readonly type: 'done';
      readonly id: number;
      /** A success: the whole reply envelope as UTF-8, transferred (`successBytes`). */
      readonly bytes?: Uint8Array;
      /** A failure's error body. */
      readonly error?: MatrixErrorBody;
      readonly stats?: EvaluateStats;
      readonly cause?: string;
      readonly failure?: ErrorDescription;
      readonly deadlinePassed?: true;
      readonly cache: CacheSnapshot;
    }
  | { readonly type: 'undecodable'; readonly userId: string }
  /** The thread's first connection to the store failed; it tries again in `retryInMs`. */
  | {
      readonly type: 'store-unreachable';
      readonly error: ErrorDescription;
      readonly attempt: number;
      readonly retryInMs: number;
    }
  | { readonly type: 'abandoned'; readonly operation: string; readonly reason: AbandonReason };

export function describeError(error: unknown): ErrorDescription {
  if (error instanceof Error) return { name: error.name, message: error.message, stack: error.stack };
  return { name: 'Error', message: String(error) };
}
