import type { DeviceDelivery } from '../../test/support/gateway-double-records.js';

/**
 * One notification published to a device: its number (publish order), when
 * it was published, and when the worker had taken it in (its `notify`
 * reply: the deliveries stored and held), in ms since the epoch.
 */
export interface Published {
  readonly n: number;
  readonly at: number;
  readonly takenInAt: number;
}

export interface OutageCheckInput {
  /** Per pushkey, what was published to it, in publish order. */
  readonly published: ReadonlyMap<string, readonly Published[]>;
  /** Per pushkey, what its gateway answered 200 to, in the order received (the double's device log). */
  readonly delivered: ReadonlyMap<string, readonly DeviceDelivery[]>;
  /** When the gateway started failing (ms since the epoch). */
  readonly outageStart: number;
  /**
   * When the gateway got its first request answered 200 after the outage:
   * what the worker had taken in before then waited behind the breaker (the
   * backlog); what came later was delivered as usual.
   */
  readonly recoveredAt: number;
  /** `delivery.maxPendingPerDevice`. */
  readonly maxPending: number;
  /** A delivered notification's number, from its `event_id`. */
  readonly eventNumber: (eventId: string) => number;
}

/** How the devices' deliveries compare with the rules of docs/delivery.md; every count is of devices unless said otherwise. */
export interface OutageCheck {
  readonly devices: number;
  /** The cap checked against (`delivery.maxPendingPerDevice`). */
  readonly maxPending: number;
  /** Got a notification after a later one (publish order broken). */
  readonly outOfOrder: number;
  /**
   * Of those, got one for the first time after a later one: what docs/delivery.md promises never happens. The
   * rest got a run they had already had again (a lease lost or run out: at least once).
   */
  readonly firstOutOfOrder: number;
  /** Deliveries (not devices) of a notification the device already had. */
  readonly duplicates: number;
  /** Deliveries (not devices) of a notification never published to that device. */
  readonly strangers: number;
  /** Lack a notification published before their last delivery preceding the outage: lost while the gateway was healthy. */
  readonly lostBefore: number;
  /**
   * Their backlog: what the worker had taken in for them before the
   * gateway recovered, and had not delivered when the outage began. Summed
   * over devices: how many, and how many were delivered after the outage.
   */
  readonly backlogPublished: number;
  readonly backlogDelivered: number;
  /** Notifications (not devices) taken in after the gateway recovered, and of those delivered. */
  readonly laterPublished: number;
  readonly laterDelivered: number;
  /**
   * Devices that lack one of the notifications taken in after the recovery.
   * Not a loss by itself: an intake that lags behind the load hands a
   * device more than `maxPending` while its backlog still drains, and the
   * cap drops the oldest of those too (`capExplained` counts them).
   */
  readonly laterMissing: number;
  /**
   * Notifications (not devices) missing after the device's last delivery
   * before the outage that the cap accounts for: at least `maxPending`
   * newer ones had been taken in for the device before it received the
   * first newer one (or before the end, when it received none).
   */
  readonly capExplained: number;
  /**
   * Missing notifications (not devices) between the two: enough newer ones
   * published, not all taken in by the bench's clock (a reply comes a
   * little after the worker took its notify in).
   */
  readonly capUncertain: number;
  /**
   * Devices missing a notification the cap cannot account for: fewer than
   * `maxPending` newer ones had even been published by the time the device
   * received a newer one. A loss, whatever the cause.
   */
  readonly unexplained: number;
  /** The largest backlog of one device: the cap was exercised only when it is above `maxPending`. */
  readonly maxBacklog: number;
  /** Up to five devices that broke a rule, with what they got (event numbers, in order). */
  readonly examples: readonly string[];
  /** The most of its backlog one device got. */
  readonly maxFromBacklog: number;
  /** Got more than `maxPending` of their backlog: a flood. */
  readonly overCap: number;
  /** Did not get exactly the newest min(`maxPending`, backlog) of their backlog (one missing, or an older one instead). */
  readonly notNewest: number;
  /** Never got the newest notification published to them. */
  readonly lastMissing: number;
}

