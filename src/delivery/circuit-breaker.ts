import type { BackoffPolicy } from '../retry/backoff.js';
import type { ResponseOutcome } from './response-outcome.js';
import { jitteredDelay } from './retry-schedule.js';

export interface BreakerPolicy {
  /** Consecutive failed requests that open the breaker (≥ 1). */
  readonly failureThreshold: number;
  /** The pace of probes while open: the n-th opening in a row waits the n-th step of this backoff. */
  readonly probeBackoff: BackoffPolicy;
  /** Requests in flight a closed breaker allows when it starts or comes back (≥ 1). */
  readonly initialInFlight: number;
  /** The most requests in flight it ever allows: the per-host cap. */
  readonly maxInFlight: number;
}

/**
 * - 5 consecutive failures: one failure is noise (a reset connection), five
 *   in a row with nothing answered between them is a host that is down; and
 *   at the initial limit of 4 in flight a dead host costs 5 requests before
 *   it is left alone.
 * - Probes 1 s doubling to 5 min: the backoff's pace, but capped lower than
 *   a notification's 1 h, because the probe is how we learn the host is
 *   back: one request every 5 minutes is no load on anyone, while an hour
 *   between probes would add up to an hour to every outage.
 * - 4 in flight at first, growing to 32 (see `settleRequest`): the gateway
 *   client's own cap per origin (`maxInFlightPerOrigin`), so that the whole
 *   ramp applies.
 */
export const DEFAULT_BREAKER_POLICY: BreakerPolicy = {
  failureThreshold: 5,
  probeBackoff: { baseMs: 1000, maxMs: 300_000 },
  initialInFlight: 4,
  maxInFlight: 32,
};

/**
 * One gateway origin's breaker. `generation` counts openings: a request
 * carries the generation it was sent in, and one sent before the latest
 * opening is stale, evidence about a host that has since been judged down.
 */
export type CircuitBreaker =
  | {
      readonly state: 'closed';
      readonly generation: number;
      /** Requests of this generation sent and not yet settled. */
      readonly inFlight: number;
      /** How many may be in flight now: the ramp. */
      readonly limit: number;
      /** Consecutive failures so far. */
      readonly failures: number;
    }
  | {
      readonly state: 'open';
      readonly generation: number;
      /** Openings in a row without a successful probe: the step of the probe backoff. */
      readonly openings: number;
      readonly probeAt: number;
    }
  | { readonly state: 'half-open'; readonly generation: number; readonly openings: number };

/** What a request admitted by the breaker carries until it is settled. */
export interface BreakerTicket {
  readonly generation: number;
  readonly probe: boolean;
}

export type Admission =
  | { readonly send: true; readonly ticket: BreakerTicket; readonly breaker: CircuitBreaker }
  /** Closed, with the limit in flight: send when one of them settles. */
  | { readonly send: false; readonly reason: 'at-limit' }
  /** The host is judged down: nothing until the probe at `probeAt`. */
  | { readonly send: false; readonly reason: 'open'; readonly probeAt: number }
  /** A probe is in flight: wait for its verdict. */
  | { readonly send: false; readonly reason: 'probing' };

/** A gateway we know nothing about starts closed, at the bottom of the ramp (see `settleRequest`). */
export function newBreaker(policy: BreakerPolicy): CircuitBreaker {
  return { state: 'closed', generation: 0, inFlight: 0, limit: policy.initialInFlight, failures: 0 };
}

/**
 * Whether a request to this origin may go now. While open, the answer
 * names the next probe's time, so that every device waiting for this host
 * waits for that one probe instead of sending a request of its own: a dead
 * host gets probes at the backoff pace, not one request per pending device.
 * The first caller at or after `probeAt` gets to send the probe (any real
 * notification: the spec has no health check, and a probe that succeeds
 * has delivered something).
 */
export function admit(breaker: CircuitBreaker, now: number): Admission {
  switch (breaker.state) {
    case 'closed':
      if (breaker.inFlight >= breaker.limit) return { send: false, reason: 'at-limit' };
      return {
        send: true,
        ticket: { generation: breaker.generation, probe: false },
        breaker: { ...breaker, inFlight: breaker.inFlight + 1 },
      };
    case 'open':
      if (now < breaker.probeAt) return { send: false, reason: 'open', probeAt: breaker.probeAt };
      return {
        send: true,
        ticket: { generation: breaker.generation, probe: true },
        breaker: { state: 'half-open', generation: breaker.generation, openings: breaker.openings },
      };
    case 'half-open':
      return { send: false, reason: 'probing' };
  }
}

