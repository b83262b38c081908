import { describe, expect, it } from 'vitest';
import {
  DEFAULT_BREAKER_POLICY,
  admit,
  breakerIsIdle,
  newBreaker,
  settleRequest,
  type Admission,
  type BreakerPolicy,
  type BreakerTicket,
  type CircuitBreaker,
} from '../../src/delivery/circuit-breaker.js';
import { gatewayOrigin } from '../../src/delivery/circuit-breaker-origin.js';
import type { ResponseOutcome } from '../../src/delivery/response-outcome.js';

/** Small numbers, so that every transition shows: 3 failures open it, probes wait 0.5, 1, 2, 4, 4 … s at random 0. */
const POLICY: BreakerPolicy = {
  failureThreshold: 3,
  probeBackoff: { baseMs: 1000, maxMs: 8000 },
  initialInFlight: 2,
  maxInFlight: 8,
};
const NOW = 100_000;
const atZero = () => 0;

type Closed = Extract<CircuitBreaker, { state: 'closed' }>;
type Open = Extract<CircuitBreaker, { state: 'open' }>;
type HalfOpen = Extract<CircuitBreaker, { state: 'half-open' }>;

function closed(overrides: Partial<Omit<Closed, 'state'>> = {}): Closed {
  return { state: 'closed', generation: 4, inFlight: 1, limit: 4, failures: 0, ...overrides };
}
function open(overrides: Partial<Omit<Open, 'state'>> = {}): Open {
  return { state: 'open', generation: 4, openings: 1, probeAt: NOW, ...overrides };
}
function halfOpen(overrides: Partial<Omit<HalfOpen, 'state'>> = {}): HalfOpen {
  return { state: 'half-open', generation: 4, openings: 1, ...overrides };
}

const request = (generation = 4): BreakerTicket => ({ generation, probe: false });
const probe = (generation = 4): BreakerTicket => ({ generation, probe: true });

const DELIVERED: ResponseOutcome = { kind: 'delivered', status: 200, rejected: [] };
const REJECTED: ResponseOutcome = { kind: 'delivered', status: 200, rejected: ['key-1'] };
const SERVER_ERROR: ResponseOutcome = { kind: 'retry', cause: 'server-error', status: 502 };
const TIMEOUT: ResponseOutcome = { kind: 'retry', cause: 'timeout' };
const CONNECTION_ERROR: ResponseOutcome = { kind: 'retry', cause: 'connection-error' };
const CLIENT_ERROR: ResponseOutcome = { kind: 'failed', cause: 'client-error', status: 400 };
const REDIRECT: ResponseOutcome = { kind: 'failed', cause: 'redirect', status: 302 };
const ADDRESS_REFUSED: ResponseOutcome = { kind: 'failed', cause: 'address-refused' };
const BUSY: ResponseOutcome = { kind: 'retry', cause: 'busy' };
const rateLimited = (retryAfterMs: number): ResponseOutcome => ({
  kind: 'retry',
  cause: 'rate-limited',
  status: 429,
  retryAfterMs,
});

describe('admission', () => {
  it.each<[string, CircuitBreaker, Admission]>([
    [
      'closed, below its limit: sends, one more in flight',
      closed({ inFlight: 3, limit: 4 }),
      { send: true, ticket: request(), breaker: closed({ inFlight: 4, limit: 4 }) },
    ],
    [
      'closed, at its limit: waits for one in flight',
      closed({ inFlight: 4, limit: 4 }),
      { send: false, reason: 'at-limit' },
    ],
    [
      'open, before the probe: waits until it, naming it',
      open({ probeAt: NOW + 1 }),
      { send: false, reason: 'open', probeAt: NOW + 1 },
    ],
    [
      'open, at the probe time: this one is the probe, the breaker half-opens',
      open({ probeAt: NOW, openings: 3 }),
      { send: true, ticket: probe(), breaker: halfOpen({ openings: 3 }) },
    ],
    [
      'open, past the probe time: likewise',
      open({ probeAt: NOW - 5000 }),
      { send: true, ticket: probe(), breaker: halfOpen() },
    ],
    ['half-open: waits for the probe', halfOpen(), { send: false, reason: 'probing' }],
  ])('%s', (_, breaker, admission) => {
    expect(admit(breaker, NOW)).toEqual(admission);
  });

  it('a new origin starts closed at the bottom of the ramp', () => {
    expect(newBreaker(POLICY)).toEqual({ state: 'closed', generation: 0, inFlight: 0, limit: 2, failures: 0 });
    expect(newBreaker(DEFAULT_BREAKER_POLICY)).toMatchObject({ state: 'closed', limit: 4 });
  });
});

