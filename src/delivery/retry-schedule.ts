import type { BackoffPolicy } from '../retry/backoff.js';

export interface RetryPolicy extends BackoffPolicy {
  /** How long a notification may keep failing, from its first failure, before it is given up. */
  readonly giveUpAfterMs: number;
}

/** 1 s doubling to 1 h; a notification still failing a day after its first failure is given up (as Synapse does). */
export const DEFAULT_RETRY_POLICY: RetryPolicy = { baseMs: 1000, maxMs: 3_600_000, giveUpAfterMs: 86_400_000 };

/**
 * The nominal wait after the n-th consecutive failure (n ≥ 1):
 * base·2^(n-1), capped at max.
 */
function nominalDelay(policy: BackoffPolicy, failures: number): number {
  // Past 2^52 the doubling would only lose precision on its way to the cap.
  const exponent = Math.min(Math.max(failures - 1, 0), 52);
  return Math.min(policy.maxMs, policy.baseMs * 2 ** exponent);
}

/**
 * The wait after the n-th consecutive failure, with "equal jitter": a
 * uniformly random point of [nominal/2, nominal). Why this jitter:
 * - The cap is a real cap: no wait is ever longer than `maxMs` (1 h), which
 *   upward jitter around a capped value could not promise.
 * - Below the cap, waits never shrink from one failure to the next: the
 *   range of failure n+1, [nominal, 2·nominal), starts where the range of
 *   failure n ends, so the backoff still doubles as a sequence; at the cap
 *   every wait is 30 to 60 min. "Full jitter" over [0, nominal) may instead
 *   answer the 20th failure with a retry seconds later (src/retry/backoff.ts
 *   makes that choice for colliding writers, where an early retry is cheap).
 * - Half the range is random: devices that failed together (one gateway
 *   went down) come back spread over half a backoff step, not in a burst.
 *
 * `random` is Math.random's contract, [0, 1); a value outside is clamped so
 * that the bounds hold whatever the source.
 */
export function jitteredDelay(policy: BackoffPolicy, failures: number, random: () => number): number {
  const nominal = nominalDelay(policy, failures);
  const half = nominal / 2;
  const raw = random();
  // NaN fails the comparison too, and draws the lower bound.
  const draw = raw >= 0 ? Math.min(raw, 1 - Number.EPSILON) : 0;
  return Math.floor(half + draw * half);
}

/** The failure of one attempt to deliver a notification. */
export interface FailedAttempt {
  /** Consecutive failed attempts so far, this one included (≥ 1): the backoff's step. */
  readonly failures: number;
  /** When this notification first failed: the give-up window is measured from there. */
  readonly firstFailedAt: number;
  /** When this attempt failed. */
  readonly now: number;
  /** The gateway's `Retry-After`, in ms from `now`, when it sent a readable one. */
  readonly retryAfterMs?: number | undefined;
}

export type GiveUpReason =
  /** It has failed for the whole window. */
  | 'window-elapsed'
  /** The gateway asked us to wait past the end of the window. */
  | 'retry-after-beyond-window';

export type RetryDecision = { readonly retryAt: number } | { readonly giveUp: GiveUpReason };

/**
 * When to try a failed notification again, or that it is given up.
 *
 * The window is [firstFailedAt, firstFailedAt + giveUpAfterMs]: attempts
 * are made inside it, the last one exactly at its end, and a failure at or
 * after its end gives the notification up. So a retry that the backoff
 * would place past the end is brought back to the end: the notification is
 * given up when its window says, not up to one backoff step (1 h) later.
 *
 * The gateway's `Retry-After` is honoured when it asks for more than the
 * backoff (it knows when it will take requests again); a shorter one is
 * not, or a gateway could make us retry at its pace instead of ours. One
 * that asks past the end of the window gives up now: waiting for it would
 * only end in giving up at a later time.
 */
export function scheduleRetry(policy: RetryPolicy, attempt: FailedAttempt, random: () => number): RetryDecision {
  const deadline = attempt.firstFailedAt + policy.giveUpAfterMs;
  if (attempt.now >= deadline) return { giveUp: 'window-elapsed' };
  const backoff = jitteredDelay(policy, attempt.failures, random);
  const retryAfter = attempt.retryAfterMs ?? 0;
  if (retryAfter > backoff) {
    const retryAt = attempt.now + retryAfter;
    return retryAt > deadline ? { giveUp: 'retry-after-beyond-window' } : { retryAt };
  }
  return { retryAt: Math.min(attempt.now + backoff, deadline) };
}
