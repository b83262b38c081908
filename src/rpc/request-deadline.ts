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
  if (typeof timestamp !== 'number' || !Number.isFinite(timestamp)) return undefined;
  const ttl = typeof expiration === 'string' ? Number(expiration) : expiration;
  if (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl < 0) return undefined;
  const sentAtMs = timestamp > 1e11 ? timestamp : timestamp * 1000;
  return sentAtMs + ttl;
}