describe('transitions when a request settles', () => {
  it.each<[string, CircuitBreaker, BreakerTicket, ResponseOutcome, CircuitBreaker]>([
    // closed
    [
      'closed, delivered: failures forgotten, the ramp grows by one',
      closed({ failures: 2, limit: 4 }),
      request(),
      DELIVERED,
      closed({ inFlight: 0, failures: 0, limit: 5 }),
    ],
    [
      'closed, delivered with rejected pushkeys: the host is up',
      closed({ failures: 1 }),
      request(),
      REJECTED,
      closed({ inFlight: 0, limit: 5 }),
    ],
    [
      'closed, a 4xx: the host answered, so it is up',
      closed({ failures: 2 }),
      request(),
      CLIENT_ERROR,
      closed({ inFlight: 0, limit: 5 }),
    ],
    ['closed, a redirect: likewise', closed({ failures: 2 }), request(), REDIRECT, closed({ inFlight: 0, limit: 5 })],
    [
      'closed, at the top of the ramp: stays there',
      closed({ limit: 8, inFlight: 8 }),
      request(),
      DELIVERED,
      closed({ limit: 8, inFlight: 7 }),
    ],
    [
      'closed, a failure below the threshold: counted, the ramp halves',
      closed({ failures: 1, limit: 8, inFlight: 8 }),
      request(),
      SERVER_ERROR,
      closed({ failures: 2, limit: 4, inFlight: 7 }),
    ],
    [
      'closed, a failure: the ramp never halves below its start',
      closed({ limit: 3 }),
      request(),
      TIMEOUT,
      closed({ failures: 1, limit: 2, inFlight: 0 }),
    ],
    [
      'closed, a refused address: nothing reached the host, only the slot is freed',
      closed({ failures: 2, inFlight: 3 }),
      request(),
      ADDRESS_REFUSED,
      closed({ failures: 2, inFlight: 2 }),
    ],
    [
      "closed, not sent for the worker's own limits (busy): no mark against the host, only the slot is freed",
      closed({ failures: 2, inFlight: 3 }),
      request(),
      BUSY,
      closed({ failures: 2, inFlight: 2 }),
    ],
    [
      'closed, the threshold-th failure in a row: opens, the first probe one backoff step away',
      closed({ failures: 2 }),
      request(),
      CONNECTION_ERROR,
      open({ generation: 5, openings: 1, probeAt: NOW + 500 }),
    ],
    [
      'closed, opened by a 429: its Retry-After, when later, places the probe',
      closed({ failures: 2 }),
      request(),
      rateLimited(3000),
      open({ generation: 5, openings: 1, probeAt: NOW + 3000 }),
    ],
    [
      'closed, opened by a 429: a Retry-After is honoured up to the probe cap only',
      closed({ failures: 2 }),
      request(),
      rateLimited(86_400_000),
      open({ generation: 5, openings: 1, probeAt: NOW + 8000 }),
    ],
    [
      'closed, a stale result (sent before the last opening): changes nothing',
      closed({ failures: 2, inFlight: 1 }),
      request(3),
      SERVER_ERROR,
      closed({ failures: 2, inFlight: 1 }),
    ],
    // open
    ['open, a stale failure: changes nothing', open(), request(3), SERVER_ERROR, open()],
    ['open, a stale success: changes nothing either', open(), request(3), DELIVERED, open()],
    // half-open
    [
      'half-open, the probe delivered: closed, at the bottom of the ramp',
      halfOpen({ openings: 4 }),
      probe(),
      DELIVERED,
      closed({ generation: 4, inFlight: 0, limit: 2, failures: 0 }),
    ],
    [
      'half-open, the probe got a 4xx: the host answers, closed',
      halfOpen(),
      probe(),
      CLIENT_ERROR,
      closed({ inFlight: 0, limit: 2 }),
    ],
    [
      'half-open, the probe failed: open again, the next probe one step further',
      halfOpen({ openings: 1 }),
      probe(),
      SERVER_ERROR,
      open({ generation: 5, openings: 2, probeAt: NOW + 1000 }),
    ],
    [
      'half-open, the probe failed again: further still',
      halfOpen({ openings: 3 }),
      probe(),
      TIMEOUT,
      open({ generation: 5, openings: 4, probeAt: NOW + 4000 }),
    ],
    [
      'half-open, the probe failed many times: probes at the cap',
      halfOpen({ openings: 30 }),
      probe(),
      TIMEOUT,
      open({ generation: 5, openings: 31, probeAt: NOW + 4000 }),
    ],
    [
      'half-open, the probe refused by address policy: no verdict, the next caller probes at once',
      halfOpen({ openings: 3 }),
      probe(),
      ADDRESS_REFUSED,
      open({ openings: 3, probeAt: NOW }),
    ],
    [
      'half-open, the probe not sent (busy): no verdict, the next caller probes at once',
      halfOpen({ openings: 3 }),
      probe(),
      BUSY,
      open({ openings: 3, probeAt: NOW }),
    ],
    ['half-open, a stale result: changes nothing', halfOpen(), request(3), DELIVERED, halfOpen()],
  ])('%s', (_, breaker, ticket, outcome, after) => {
    expect(settleRequest(breaker, ticket, outcome, NOW, POLICY, atZero)).toEqual(after);
  });

  it('the probe pace follows the jittered backoff: just under the nominal step at random → 1', () => {
    const after = settleRequest(halfOpen({ openings: 2 }), probe(), SERVER_ERROR, NOW, POLICY, () => 1 - 2 ** -53);
    expect(after).toEqual(open({ generation: 5, openings: 3, probeAt: NOW + 4000 - 1 }));
  });
});

