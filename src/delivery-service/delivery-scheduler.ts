import type { Logger } from '../logging/logger.js';
import { gatewayOrigin } from '../delivery/circuit-breaker-origin.js';
import {
  admit,
  breakerIsIdle,
  newBreaker,
  settleRequest,
  type BreakerPolicy,
  type BreakerTicket,
  type CircuitBreaker,
} from '../delivery/circuit-breaker.js';
import {
  emptyBacklog,
  enqueue,
  markSent,
  nextFreshSend,
  settleDone,
  settleRetry,
  settleWithdrawn,
  withWaiting,
  type AgePolicy,
  type BacklogPolicy,
  type DeviceBacklog,
} from '../delivery/device-backlog.js';
import { PusherChanges } from '../delivery/pusher-changes.js';
import { recheckDevices } from '../delivery/pusher-recheck.js';
import { pushkeyTag } from '../delivery/pushkey-tag.js';
import { classifyExchange, type GatewayExchange, type ResponseOutcome } from '../delivery/response-outcome.js';
import type { RetryPolicy } from '../delivery/retry-schedule.js';
import { sentRegistration } from '../delivery/sent-registration.js';
import type { StoredPusher } from '../pushers/pusher.js';
import type { RejectedRegistration } from '../pushers/rejected-registration.js';
import type { DeliveryStore, PendingDelivery } from '../store/delivery-store.js';
import { PartitionSends, settledWithin } from './partition-sends.js';

/** The HTTP client, as the scheduler uses it (delivery-http/gateway-client.ts). */
export interface GatewaySender {
  /**
   * `userId`: whose request it is, for the per-user cap on requests in flight; `signal` and `sendable`
   * withdraw it (`not-sent`, `withdrawn`) while it waits for a slot (gateway-client.ts `SendContext`).
   */
  send(
    url: string,
    body: string,
    context: { readonly userId: string; readonly signal?: AbortSignal; readonly sendable?: () => boolean },
  ): Promise<GatewayExchange>;
}

/** Reads a user's pushers now (the pusher store). */
export interface PusherLookup {
  listPushers(userId: string): Promise<readonly StoredPusher[]>;
  listPushersOfUsers(userIds: readonly string[]): Promise<ReadonlyMap<string, readonly StoredPusher[]>>;
}

/**
 * Removes the pusher a gateway rejected, if it is still the registration
 * the request was sent for, and announces the change (an `m.pushers`
 * change event).
 */
export interface RejectedPusherRemover {
  removeRejected(rejected: RejectedRegistration): Promise<void>;
}

/**
 * What happened to a gateway request and its devices:
 * - delivered: the gateway took it (its devices, rejected ones aside);
 * - rejected: devices whose pushkey the gateway rejected (their pushers are removed);
 * - retried: the attempt failed in a way worth retrying;
 * - failed: a 4xx or a redirect, for good (pushers kept);
 * - refused: the gateway's address is one deliveries may not go to;
 * - given_up: still failing at the end of the give-up window;
 * - dropped: pushed out of a device's backlog by newer notifications (or a badge update by a newer one);
 * - expired: waited longer than the maximum age (`delivery.maxAgeMs`): not sent any more;
 * - pusher_removed: its pushers were removed before it could be sent.
 */
export type DeliveryOutcome =
  'delivered' | 'rejected' | 'retried' | 'failed' | 'refused' | 'given_up' | 'dropped' | 'expired' | 'pusher_removed';

/** Narrow hook for the delivery metrics; tests pass object literals. */
export interface DeliveryObserver {
  /** A request (and `devices` of its devices) ended an attempt this way. */
  settled(url: string, outcome: DeliveryOutcome, devices: number): void;
  /** The gateway answered (or failed to) after this long. */
  gatewayAnswered(url: string, seconds: number): void;
  /** A request was delivered this long after its `notify` was taken in. */
  deliveredAfter(seconds: number): void;
  /** A device's request waits because its gateway's breaker is open. */
  heldByBreaker(url: string): void;
}

