export interface BackoffPolicy {
  readonly baseMs: number;
  readonly maxMs: number;
}

/**
 * "Full jitter" exponential backoff: a uniformly random wait up to
 * base·2^attempt, capped. Spreads out writers that conflicted together so
 * that they do not collide again on the next round.
 */
export function backoffDelay(policy: BackoffPolicy, attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** attempt);
  return Math.floor(random() * ceiling);
}
