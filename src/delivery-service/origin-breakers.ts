import type { Logger } from '../logging/logger.js';
import {
  admit,
  breakerIsIdle,
  newBreaker,
  settleRequest,
  type BreakerPolicy,
  type BreakerTicket,
  type CircuitBreaker,
} from '../delivery/circuit-breaker.js';
import type { ResponseOutcome } from '../delivery/response-outcome.js';
import type { DeliveryObserver } from './delivery-observer.js';

/** One gateway origin: its breaker and the device queues waiting for it to admit a request. */
interface Origin {
  breaker: CircuitBreaker;
  /** In the order they started waiting: first come, first served. */
  readonly waiters: Set<string>;
  timer?: NodeJS.Timeout | undefined;
}

export interface OriginBreakersOptions {
  readonly policy: BreakerPolicy;
  readonly logger: Logger;
  readonly observer?: DeliveryObserver | undefined;
  readonly now: () => number;
  readonly random: () => number;
  /** A waiting device queue may try again (the scheduler moves it on). */
  readonly wake: (key: string) => void;
}

/**
 * Each gateway origin behind its breaker (delivery/circuit-breaker.ts
 * decides; this keeps the state and the timers): a device queue whose
 * front the breaker turns away waits its turn, and is woken when the
 * breaker has room again, or, while it is open, when its probe is due.
 */
export class OriginBreakers {
  readonly #options: OriginBreakersOptions;
  readonly #origins = new Map<string, Origin>();

  constructor(options: OriginBreakersOptions) {
    this.#options = options;
  }

  /**
   * Lets the front of device queue `key` go to `originKey` now (its
   * ticket, to settle with), or makes the queue wait its turn (undefined).
   */
  admit(originKey: string, key: string, url: string, now: number): BreakerTicket | undefined {
    const origin = this.#originOf(originKey);
    const admission = admit(origin.breaker, now);
    if (!admission.send) {
      origin.waiters.add(key);
      if (admission.reason === 'open') {
        this.#options.observer?.heldByBreaker(url);
        this.#probeAt(origin, admission.probeAt);
      }
      return undefined;
    }
    origin.breaker = admission.breaker;
    origin.waiters.delete(key);
    return admission.ticket;
  }

  /** A request's verdict: the breaker moves on, and as many waiting queues as it has room for try. */
  settle(originKey: string, ticket: BreakerTicket, outcome: ResponseOutcome, now: number): void {
    const origin = this.#originOf(originKey);
    const before = origin.breaker;
    origin.breaker = settleRequest(before, ticket, outcome, now, this.#options.policy, this.#options.random);
    const after = origin.breaker;
    if (after.state === 'open' && before.state !== 'open' && after.generation !== before.generation) {
      this.#options.logger.warn(
        { host: originKey, probeInMs: after.probeAt - now, openings: after.openings },
        'a push gateway keeps failing: only probes go to it until it answers',
      );
    } else if (after.state === 'closed' && before.state === 'half-open') {
      this.#options.logger.info({ host: originKey }, 'a push gateway answers again');
    }
    this.#wakeWaiters(originKey, origin);
  }

  /** Device queues let go (their partition handed over) wait for no breaker. */
  forget(keys: readonly string[]): void {
    for (const origin of this.#origins.values()) for (const key of keys) origin.waiters.delete(key);
  }

  /** Every probe timer stopped (the scheduler closes). */
  stopTimers(): void {
    for (const origin of this.#origins.values()) clearTimeout(origin.timer);
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
      this.#options.wake(key);
    }
    if (origin.waiters.size === 0 && breakerIsIdle(origin.breaker)) this.#origins.delete(originKey);
  }

  #probeAt(origin: Origin, at: number): void {
    if (origin.timer !== undefined) return;
    const { now } = this.#options;
    origin.timer = setTimeout(
      () => {
        origin.timer = undefined;
        const { breaker } = origin;
        // Opened again since this timer was set: its probe is due later.
        if (breaker.state === 'open' && breaker.probeAt > now()) {
          this.#probeAt(origin, breaker.probeAt);
          return;
        }
        // The first waiter with a request due sends the probe; the others wait for its verdict.
        for (const key of [...origin.waiters]) {
          origin.waiters.delete(key);
          this.#options.wake(key);
          if (origin.breaker.state !== 'open') break;
        }
      },
      Math.max(0, at - now()),
    );
    origin.timer.unref();
  }

  #originOf(key: string): Origin {
    let origin = this.#origins.get(key);
    if (origin === undefined) {
      origin = { breaker: newBreaker(this.#options.policy), waiters: new Set() };
      this.#origins.set(key, origin);
    }
    return origin;
  }
}