/** What an outcome says about the host, as opposed to about our request. */
type HostSignal = { readonly up: true } | { readonly up: false; readonly retryAfterMs: number } | undefined;

function hostSignal(outcome: ResponseOutcome): HostSignal {
  switch (outcome.kind) {
    case 'delivered':
      return { up: true };
    case 'retry':
      // Not sent for the worker's own limits: the host was not asked. Counting it would let one user's
      // crowd of requests (or another host's, on a shared address) open a healthy gateway's breaker.
      if (outcome.cause === 'busy') return undefined;
      return { up: false, retryAfterMs: outcome.retryAfterMs ?? 0 };
    case 'failed':
      // A redirect or a 4xx is the host answering, so it is up; a refused
      // address never reached it and says nothing either way.
      return outcome.cause === 'address-refused' ? undefined : { up: true };
  }
}

/**
 * The breaker after an admitted request settled; every admitted request
 * must be settled exactly once (the HTTP client's timeouts guarantee an
 * outcome), or a half-open breaker would wait for its probe forever.
 *
 * Closed, the limit on requests in flight is a ramp, additive increase and
 * multiplicative decrease: each success raises it by one (so it doubles
 * every round trip: 4, 8, 16, 32), each failure halves it, never
 * below `initialInFlight`. Why: a host coming back (a restarted push
 * gateway, its connections to APNs and FCM still cold) must not be hit at
 * once by every device that waited for it, or it falls over again and the
 * breaker flaps; the backlog cap bounds how much is waiting, the ramp how
 * fast it arrives. A healthy host reaches the full limit within a handful
 * of round trips, and a host that fails now and then sheds load before it
 * is judged down. A breaker that closes starts the ramp again.
 *
 * A stale request (sent before the latest opening) changes nothing: the
 * breaker has already judged what it reports, and its slot was released
 * when the breaker opened. Hung requests from an outage thus do not hold
 * back the ramp when the host returns.
 */
export function settleRequest(
  breaker: CircuitBreaker,
  ticket: BreakerTicket,
  outcome: ResponseOutcome,
  now: number,
  policy: BreakerPolicy,
  random: () => number,
): CircuitBreaker {
  if (ticket.generation !== breaker.generation) return breaker;
  const signal = hostSignal(outcome);
  switch (breaker.state) {
    case 'closed': {
      const inFlight = Math.max(0, breaker.inFlight - 1);
      if (signal === undefined) return { ...breaker, inFlight };
      if (signal.up)
        return { ...breaker, inFlight, failures: 0, limit: Math.min(policy.maxInFlight, breaker.limit + 1) };
      const failures = breaker.failures + 1;
      if (failures >= policy.failureThreshold) return opened(breaker.generation + 1, 1, signal, now, policy, random);
      return { ...breaker, inFlight, failures, limit: Math.max(policy.initialInFlight, Math.floor(breaker.limit / 2)) };
    }
    case 'half-open':
      if (!ticket.probe) return breaker;
      // A probe that never reached the host: the next caller may probe at once.
      if (signal === undefined) return { ...breaker, state: 'open', probeAt: now };
      if (signal.up)
        return {
          state: 'closed',
          generation: breaker.generation,
          inFlight: 0,
          limit: policy.initialInFlight,
          failures: 0,
        };
      return opened(breaker.generation + 1, breaker.openings + 1, signal, now, policy, random);
    case 'open':
      return breaker;
  }
}

/**
 * Open for the `openings`-th time in a row. A `Retry-After` longer than the
 * probe backoff is honoured up to the probe cap: beyond it, one request
 * every few minutes is how a host that came back early gets its pushes
 * again, while one misconfigured header could otherwise silence a gateway
 * for a day.
 */
function opened(
  generation: number,
  openings: number,
  signal: { readonly retryAfterMs: number },
  now: number,
  policy: BreakerPolicy,
  random: () => number,
): CircuitBreaker {
  const backoff = jitteredDelay(policy.probeBackoff, openings, random);
  const wait = Math.max(backoff, Math.min(signal.retryAfterMs, policy.probeBackoff.maxMs));
  return { state: 'open', generation, openings, probeAt: now + wait };
}

/**
 * Whether this breaker holds nothing worth keeping: closed, nothing in
 * flight, no failure counted. Its owner may forget it to bound memory;
 * the origin then starts again at the bottom of the ramp, as a TCP
 * connection restarts slow start after being idle.
 */
export function breakerIsIdle(breaker: CircuitBreaker): boolean {
  return breaker.state === 'closed' && breaker.inFlight === 0 && breaker.failures === 0;
}