/** Whether this worker may send for a partition now: it holds the partition's lease, and the lease is not in doubt. */
export interface PartitionGate {
  sendable(partition: number, now: number): boolean;
}

export interface DeliverySchedulerOptions {
  readonly store: Pick<DeliveryStore, 'remove' | 'saveRetry'>;
  readonly gate: PartitionGate;
  readonly sender: GatewaySender;
  readonly pushers: PusherLookup;
  readonly remover: RejectedPusherRemover;
  readonly retry: RetryPolicy;
  readonly backlog: BacklogPolicy;
  readonly age: AgePolicy;
  readonly breaker: BreakerPolicy;
  readonly logger: Logger;
  readonly observer?: DeliveryObserver | undefined;
  /** Users whose pusher changes are remembered (pusher-changes.ts). */
  readonly pusherChangesKept?: number;
  /**
   * How long `close` waits for requests in flight before it aborts them
   * (`abortSends`): a gateway that hangs must not hold a shutdown past its
   * timeout, with finished requests not yet deleted.
   */
  readonly closeGraceMs?: number;
  /** Aborts the sends in flight (the gateway client's connections): the requests stay in the store. */
  readonly abortSends?: () => Promise<void>;
  readonly now?: () => number;
  readonly random?: () => number;
}

/** One device queue: its backlog and the timer that brings its next retry. */
interface DeviceQueue {
  readonly key: string;
  readonly partition: number;
  readonly origin: string;
  backlog: DeviceBacklog<PendingDelivery>;
  timer?: NodeJS.Timeout | undefined;
  /** Its front is being checked against the user's pushers. */
  checking: boolean;
  /** The front's ID, and the count of pusher changes when its last check against the pushers began. */
  checked?: { readonly id: string; readonly tick: number };
  /**
   * The front's ID when it is still out in a send this worker began before
   * it let the partition go: the queue waits for that send's verdict as
   * for one of its own (`#adopt`), so nothing newer goes out meanwhile.
   */
  adopting?: string | undefined;
}

/** One gateway origin: its breaker and the device queues waiting for it to admit a request. */
interface Origin {
  breaker: CircuitBreaker;
  /** In the order they started waiting: first come, first served. */
  readonly waiters: Set<string>;
  timer?: NodeJS.Timeout | undefined;
}

const NOT_A_URL_ORIGIN = 'invalid:';
const REMOVE_CHUNK = 1000;
const REFUSED_LOGGED_MAX = 100_000;

/**
 * Sends what the intake stored (docs/delivery.md): each device queue one
 * request at a time in order, later ones waiting behind a failing one,
 * retries at the backoff's pace, at most `maxPending` waiting per device,
 * each gateway origin behind its breaker. The pure decisions are
 * delivery/: this class keeps their state, its timers, and the I/O.
 *
 * It sends only for partitions whose lease this worker holds (`gate`);
 * a request leaves the store only once it is done with. A worker that dies
 * loses nothing: another takes its partitions over once their leases have
 * expired, and a gateway may see a request twice (at least once).
 */
export class DeliveryScheduler {
  readonly #options: DeliverySchedulerOptions;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #queues = new Map<string, DeviceQueue>();
  readonly #origins = new Map<string, Origin>();
  /**
   * Requests held in memory (waiting or in flight), with when they were
   * planned on this worker's clock: `-Infinity` for requests taken over
   * from the store, planned on another worker's clock before changes this
   * worker may not have heard of (checked against the pushers before
   * they go).
   */
  readonly #held = new Map<string, number>();
  /** Done with, not yet deleted from the store (still in this worker's partition there). */
  readonly #removing = new Set<string>();
  /** Sends in flight by partition, and what withdraws those still waiting for a slot. */
  readonly #sends = new PartitionSends();
  readonly #changes: PusherChanges;
  /** Pushers whose refused address was logged: once per pusher. */
  readonly #refusedLogged = new Set<string>();
  #removeTimer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  /** Device queues that had a request due while their partition's lease was in doubt: moved on by `resume`. */
  readonly #parked = new Set<string>();
  /**
   * Requests still out in a send whose partition was let go without
   * waiting for it (a lost lease): taken back by this worker before the
   * send ends, the new device queue adopts the send (`#adopt`).
   */
  readonly #outOfReleased = new Set<string>();
  #closed = false;

