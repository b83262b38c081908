import { scheduleRetry, type RetryPolicy } from './retry-schedule.js';

export interface BacklogPolicy {
  /** The most notifications a device keeps waiting (≥ 1); older ones are dropped. */
  readonly maxPending: number;
}

/** Synapse sends a pusher at most 20 notifications per round; we keep at most 20 waiting. */
export const DEFAULT_BACKLOG_POLICY: BacklogPolicy = { maxPending: 20 };

export interface AgePolicy {
  /** A notification accepted longer ago than this is not sent any more (≥ 1). */
  readonly maxAgeMs: number;
}

/**
 * An hour. A push says "something happened, look": an hour late it still
 * points at a conversation the user may not have seen, while a push that
 * arrives hours or days after the event (the gateway was down, or kept
 * failing within the give-up window) is noise that wakes a phone for a
 * message long read elsewhere. An hour rides out a gateway restart or a
 * short outage at the backoff's pace (1 s doubling: a dozen tries within
 * the hour). It makes the 24 h give-up window moot for event
 * notifications; that window still ends a badge update's retries.
 */
export const DEFAULT_AGE_POLICY: AgePolicy = { maxAgeMs: 3_600_000 };

/** What the age rules need of a notification (the store's `PendingDelivery` has `acceptedAt`). */
export interface AgedItem {
  /** When the worker accepted the notification (ms). */
  readonly acceptedAt: number;
  /**
   * A badge update: counts and no event (a `notify` without `event_id`).
   * Counts are absolute, so of several waiting only the newest says
   * anything. Absent: an event notification.
   */
  readonly countsOnly?: boolean | undefined;
}

/**
 * One device's notifications, in publish order, and how its delivery is
 * going. Immutable: every function returns a new backlog, so a caller can
 * keep the old one until the new one is safely stored.
 *
 * Only the front is ever sent, and only one request at a time: that is
 * what keeps a device's notifications in publish order, and why later
 * ones wait behind a front that keeps failing. Each device has its own
 * backlog, so a failing device holds back no other.
 */
export interface DeviceBacklog<T> {
  /** Oldest first. `queue[0]`, the front, is the next to send, or the one in flight. */
  readonly queue: readonly T[];
  /** Whether the front has been sent and its outcome is not known yet. */
  readonly inFlight: boolean;
  /** The device's consecutive failed attempts: the step of its backoff. */
  readonly failures: number;
  /** When the front first failed (its give-up window starts there); undefined while it has not. */
  readonly frontFailedAt: number | undefined;
  /** The front is not sent again before this time. */
  readonly retryAt: number | undefined;
}

/** A backlog after a change, with what the change took out of it, for the caller to count. */
export interface BacklogChange<T> {
  readonly backlog: DeviceBacklog<T>;
  /** Dropped by the cap, oldest first. */
  readonly dropped: readonly T[];
  /** Given up: failing for the whole retry window. */
  readonly gaveUp: readonly T[];
}

export type NextSend<T> =
  | { readonly kind: 'send'; readonly item: T }
  | { readonly kind: 'wait'; readonly until: number }
  | { readonly kind: 'in-flight' }
  | { readonly kind: 'empty' };

export function emptyBacklog<T>(): DeviceBacklog<T> {
  return { queue: [], inFlight: false, failures: 0, frontFailedAt: undefined, retryAt: undefined };
}

/**
 * Adds a newly published notification at the back. At most `maxPending`
 * wait (besides one in flight, which cannot be unsent): past that the
 * oldest waiting one is dropped. Dropping as they arrive rather than when
 * the gateway recovers gives the same result, the newest N, while a long
 * outage holds no more than N per device in memory. A healthy gateway
 * rarely lets N pile up behind one request; when it does (a slow gateway,
 * a busy room), the older pushes are as stale as after an outage.
 */
export function enqueue<T>(backlog: DeviceBacklog<T>, item: T, policy: BacklogPolicy): BacklogChange<T> {
  return { ...capped({ ...backlog, queue: [...backlog.queue, item] }, policy), gaveUp: [] };
}

/**
 * What the device should do at `now`: send its front, wait until a time,
 * or nothing (its front is in flight, or nothing waits). A front whose
 * give-up window has ended without an attempt (its gateway's breaker kept
 * it from being sent, or the worker was down) is given up here, before it
 * could be sent stale, and the next one is due at once.
 *
 * This only looks: call `markSent` once the request is really going (the
 * gateway's breaker may still say no).
 */
