/**
 * When a request stops being worth answering: its publish time plus its
 * `expiration`. The broker already drops messages that expire while queued;
 * this catches the ones that expired in a worker's prefetch buffer.
 *
 * The AMQP `timestamp` is in seconds by the spec, but many clients (ours
 * included) send milliseconds; values past 10^11 are read as milliseconds
 * (10^11 seconds is the year 5138). Without both properties there is no
 * deadline.
 */
export function requestDeadline(timestamp: unknown, expiration: unknown): number | undefined {
  return requestTiming(timestamp, expiration)?.deadline;
}

/**
 * When a worker stops working on a request it has taken: `marginMs` before
 * its deadline, but never more than a tenth of its `expiration`, so that
 * an `Unavailable` reply sent then still reaches a caller that waits until
 * the deadline (the reply crosses the broker; a reply sent at the deadline
 * itself would find the caller gone). No store operation is started for
 * the request after this instant. Undefined when the request has no
 * deadline.
 */
export function stopWorkBy(timestamp: unknown, expiration: unknown, marginMs: number): number | undefined {
  const timing = requestTiming(timestamp, expiration);
  if (timing === undefined) return undefined;
  return timing.deadline - Math.min(marginMs, timing.ttlMs / 10);
}

function requestTiming(
  timestamp: unknown,
  expiration: unknown,
): { readonly deadline: number; readonly ttlMs: number } | undefined {
  if (typeof timestamp !== 'number' || !Number.isFinite(timestamp)) return undefined;
  const ttl = typeof expiration === 'string' ? Number(expiration) : expiration;
  if (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl < 0) return undefined;
  const sentAtMs = timestamp > 1e11 ? timestamp : timestamp * 1000;
  return { deadline: sentAtMs + ttl, ttlMs: ttl };
}