/**
 * A small world: `devices` devices each always have a notification for
 * this host; every tick, each asks the breaker and sends when admitted;
 * every request settles one tick later with `outcome(now)`.
 */
function simulate(options: {
  readonly policy: BreakerPolicy;
  readonly devices: number;
  readonly tickMs: number;
  readonly untilMs: number;
  /** The outcome of the `settled`-th request to settle (from 0), at `now`. */
  readonly outcome: (now: number, settled: number) => ResponseOutcome;
  readonly start?: CircuitBreaker;
}): { readonly sentAt: number[]; readonly inFlightPerTick: number[]; readonly breaker: CircuitBreaker } {
  let breaker = options.start ?? newBreaker(options.policy);
  let pending: BreakerTicket[] = [];
  const sentAt: number[] = [];
  const inFlightPerTick: number[] = [];
  let settled = 0;
  for (let now = 0; now <= options.untilMs; now += options.tickMs) {
    for (const ticket of pending) {
      breaker = settleRequest(breaker, ticket, options.outcome(now, settled), now, options.policy, () => 0.5);
      settled += 1;
    }
    pending = [];
    for (let device = 0; device < options.devices; device += 1) {
      const admission = admit(breaker, now);
      if (!admission.send) break;
      breaker = admission.breaker;
      pending.push(admission.ticket);
      sentAt.push(now);
    }
    inFlightPerTick.push(pending.length);
  }
  return { sentAt, inFlightPerTick, breaker };
}

describe('a host that stays down', () => {
  it('gets probes at the backoff pace, not one request per pending device', () => {
    const { sentAt, breaker } = simulate({
      policy: DEFAULT_BREAKER_POLICY,
      devices: 2000,
      tickMs: 50,
      untilMs: 30 * 60_000,
      outcome: () => TIMEOUT,
    });
    // Before opening: the ramp's 4, then 4 again (halving never goes below
    // the start); the first of those is the fifth failure in a row, and the
    // three after it are stale.
    expect(sentAt.filter((at) => at <= 100)).toEqual([0, 0, 0, 0, 50, 50, 50, 50]);
    const probes = sentAt.slice(8);
    const gaps = probes.slice(1).map((at, i) => at - (probes[i] ?? 0));
    // Each wait is the next jittered step (random 0.5: 3/4 of nominal), plus the probe's round trip.
    expect(gaps.slice(0, 8)).toEqual([1550, 3050, 6050, 12_050, 24_050, 48_050, 96_050, 192_050]);
    expect(gaps.slice(8).every((gap) => gap === 225_050)).toBe(true);
    // 2000 devices for 30 minutes at one request per tick each would be 72 million requests.
    expect(sentAt.length).toBeLessThan(30);
    expect(breaker.state).not.toBe('closed');
  });
});