export function nextSend<T>(
  backlog: DeviceBacklog<T>,
  now: number,
  policy: RetryPolicy,
): Omit<BacklogChange<T>, 'dropped'> & { readonly next: NextSend<T> } {
  const expired = !backlog.inFlight && backlog.frontFailedAt !== undefined && windowOver(backlog, now, policy);
  if (!expired) return { backlog, gaveUp: [], next: nextOf(backlog, now) };
  const movedOnBacklog = movedOn(backlog);
  return { backlog: movedOnBacklog, gaveUp: backlog.queue.slice(0, 1), next: nextOf(movedOnBacklog, now) };
}

/**
 * The front's give-up window is over. Its last retry is scheduled at the
 * window's very end (`scheduleRetry`), and the timer that brings it here
 * fires a little late on a busy event loop: that attempt is still made
 * within `baseMs` of the end, rather than given up unsent.
 */
function windowOver<T>(backlog: DeviceBacklog<T>, now: number, policy: RetryPolicy): boolean {
  const end = (backlog.frontFailedAt ?? now) + policy.giveUpAfterMs;
  if (now <= end) return false;
  const lastAttemptDue = backlog.retryAt !== undefined && backlog.retryAt >= end;
  return !(lastAttemptDue && now - end <= policy.baseMs);
}

function nextOf<T>(backlog: DeviceBacklog<T>, now: number): NextSend<T> {
  if (backlog.inFlight) return { kind: 'in-flight' };
  if (backlog.queue.length === 0) return { kind: 'empty' };
  if (backlog.retryAt !== undefined && now < backlog.retryAt) return { kind: 'wait', until: backlog.retryAt };
  return { kind: 'send', item: backlog.queue[0] as T };
}

/** The front's request has gone out. */
export function markSent<T>(backlog: DeviceBacklog<T>): DeviceBacklog<T> {
  if (backlog.inFlight || backlog.queue.length === 0) throw new Error('markSent: no front waiting to be sent');
  return { ...backlog, inFlight: true };
}

/**
 * The front's request is over and the front leaves: delivered (rejected
 * pushkeys included), or failed for good (a 4xx, a redirect, a refused
 * address), which retrying would not change. The gateway answered, so the
 * device's backoff starts again from the first step.
 */
export function settleDone<T>(backlog: DeviceBacklog<T>): DeviceBacklog<T> {
  assertInFlight(backlog, 'settleDone');
  return movedOn(backlog);
}

/**
 * The front's request was withdrawn before it went out (its partition's
 * lease came into doubt or moved while it waited for a slot): no attempt,
 * so nothing counts against the device; the front waits to be sent again.
 * It was spared by the cap only because it seemed on its way: while it
 * waited, newer ones may have filled the backlog, and if `maxPending`
 * newer ones wait it is the oldest of them and is dropped, as after a
 * failed attempt (`settleRetry`).
 */
export function settleWithdrawn<T>(backlog: DeviceBacklog<T>, policy: BacklogPolicy): Omit<BacklogChange<T>, 'gaveUp'> {
  assertInFlight(backlog, 'settleWithdrawn');
  return capped({ ...backlog, inFlight: false }, policy);
}

/** A failed attempt, worth retrying. */
export interface BacklogFailure {
  readonly now: number;
  /** The gateway's `Retry-After`, in ms from `now`. */
  readonly retryAfterMs?: number | undefined;
}

/**
 * The front's request failed in a way worth retrying: the front stays at
 * the front and the device waits for the next step of its backoff, unless
 * the notification has now failed for its whole window, in which case it is
 * given up and the device moves on to the next (due at once, from the first
 * backoff step, as Synapse does). While it waited in flight, newer ones may
 * have filled the backlog: if `maxPending` newer ones wait, it is the
 * oldest and is dropped.
 */
export function settleRetry<T>(
  backlog: DeviceBacklog<T>,
  failure: BacklogFailure,
  policies: { readonly retry: RetryPolicy; readonly backlog: BacklogPolicy },
  random: () => number,
): BacklogChange<T> {
  assertInFlight(backlog, 'settleRetry');
  const failures = backlog.failures + 1;
  const decision = scheduleRetry(
    policies.retry,
    {
      failures,
      firstFailedAt: backlog.frontFailedAt ?? failure.now,
      now: failure.now,
      retryAfterMs: failure.retryAfterMs,
    },
    random,
  );
  if ('giveUp' in decision) return { backlog: movedOn(backlog), dropped: [], gaveUp: backlog.queue.slice(0, 1) };
  const failed: DeviceBacklog<T> = {
    ...backlog,
    inFlight: false,
    failures,
    frontFailedAt: backlog.frontFailedAt ?? failure.now,
    retryAt: decision.retryAt,
  };
  return { ...capped(failed, policies.backlog), gaveUp: [] };
}

