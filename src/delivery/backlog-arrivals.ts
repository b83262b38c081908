import { enqueue, withWaiting, type BacklogPolicy, type DeviceBacklog } from './device-backlog.js';

/** What a request brings into a device's backlog: its place in publish order, and the retry state its last holder saved. */
export interface ArrivingRequest {
  readonly id: string;
  /** Publish order within the device queue. */
  readonly seq: number;
  readonly retry?: { readonly failures: number; readonly firstFailedAt: number; readonly retryAt: number } | undefined;
}

/**
 * Adds requests of one device to its backlog: the intake's new ones at
 * the back (the usual case), or requests of a partition taken over from a
 * dead worker, older than some already held, sorted in before them. A
 * backlog that held nothing takes the retry state the front's last holder
 * saved, so its backoff and give-up window carry on where they were.
 * `dropped`: what the cap pushed out, for the caller to count.
 */
export function addArrivals<T extends ArrivingRequest>(
  backlog: DeviceBacklog<T>,
  arrivals: readonly [T, ...T[]],
  policy: BacklogPolicy,
): { readonly backlog: DeviceBacklog<T>; readonly dropped: readonly T[] } {
  const first = arrivals[0];
  const last = backlog.queue.at(-1);
  const inOrder = arrivals.every((item, index) => index === 0 || (arrivals[index - 1] as T).seq <= item.seq);
  let after = backlog;
  let dropped: readonly T[];
  if (inOrder && (last === undefined || last.seq <= first.seq)) {
    const collected: T[] = [];
    for (const item of arrivals) {
      const change = enqueue(after, item, policy);
      after = change.backlog;
      collected.push(...change.dropped);
    }
    dropped = collected;
  } else {
    const frontBefore = after.queue[0]?.id;
    const waiting = [...after.queue.slice(after.inFlight ? 1 : 0), ...arrivals].sort((a, b) => a.seq - b.seq);
    const change = withWaiting(after, waiting, policy);
    after = change.backlog;
    dropped = change.dropped;
    const front = after.queue[0];
    // An older request sorted in at the front brings its own retry state with it.
    if (!after.inFlight && front !== undefined && front.id !== frontBefore) {
      after = { ...after, frontFailedAt: front.retry?.firstFailedAt, retryAt: front.retry?.retryAt };
    }
  }
  if (after.queue.length === arrivals.length && !after.inFlight) {
    const retry = after.queue[0]?.retry;
    if (retry !== undefined)
      after = { ...after, failures: retry.failures, frontFailedAt: retry.firstFailedAt, retryAt: retry.retryAt };
  }
  return { backlog: after, dropped };
}
