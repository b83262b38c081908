/**
 * A message's AMQP `timestamp` in milliseconds, or undefined without a
 * usable one. The spec has seconds, but many clients (ours included) send
 * milliseconds: values past 10^11 are read as milliseconds (10^11 seconds
 * is the year 5138), as for request deadlines (request-deadline.ts).
 */
export function publishedAtMs(timestamp: unknown): number | undefined {
  if (typeof timestamp !== 'number' || !Number.isFinite(timestamp) || timestamp <= 0) return undefined;
  return timestamp > 1e11 ? timestamp : timestamp * 1000;
}