/**
 * Checks, device by device, what a gateway outage left: every delivery in
 * publish order and once; nothing lost before the outage; of the backlog
 * (what was waiting while the gateway failed) exactly the newest
 * `maxPending` delivered after it, no more; and the device's newest
 * notification delivered.
 *
 * The backlog is counted from the device's last delivery before the
 * outage, not from the outage's start: a notification published a moment
 * before the gateway failed may still have been waiting then. It ends at
 * what the worker had taken in when the gateway recovered, not at what was
 * published: an intake that lags behind the load takes notifications in
 * after the recovery, and those are delivered as usual.
 */
export function checkOutage(input: OutageCheckInput): OutageCheck {
  const counts = {
    outOfOrder: 0,
    firstOutOfOrder: 0,
    duplicates: 0,
    strangers: 0,
    lostBefore: 0,
    backlogPublished: 0,
    backlogDelivered: 0,
    laterPublished: 0,
    laterDelivered: 0,
    laterMissing: 0,
    capExplained: 0,
    capUncertain: 0,
    unexplained: 0,
    maxFromBacklog: 0,
    maxBacklog: 0,
    overCap: 0,
    notNewest: 0,
    lastMissing: 0,
  };
  const examples: string[] = [];
  for (const [pushkey, published] of input.published) {
    const before = { ...counts };
    const deliveries = input.delivered.get(pushkey) ?? [];
    const numbers = deliveries.map((d) => input.eventNumber(d.eventId));
    const publishedNumbers = new Set(published.map((p) => p.n));
    const seen = new Set<number>();
    let previous = -Infinity;
    let ordered = true;
    let firstOrdered = true;
    for (const n of numbers) {
      if (seen.has(n)) counts.duplicates += 1;
      else if (n < previous) firstOrdered = false;
      if (!publishedNumbers.has(n)) counts.strangers += 1;
      if (n <= previous) ordered = false;
      previous = Math.max(previous, n);
      seen.add(n);
    }
    if (!ordered) counts.outOfOrder += 1;
    if (!firstOrdered) counts.firstOutOfOrder += 1;

    const beforeOutage = deliveries.filter((d) => d.at < input.outageStart).map((d) => input.eventNumber(d.eventId));
    const lastBefore = beforeOutage.length === 0 ? -Infinity : Math.max(...beforeOutage);
    if (published.some((p) => p.n <= lastBefore && !seen.has(p.n))) counts.lostBefore += 1;

    const held = heldAtRecovery(published, seen, input, lastBefore);
    const backlog = published.filter((p) => p.n > lastBefore && held(p)).map((p) => p.n);
    const later = published.filter((p) => !held(p));
    counts.laterPublished += later.length;
    const laterDelivered = later.filter((p) => seen.has(p.n)).length;
    counts.laterDelivered += laterDelivered;
    if (laterDelivered < later.length) counts.laterMissing += 1;
    const fromBacklog = backlog.filter((n) => seen.has(n));
    counts.backlogPublished += backlog.length;
    counts.backlogDelivered += fromBacklog.length;
    counts.maxFromBacklog = Math.max(counts.maxFromBacklog, fromBacklog.length);
    counts.maxBacklog = Math.max(counts.maxBacklog, backlog.length);
    if (fromBacklog.length > input.maxPending) counts.overCap += 1;
    const newest = backlog.slice(-Math.min(input.maxPending, backlog.length));
    if (backlog.length > 0 && (fromBacklog.length !== newest.length || newest.some((n) => !seen.has(n))))
      counts.notNewest += 1;
    const last = published.at(-1);
    if (last !== undefined && !seen.has(last.n)) counts.lastMissing += 1;
    const missing = explainMissing(published, deliveries, input, lastBefore, seen);
    counts.capExplained += missing.explained;
    counts.capUncertain += missing.uncertain;
    if (missing.unexplained > 0) counts.unexplained += 1;
    const broke = (Object.keys(counts) as (keyof typeof counts)[]).some(
      (key) =>
        !key.startsWith('max') &&
        !key.startsWith('backlog') &&
        !key.startsWith('later') &&
        !key.startsWith('cap') &&
        counts[key] !== before[key],
    );
    if (broke && examples.length < 5) examples.push(`${pushkey}: ${numbers.join(' ')}`);
  }
  return { devices: input.published.size, maxPending: input.maxPending, ...counts, examples };
}