describe('a host that comes back: the ramp', () => {
  it.each<[string, BreakerPolicy, number[]]>([
    [
      'the default policy: 4 in flight at first, doubling each round trip to 32',
      DEFAULT_BREAKER_POLICY,
      [4, 8, 16, 32, 32, 32, 32],
    ],
    ['a small policy: 2 doubling to 8', POLICY, [2, 4, 8, 8]],
  ])('%s', (_, policy, rounds) => {
    const { inFlightPerTick } = simulate({
      policy,
      devices: 2000,
      tickMs: 50,
      untilMs: 50 * rounds.length,
      outcome: () => DELIVERED,
      start: open({ generation: 1, openings: 7, probeAt: 0 }),
    });
    // Tick 0 sends the probe alone; when it succeeds the backlog is let in at the ramp's pace.
    expect(inFlightPerTick).toEqual([1, ...rounds]);
  });

  it('a host that fails now and then sheds load, and gets it back as it answers', () => {
    const { inFlightPerTick, breaker } = simulate({
      policy: POLICY,
      devices: 100,
      tickMs: 50,
      untilMs: 250,
      outcome: (_, settled) => (settled === 20 ? SERVER_ERROR : DELIVERED),
      start: closed({ generation: 0, inFlight: 0, limit: 8 }),
    });
    // The 21st request (of the third round) fails: the limit halves to 4,
    // the three successes settled after it bring it to 7, the next round to 8 again.
    expect(inFlightPerTick).toEqual([8, 8, 8, 7, 8, 8]);
    expect(breaker).toMatchObject({ state: 'closed', failures: 0 });
  });

  it('requests that fail together open it once: those after the threshold-th are stale', () => {
    const { sentAt, breaker } = simulate({
      policy: POLICY,
      devices: 100,
      tickMs: 50,
      untilMs: 100,
      outcome: () => SERVER_ERROR,
      start: closed({ generation: 0, inFlight: 0, limit: 8 }),
    });
    expect(sentAt).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(breaker).toEqual(open({ generation: 1, openings: 1, probeAt: 50 + 750 }));
  });

  it('one failure among successes halves the limit, which then grows back', () => {
    let breaker: CircuitBreaker = closed({ generation: 0, inFlight: 8, limit: 8 });
    breaker = settleRequest(breaker, request(0), SERVER_ERROR, NOW, POLICY, atZero);
    expect(breaker).toEqual(closed({ generation: 0, inFlight: 7, limit: 4, failures: 1 }));
    for (let i = 0; i < 4; i += 1) breaker = settleRequest(breaker, request(0), DELIVERED, NOW, POLICY, atZero);
    expect(breaker).toEqual(closed({ generation: 0, inFlight: 3, limit: 8, failures: 0 }));
  });
});

describe('forgetting a breaker', () => {
  it.each<[string, CircuitBreaker, boolean]>([
    ['closed, nothing in flight, no failure', closed({ inFlight: 0, failures: 0 }), true],
    ['closed, part way up the ramp: forgetting only restarts it lower', closed({ inFlight: 0, limit: 3 }), true],
    ['closed, a request in flight', closed({ inFlight: 1 }), false],
    ['closed, a failure counted', closed({ inFlight: 0, failures: 1 }), false],
    ['open', open(), false],
    ['half-open', halfOpen(), false],
  ])('%s: idle %s', (_, breaker, idle) => {
    expect(breakerIsIdle(breaker)).toBe(idle);
  });
});

describe('the origin a breaker is kept under', () => {
  it.each<[string, string | undefined]>([
    ['https://push.example.org/_matrix/push/v1/notify', 'https://push.example.org:443'],
    ['https://push.example.org:443/other/path', 'https://push.example.org:443'],
    ['https://PUSH.Example.org/_matrix/push/v1/notify', 'https://push.example.org:443'],
    ['https://push.example.org:8443/_matrix/push/v1/notify', 'https://push.example.org:8443'],
    ['https://user:secret@push.example.org/_matrix/push/v1/notify', 'https://push.example.org:443'],
    ['https://push.example.org/_matrix/push/v1/notify?x=1#y', 'https://push.example.org:443'],
    ['http://gateway.internal/_matrix/push/v1/notify', 'http://gateway.internal:80'],
    ['https://[::1]:9000/_matrix/push/v1/notify', 'https://[::1]:9000'],
    ['https://127.0.0.1:9000/_matrix/push/v1/notify', 'https://127.0.0.1:9000'],
    ['ftp://push.example.org/', undefined],
    ['not a URL', undefined],
    ['', undefined],
  ])('%j → %j', (url, origin) => {
    expect(gatewayOrigin(url)).toBe(origin);
  });
});
