/**
 * The device queue a gateway request belongs to: one user's pushers with
 * one gateway URL and one format, the devices one request is sent for
 * (device-batches.ts). Notifications of one queue are sent one at a time,
 * in publish order; different queues never wait for each other.
 *
 * JSON of the three parts: no separator a URL or a user ID could contain
 * can make two different queues share a key.
 */
export function deviceQueueKey(userId: string, url: string, format: string | undefined): string {
  return JSON.stringify([userId, url, format ?? null]);
}