  constructor(options: DeliverySchedulerOptions) {
    this.#options = options;
    this.#log = options.logger;
    this.#now = options.now ?? Date.now;
    this.#random = options.random ?? Math.random;
    this.#changes = new PusherChanges(options.pusherChangesKept ?? 100_000);
  }

  /** Requests this worker holds and has not finished. */
  get pending(): number {
    return this.#held.size;
  }

  /** When the oldest request this worker holds was taken in; undefined when it holds none. */
  oldestAcceptedAt(): number | undefined {
    let oldest: number | undefined;
    for (const queue of this.#queues.values()) {
      for (const item of queue.backlog.queue)
        if (oldest === undefined || item.acceptedAt < oldest) oldest = item.acceptedAt;
    }
    return oldest;
  }

  /** The pushers of `userId` changed (a change event): requests planned before are checked again before they go. */
  pushersChanged(userId: string): void {
    this.#changes.changed(userId, this.#now());
  }

  /** Change events may have been missed (the subscription was lost): every request planned so far is checked again. */
  changesMissed(): void {
    this.#changes.forgetAll(this.#now());
  }

  /**
   * Takes requests into the device queues: the intake's new ones
   * (`plannedAt` when they were planned, on this worker's clock), or those
   * of a partition taken over (`plannedAt` undefined: checked against the
   * pushers before they go). Those already held are ignored.
   */
  hold(deliveries: readonly PendingDelivery[], plannedAt?: number): void {
    if (this.#closed) return;
    const byKey = new Map<string, PendingDelivery[]>();
    const adopted = new Set<string>();
    for (const delivery of deliveries) {
      if (this.#removing.has(delivery.id)) continue;
      if (this.#outOfReleased.delete(delivery.id)) adopted.add(delivery.id);
      else if (this.#held.has(delivery.id)) continue;
      this.#held.set(delivery.id, plannedAt ?? Number.NEGATIVE_INFINITY);
      const list = byKey.get(delivery.key);
      if (list === undefined) byKey.set(delivery.key, [delivery]);
      else list.push(delivery);
    }
    for (const [key, list] of byKey) {
      this.#add(key, list);
      this.#adopt(key, adopted);
      this.#pump(key);
    }
  }

  /**
   * A partition taken back while a send of its earlier hold is still out
   * (its lease was lost, so the hand-over did not wait for the send): the
   * store still lists that request, and sending what follows it now could
   * put a newer notification before it, should its send fail and go again.
   * The queue takes the send as its own in flight; its verdict (`#send`)
   * settles it here. A request the queue does not have at its front
   * (dropped by the cap, or behind an older one) is sent again instead,
   * a duplicate at worst.
   */
  #adopt(key: string, adopted: ReadonlySet<string>): void {
    const queue = this.#queues.get(key);
    const front = queue?.backlog.queue[0];
    if (queue === undefined || front === undefined || queue.backlog.inFlight || !adopted.has(front.id)) return;
    queue.backlog = markSent(queue.backlog);
    queue.adopting = front.id;
  }

  #add(key: string, list: PendingDelivery[]): void {
    let queue = this.#queues.get(key);
    const first = list[0] as PendingDelivery;
    if (queue === undefined) {
      queue = {
        key,
        partition: first.partition,
        origin: gatewayOrigin(first.url) ?? NOT_A_URL_ORIGIN,
        backlog: emptyBacklog(),
        checking: false,
      };
      this.#queues.set(key, queue);
    }
    const policy = this.#options.backlog;
    const last = queue.backlog.queue.at(-1);
    const inOrder = list.every((item, index) => index === 0 || (list[index - 1] as PendingDelivery).seq <= item.seq);
    let dropped: readonly PendingDelivery[];
    if (inOrder && (last === undefined || last.seq <= first.seq)) {
      // The usual case: newer notifications at the back.
      const collected: PendingDelivery[] = [];
      for (const item of list) {
        const change = enqueue(queue.backlog, item, policy);
        queue.backlog = change.backlog;
        collected.push(...change.dropped);
      }
      dropped = collected;
    } else {
      // Older ones taken over from a dead worker go before the newer ones held.
      const frontBefore = queue.backlog.queue[0]?.id;
      const waiting = [...queue.backlog.queue.slice(queue.backlog.inFlight ? 1 : 0), ...list].sort(
        (a, b) => a.seq - b.seq,
      );
      const change = withWaiting(queue.backlog, waiting, policy);
      queue.backlog = change.backlog;
      dropped = change.dropped;
      const front = queue.backlog.queue[0];
      if (!queue.backlog.inFlight && front !== undefined && front.id !== frontBefore) {
        queue.backlog = { ...queue.backlog, frontFailedAt: front.retry?.firstFailedAt, retryAt: front.retry?.retryAt };
      }
    }
    // A request taken over carries the retry state its last holder saved.
    if (queue.backlog.queue.length === list.length && !queue.backlog.inFlight) {
      const retry = queue.backlog.queue[0]?.retry;
      if (retry !== undefined)
        queue.backlog = {
          ...queue.backlog,
          failures: retry.failures,
          frontFailedAt: retry.firstFailedAt,
          retryAt: retry.retryAt,
        };
    }
    this.#finish(dropped, 'dropped');
  }

  /** Moves a device queue on: sends its front, or waits for its retry, its breaker or a slot. */
  #pump(key: string): void {
    const queue = this.#queues.get(key);
    if (queue === undefined || this.#closed || queue.checking) return;
    const now = this.#now();
    const { backlog, gaveUp, next, expired, dropped } = nextFreshSend(queue.backlog, now, {
      retry: this.#options.retry,
      age: this.#options.age,
    });
    queue.backlog = backlog;
    this.#finish(gaveUp, 'given_up');
    this.#finish(expired, 'expired');
    this.#finish(dropped, 'dropped');
    switch (next.kind) {
      case 'empty':
        clearTimeout(queue.timer);
        this.#queues.delete(key);
        return;
      case 'in-flight':
        return;
      case 'wait':
        this.#wakeAt(queue, next.until);
        return;
      case 'send':
        break;
    }
    const item = next.item;
    const plannedAt = this.#held.get(item.id) ?? Number.NEGATIVE_INFINITY;
    const stale =
      queue.checked?.id === item.id
        ? this.#changes.changedAfter(item.userId, queue.checked.tick)
        : plannedAt === Number.NEGATIVE_INFINITY || this.#changes.changedSince(item.userId, plannedAt);
    if (stale) {
      queue.checking = true;
      void this.#recheck(queue, item);
      return;
    }
    // The partition's lease is in doubt (renewals failing) or being handed over: another worker may send these soon.
    if (!this.#options.gate.sendable(queue.partition, now)) {
      this.#parked.add(key);
      return;
    }
    const origin = this.#originOf(queue.origin);
    const admission = admit(origin.breaker, now);
    if (!admission.send) {
      origin.waiters.add(key);
      if (admission.reason === 'open') {
        this.#options.observer?.heldByBreaker(item.url);
        this.#probeAt(origin, admission.probeAt);
      }
      return;
    }
    origin.breaker = admission.breaker;
    origin.waiters.delete(key);
    queue.backlog = markSent(queue.backlog);
    this.#track(this.#send(queue, item, admission.ticket), queue.partition);
  }

  /** The front was planned before its user's pushers changed: look at them again before sending. */
  async #recheck(queue: DeviceQueue, item: PendingDelivery): Promise<void> {
    const at = this.#now();
    const tick = this.#changes.tick;
    try {
      const pushers = await this.#options.pushers.listPushers(item.userId);
      const verdict = recheckDevices(item, pushers);
      // The front changed during the read (dropped by the cap, say): the new front is checked when the
      // queue moves on below, which it must (returning here left the queue waiting for its next notify).
      if (queue.backlog.queue[0]?.id === item.id && !queue.backlog.inFlight) {
        if (verdict.kind === 'none') {
          queue.backlog = settleDone(markSent(queue.backlog));
          this.#finish([item], 'pusher_removed');
        } else if (verdict.kind === 'narrowed') {
          const removed = item.devices.length - verdict.devices.length;
          this.#options.observer?.settled(item.url, 'pusher_removed', removed);
          const narrowed: PendingDelivery = { ...item, bodyJson: verdict.bodyJson, devices: verdict.devices };
          queue.backlog = { ...queue.backlog, queue: [narrowed, ...queue.backlog.queue.slice(1)] };
        }
        // A change after the read began is caught next time (counted, not timed: the same millisecond too).
        // A front with no device left says nothing of the next one's devices: that one is checked on its own.
        if (verdict.kind !== 'none') queue.checked = { id: narrowedId(queue, item), tick };
      }
    } catch (error) {
      // The pushers cannot be read now: try again at the retry pace, without counting it against the gateway.
      this.#log.warn(
        { err: loggable(error), user: item.userId },
        'cannot read the pushers of a pending notification; retrying',
      );
      queue.backlog = { ...queue.backlog, retryAt: at + this.#options.retry.baseMs };
    } finally {
      queue.checking = false;
    }
    this.#pump(queue.key);
  }

  async #send(sentBy: DeviceQueue, item: PendingDelivery, ticket: BreakerTicket): Promise<void> {
    let queue = sentBy;
    const started = performance.now();
    let exchange: GatewayExchange;
    try {
      exchange = await this.#options.sender.send(item.url, item.bodyJson, {
        userId: item.userId,
        signal: this.#sends.signalOf(queue.partition),
        // Asked again right before the request goes out: it may have waited past the lease's two thirds.
        sendable: () => !this.#closed && this.#options.gate.sendable(queue.partition, this.#now()),
      });
    } catch (error) {
      // The client is closing (shutdown): the request stays in the store for the next holder.
      if (!this.#closed) this.#log.error({ err: error }, 'gateway client failed unexpectedly');
      exchange = { kind: 'connection-error', reason: 'client-closed' };
    }
    const now = this.#now();
    if (exchange.kind !== 'address-refused' && exchange.kind !== 'not-sent')
      this.#options.observer?.gatewayAnswered(item.url, (performance.now() - started) / 1000);
    const outcome = classifyExchange(exchange, now);
    // Let go while out, and taken back since: the queue now holding the device waits for this verdict.
    this.#outOfReleased.delete(item.id);
    const current = this.#queues.get(queue.key);
    if (current !== queue && current?.adopting === item.id) queue = current;
    queue.adopting = undefined;
    this.#settleBreaker(queue.origin, ticket, outcome, now);
    // Settled even while closing: a delivered request is deleted before the lease is given up.
    switch (outcome.kind) {
      case 'delivered':
        this.#delivered(queue, item, outcome.rejected, now);
        break;
      case 'failed':
        this.#failed(queue, item, outcome, exchange);
        break;
      case 'retry':
        // Withdrawn is no failure of the device: it waits for the lease (parked), or is the next holder's.
        if (exchange.kind === 'not-sent' && exchange.reason === 'withdrawn')
          queue.backlog = settleWithdrawn(queue.backlog);
        else this.#retry(queue, item, outcome, now);
        break;
    }
    // Its partition was handed over meanwhile: what it still holds is the next holder's now.
    if (this.#queues.get(queue.key) !== queue) {
      for (const waiting of queue.backlog.queue) this.#held.delete(waiting.id);
      return;
    }
    this.#pump(queue.key);
  }

  #delivered(queue: DeviceQueue, item: PendingDelivery, rejected: readonly string[], now: number): void {
    queue.backlog = settleDone(queue.backlog);
    const rejectedSet = new Set(rejected);
    const gone = item.devices.filter((device) => rejectedSet.has(device.pushkey));
    for (const device of gone) {
      const key = sentRegistration(item, device);
      this.#log.info(
        { user: item.userId, appId: device.appId, pushkey: pushkeyTag(device.pushkey) },
        'the gateway rejected a pushkey: its pusher is removed',
      );
      this.#options.remover.removeRejected(key).catch((error: unknown) => {
        this.#log.warn(
          { err: loggable(error), user: item.userId, appId: device.appId, pushkey: pushkeyTag(device.pushkey) },
          'could not remove a rejected pusher; the next push to it will try again',
        );
      });
    }
    if (gone.length > 0) this.#options.observer?.settled(item.url, 'rejected', gone.length);
    this.#options.observer?.settled(item.url, 'delivered', item.devices.length - gone.length);
    this.#options.observer?.deliveredAfter(Math.max(0, now - item.acceptedAt) / 1000);
    this.#remove(item.id);
  }

  #failed(
    queue: DeviceQueue,
    item: PendingDelivery,
    outcome: Extract<ResponseOutcome, { kind: 'failed' }>,
    exchange: GatewayExchange,
  ): void {
    queue.backlog = settleDone(queue.backlog);
    const devices = item.devices.map((device) => `${device.appId}/${pushkeyTag(device.pushkey)}`);
    if (outcome.cause === 'address-refused') {
      const first = devices.some((device) => !this.#refusedLogged.has(`${item.userId} ${device}`));
      if (first) {
        if (this.#refusedLogged.size > REFUSED_LOGGED_MAX) this.#refusedLogged.clear();
        for (const device of devices) this.#refusedLogged.add(`${item.userId} ${device}`);
        this.#log.warn(
          {
            user: item.userId,
            devices,
            host: hostOf(item.url),
            ...(exchange.kind === 'address-refused' ? { rule: exchange.rule, reason: exchange.reason } : {}),
          },
          "a pusher's gateway address is not allowed: nothing sent (PUSH_GATEWAY_IP_ALLOWLIST opens ranges)",
        );
      }
      this.#options.observer?.settled(item.url, 'refused', item.devices.length);
    } else {
      this.#log.warn(
        { user: item.userId, devices, host: hostOf(item.url), status: outcome.status, cause: outcome.cause },
        'the gateway refused a notification for good; the pushers are kept',
      );
      this.#options.observer?.settled(item.url, 'failed', item.devices.length);
    }
    this.#remove(item.id);
  }

  #retry(
    queue: DeviceQueue,
    item: PendingDelivery,
    outcome: Extract<ResponseOutcome, { kind: 'retry' }>,
    now: number,
  ): void {
    // A gateway's wait longer than the longest backoff would give the notification up unsent (it ends past the window).
    const retryAfterMs =
      outcome.retryAfterMs === undefined ? undefined : Math.min(outcome.retryAfterMs, this.#options.retry.maxMs);
    const change = settleRetry(
      queue.backlog,
      { now, retryAfterMs },
      { retry: this.#options.retry, backlog: this.#options.backlog },
      this.#random,
    );
    queue.backlog = change.backlog;
    this.#options.observer?.settled(item.url, 'retried', item.devices.length);
    this.#finish(change.dropped, 'dropped');
    if (change.gaveUp.length > 0) {
      this.#log.warn(
        { user: item.userId, host: hostOf(item.url), cause: outcome.cause, status: outcome.status },
        'a notification failed for its whole retry window: given up',
      );
      this.#finish(change.gaveUp, 'given_up');
      return;
    }
    const { failures, frontFailedAt, retryAt } = queue.backlog;
    // A send cut short by the shutdown says nothing about the gateway: the next holder keeps the backoff as it was.
    if (this.#closed) return;
    if (queue.backlog.queue[0]?.id === item.id && frontFailedAt !== undefined && retryAt !== undefined) {
      this.#options.store.saveRetry(item.id, { failures, firstFailedAt: frontFailedAt, retryAt }).catch(() => {
        // Only the pace after a crash depends on it: the next holder starts the backoff again.
      });
    }
  }

  #settleBreaker(originKey: string, ticket: BreakerTicket, outcome: ResponseOutcome, now: number): void {
    const origin = this.#originOf(originKey);
    const before = origin.breaker;
    origin.breaker = settleRequest(before, ticket, outcome, now, this.#options.breaker, this.#random);
    const after = origin.breaker;
    if (after.state === 'open' && before.state !== 'open' && after.generation !== before.generation) {
      this.#log.warn(
        { host: originKey, probeInMs: after.probeAt - now, openings: after.openings },
        'a push gateway keeps failing: only probes go to it until it answers',
      );
    } else if (after.state === 'closed' && before.state === 'half-open') {
      this.#log.info({ host: originKey }, 'a push gateway answers again');
    }
    this.#wakeWaiters(originKey, origin);
  }

  /** Lets as many waiting device queues try as the breaker now has room for. */
  #wakeWaiters(originKey: string, origin: Origin): void {
    if (origin.breaker.state === 'open') {
      if (origin.waiters.size > 0) this.#probeAt(origin, origin.breaker.probeAt);
      return;
    }
    // While the breaker has room: a waiter that sends nothing (its retry is later, its pushers are being
    // checked, it is empty now) leaves the room to the next. A waiter turned away goes to the back of the
    // set, and the breaker is then full: the loop ends.
    for (const key of origin.waiters) {
      const { breaker } = origin;
      if (breaker.state !== 'closed' || breaker.inFlight >= breaker.limit) break;
      origin.waiters.delete(key);
      this.#pump(key);
    }
    if (origin.waiters.size === 0 && breakerIsIdle(origin.breaker)) this.#origins.delete(originKey);
  }

  #probeAt(origin: Origin, at: number): void {
    if (origin.timer !== undefined) return;
    origin.timer = setTimeout(
      () => {
        origin.timer = undefined;
        const { breaker } = origin;
        // Opened again since this timer was set: its probe is due later.
        if (breaker.state === 'open' && breaker.probeAt > this.#now()) {
          this.#probeAt(origin, breaker.probeAt);
          return;
        }
        // The first waiter with a request due sends the probe; the others wait for its verdict.
        for (const key of [...origin.waiters]) {
          origin.waiters.delete(key);
          this.#pump(key);
          if (origin.breaker.state !== 'open') break;
        }
      },
      Math.max(0, at - this.#now()),
    );
    origin.timer.unref();
  }

  #wakeAt(queue: DeviceQueue, at: number): void {
    clearTimeout(queue.timer);
    queue.timer = setTimeout(
      () => {
        queue.timer = undefined;
        this.#pump(queue.key);
      },
      Math.max(0, at - this.#now()),
    );
    queue.timer.unref();
  }

  #originOf(key: string): Origin {
    let origin = this.#origins.get(key);
    if (origin === undefined) {
      origin = { breaker: newBreaker(this.#options.breaker), waiters: new Set() };
      this.#origins.set(key, origin);
    }
    return origin;
  }

  /** Requests done with without a send of their own: counted and removed. */
  #finish(items: readonly PendingDelivery[], outcome: DeliveryOutcome): void {
    for (const item of items) {
      this.#options.observer?.settled(item.url, outcome, item.devices.length);
      this.#remove(item.id);
    }
  }

  #remove(id: string): void {
    this.#held.delete(id);
    this.#removing.add(id);
    if (this.#removeTimer === undefined && this.#flushing === undefined) {
      // Deleted in batches: a fan-out of 10,000 requests costs a handful of store round trips.
      this.#removeTimer = setTimeout(() => {
        this.#removeTimer = undefined;
        void this.#flushRemovals();
      }, 5);
    }
  }

  async #flushRemovals(): Promise<void> {
    if (this.#flushing !== undefined) return this.#flushing;
    const run = async () => {
      while (this.#removing.size > 0) {
        const ids = [...this.#removing].slice(0, REMOVE_CHUNK);
        try {
          await this.#options.store.remove(ids);
          for (const id of ids) this.#removing.delete(id);
        } catch (error) {
          this.#log.warn(
            { err: loggable(error), requests: ids.length },
            'cannot delete delivered notifications yet; retrying',
          );
          if (this.#closed) return;
          await new Promise((resolve) => setTimeout(resolve, 1000));
        }
      }
    };
    this.#flushing = run().finally(() => {
      this.#flushing = undefined;
    });
    return this.#flushing;
  }

  /**
   * The partition's lease is in doubt no more (a renewal went through):
   * the device queues that waited for it move on.
   */
  resume(): void {
    const parked = [...this.#parked];
    this.#parked.clear();
    for (const key of parked) this.#pump(key);
  }

  /**
   * Hands a partition over: its device queues are let go (what waits
   * stays in the store for the next holder), the sends in flight are
   * awaited for up to `graceMs`, and what is done is deleted. A send still
   * in flight after the grace may reach its gateway twice (the next holder
   * sends it again). Not `handedOver` (its lease lost or run out): nothing
   * is awaited. The deletions go on by themselves; waited for, they would
   * hold the partition, neither run nor free to claim, for as long as the
   * store takes to delete every partition's backlog (minutes, under load).
   */
  async releasePartition(partition: number, graceMs: number, handedOver = true): Promise<void> {
    // What waits for a slot never goes out now: the next holder sends it, and newer ones.
    this.#sends.withdraw(partition);
    for (const [key, queue] of this.#queues) {
      if (queue.partition !== partition) continue;
      clearTimeout(queue.timer);
      this.#queues.delete(key);
      this.#parked.delete(key);
      const inFlight = queue.backlog.inFlight ? queue.backlog.queue[0]?.id : undefined;
      for (const item of queue.backlog.queue) if (item.id !== inFlight) this.#held.delete(item.id);
      if (inFlight !== undefined) this.#outOfReleased.add(inFlight);
      for (const origin of this.#origins.values()) origin.waiters.delete(key);
    }
    if (!handedOver) return;
    await settledWithin(this.#sends.started(partition), graceMs);
    await this.#flushRemovals();
  }

  #track(work: Promise<void>, partition: number): void {
    const logged = work.catch((error: unknown) => {
      this.#log.error({ err: error }, 'delivery failed unexpectedly');
    });
    this.#sends.track(logged, partition);
  }

  /**
   * Stops sending: timers cleared, requests in flight awaited (each ends
   * within the client's timeouts, or at once when the client closes),
   * and finished ones deleted. The caller then gives the partitions'
   * leases up, so that another worker carries on at once.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#removeTimer);
    this.#removeTimer = undefined;
    for (const queue of this.#queues.values()) clearTimeout(queue.timer);
    for (const origin of this.#origins.values()) clearTimeout(origin.timer);
    // The leases are still renewed while the sends in flight finish: they are still this worker's.
    // Those still waiting for a slot stay in the store for the next holder.
    this.#sends.withdrawAll();
    const inFlight = Promise.allSettled(this.#sends.started());
    const graceMs = this.#options.closeGraceMs ?? 5_000;
    const finished = await settledWithin(this.#sends.started(), graceMs);
    if (!finished) {
      this.#log.warn({ inFlight: this.#sends.size, graceMs }, 'gateway requests still in flight at shutdown: aborted');
      await this.#options.abortSends?.();
      await inFlight;
    }
    await this.#flushRemovals();
  }
}

/** The front's ID after a check (a narrowed front keeps its ID). */
function narrowedId(queue: DeviceQueue, item: PendingDelivery): string {
  return queue.backlog.queue[0]?.id ?? item.id;
}

/**
 * A store error as a log line may hold it: its kind, message and code. A
 * driver's bulk-write error carries the documents it failed on, and those
 * hold pushkeys, which never go into a log.
 */
export function loggable(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const code = (error as { code?: unknown }).code;
  return {
    type: error.name,
    message: error.message,
    ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}),
  };
}

function hostOf(url: string): string {
  return URL.parse(url)?.host ?? 'invalid';
}