/**
 * Whether the worker had a notification when the gateway came back: taken
 * in (replied to) before then. A reply that came with parts still pending
 * (`takenInAt` NaN) says nothing of when the rest was taken in; a partition
 * takes its parts in publish order, so of those the worker had the oldest k,
 * for some k. The device is judged by the k that fits what it received, if
 * one does, else by all of them held (the reply came before the recovery).
 */
function heldAtRecovery(
  published: readonly Published[],
  seen: ReadonlySet<number>,
  input: OutageCheckInput,
  lastBefore: number,
): (p: Published) => boolean {
  const unknown = published.filter((p) => Number.isNaN(p.takenInAt)).map((p) => p.n);
  const heldWith = (k: number) => {
    const oldest = new Set(unknown.slice(0, k));
    return (p: Published) => p.takenInAt < input.recoveredAt || oldest.has(p.n);
  };
  for (let k = unknown.length; k >= 0; k -= 1) {
    const held = heldWith(k);
    const backlog = published.filter((p) => p.n > lastBefore && held(p)).map((p) => p.n);
    const newest = backlog.slice(-Math.min(input.maxPending, backlog.length));
    const fromBacklog = backlog.filter((n) => seen.has(n));
    const laterAll = published.filter((p) => !held(p)).every((p) => seen.has(p.n));
    if (fromBacklog.length === newest.length && newest.every((n) => seen.has(n)) && laterAll) return held;
  }
  return heldWith(unknown.length);
}

/** Whether the outage left what docs/delivery.md promises: order, nothing lost, the newest N of each backlog. */
export function outageCheckPassed(check: OutageCheck): boolean {
  return (
    check.outOfOrder === 0 &&
    check.duplicates === 0 &&
    check.strangers === 0 &&
    check.lostBefore === 0 &&
    check.overCap === 0 &&
    check.notNewest === 0 &&
    check.lastMissing === 0 &&
    check.unexplained === 0
  );
}

/**
 * Sorts a device's missing notifications (after its last delivery before
 * the outage) into those the per-device cap can account for and the rest.
 * A device keeps at most `maxPending` waiting besides the one in flight
 * and drops the oldest past that (src/delivery/device-backlog.ts), so a
 * missing notification x was dropped before the device received anything
 * newer than x, and only once `maxPending` newer ones waited. The worker
 * takes a notification in no earlier than its publish and no later than
 * its reply (`takenInAt`): if `maxPending` newer ones were taken in by
 * then, the cap dropped x (explained); if fewer than `maxPending` were
 * even published by then, no cap did (unexplained: a loss).
 */
function explainMissing(
  published: readonly Published[],
  deliveries: readonly DeviceDelivery[],
  input: OutageCheckInput,
  lastBefore: number,
  seen: ReadonlySet<number>,
): { readonly explained: number; readonly uncertain: number; readonly unexplained: number } {
  const result = { explained: 0, uncertain: 0, unexplained: 0 };
  for (const [index, p] of published.entries()) {
    if (p.n <= lastBefore || seen.has(p.n)) continue;
    const nextNewer = deliveries.find((d) => input.eventNumber(d.eventId) > p.n);
    const by = nextNewer?.at ?? Infinity;
    const newer = published.slice(index + 1);
    if (newer.filter((q) => q.takenInAt <= by).length >= input.maxPending) result.explained += 1;
    else if (newer.filter((q) => q.at <= by).length >= input.maxPending) result.uncertain += 1;
    else result.unexplained += 1;
  }
  return result;
}