/**
 * `nextSend`, after the stale waiting notifications left (`withoutStale`):
 * what the scheduler calls when a maximum age applies. `expired` are to be
 * counted as `expired`, `dropped` (badge updates superseded by a newer one)
 * as `dropped`, `gaveUp` as `given_up`.
 */
export function nextFreshSend<T extends AgedItem>(
  backlog: DeviceBacklog<T>,
  now: number,
  policies: { readonly retry: RetryPolicy; readonly age: AgePolicy },
): BacklogChange<T> & { readonly expired: readonly T[]; readonly next: NextSend<T> } {
  const fresh = withoutStale(backlog, now, policies.age);
  const { next, backlog: after, gaveUp } = nextSend(fresh.backlog, now, policies.retry);
  return { backlog: after, dropped: fresh.dropped, gaveUp, expired: fresh.expired, next };
}

/**
 * Takes out of the waiting notifications (never the one in flight, which
 * cannot be unsent):
 *
 * - every badge update but the newest (`dropped`): its counts are out of
 *   date, the newest carries the current ones;
 * - every notification accepted more than `maxAgeMs` before `now`
 *   (`expired`), except the newest badge update. That one is the device's
 *   current badge: dropping it would leave a badge showing unread messages
 *   the user has read elsewhere until the next push, and an update of the
 *   badge is silent (low priority, nothing shown), so arriving late
 *   bothers no one.
 *
 * A front taken out takes its give-up window with it; the device keeps its
 * backoff, as when the cap drops it.
 */
export function withoutStale<T extends AgedItem>(
  backlog: DeviceBacklog<T>,
  now: number,
  policy: AgePolicy,
): { readonly backlog: DeviceBacklog<T>; readonly dropped: readonly T[]; readonly expired: readonly T[] } {
  const sending = backlog.inFlight ? backlog.queue.slice(0, 1) : [];
  const waiting = backlog.queue.slice(sending.length);
  const newestBadge = waiting.findLastIndex((item) => item.countsOnly === true);
  const oldestKept = now - policy.maxAgeMs;
  const kept: T[] = [];
  const dropped: T[] = [];
  const expired: T[] = [];
  let frontKept = false;
  for (const [index, item] of waiting.entries()) {
    const keep = index === newestBadge || (item.countsOnly !== true && item.acceptedAt >= oldestKept);
    if (keep) kept.push(item);
    else if (item.countsOnly === true) dropped.push(item);
    else expired.push(item);
    if (index === 0) frontKept = keep;
  }
  if (kept.length === waiting.length) return { backlog, dropped, expired };
  const frontLeft = sending.length === 0 && !frontKept;
  return {
    backlog: {
      ...backlog,
      queue: [...sending, ...kept],
      frontFailedAt: frontLeft ? undefined : backlog.frontFailedAt,
    },
    dropped,
    expired,
  };
}

/** The front leaves and the device starts afresh with the next one. */
function movedOn<T>(backlog: DeviceBacklog<T>): DeviceBacklog<T> {
  return { queue: backlog.queue.slice(1), inFlight: false, failures: 0, frontFailedAt: undefined, retryAt: undefined };
}

/**
 * The backlog with its waiting notifications replaced (the front in
 * flight stays), capped like `enqueue`: for a worker that takes over older
 * notifications of a device it already holds newer ones of, which must go
 * first.
 */
export function withWaiting<T>(
  backlog: DeviceBacklog<T>,
  waiting: readonly T[],
  policy: BacklogPolicy,
): Omit<BacklogChange<T>, 'gaveUp'> {
  const sending = backlog.inFlight ? backlog.queue.slice(0, 1) : [];
  return capped({ ...backlog, queue: [...sending, ...waiting] }, policy);
}

/**
 * Drops the oldest waiting notifications past `maxPending`. A front that
 * is dropped takes its give-up window with it, but the device keeps its
 * backoff: its gateway is failing no less for it.
 */
function capped<T>(backlog: DeviceBacklog<T>, policy: BacklogPolicy): Omit<BacklogChange<T>, 'gaveUp'> {
  const sending = backlog.inFlight ? backlog.queue.slice(0, 1) : [];
  const waiting = backlog.queue.slice(sending.length);
  const excess = Math.max(0, waiting.length - policy.maxPending);
  if (excess === 0) return { backlog, dropped: [] };
  const frontDropped = sending.length === 0;
  return {
    backlog: {
      ...backlog,
      queue: [...sending, ...waiting.slice(excess)],
      frontFailedAt: frontDropped ? undefined : backlog.frontFailedAt,
    },
    dropped: waiting.slice(0, excess),
  };
}

function assertInFlight<T>(backlog: DeviceBacklog<T>, operation: string): void {
  if (!backlog.inFlight) throw new Error(`${operation}: the front is not in flight`);
}
