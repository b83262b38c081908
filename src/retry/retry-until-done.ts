import { setTimeout as sleep } from 'node:timers/promises';
import { backoffDelay, type BackoffPolicy } from './backoff.js';

export interface RetryOptions {
  readonly policy: BackoffPolicy;
  /** Stops retrying (and any wait in progress) when aborted. */
  readonly signal: AbortSignal;
  readonly onFailure: (error: unknown, attempt: number, retryInMs: number) => void;
  readonly random?: () => number;
}

/**
 * Runs `operation` until it succeeds, waiting a jittered backoff of at least
 * `policy.baseMs` between attempts: how the worker waits for a broker or
 * database that is not there yet. `undefined` when aborted first.
 */
export async function retryUntilDone<T>(operation: () => Promise<T>, options: RetryOptions): Promise<T | undefined> {
  const { policy, signal, onFailure, random } = options;
  for (let attempt = 0; !signal.aborted; attempt += 1) {
    try {
      return await operation();
    } catch (error) {
      const retryInMs = Math.max(policy.baseMs, backoffDelay(policy, attempt, random));
      onFailure(error, attempt + 1, retryInMs);
      await sleep(retryInMs, undefined, { signal }).catch(() => undefined);
    }
  }
  return undefined;
}
