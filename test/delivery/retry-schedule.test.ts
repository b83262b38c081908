import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RETRY_POLICY,
  jitteredDelay,
  scheduleRetry,
  type FailedAttempt,
  type RetryDecision,
  type RetryPolicy,
} from '../../src/delivery/retry-schedule.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** The largest value Math.random can return. */
const ALMOST_ONE = 1 - 2 ** -53;
const randomOf = (value: number) => () => value;

function aFailure(overrides: Partial<FailedAttempt> = {}): FailedAttempt {
  return { failures: 1, firstFailedAt: 0, now: 0, ...overrides };
}

describe('the backoff: 1 s doubling to 1 h, equal jitter over [nominal/2, nominal)', () => {
  it.each([
    [1, 1 * SECOND],
    [2, 2 * SECOND],
    [3, 4 * SECOND],
    [4, 8 * SECOND],
    [5, 16 * SECOND],
    [6, 32 * SECOND],
    [7, 64 * SECOND],
    [8, 128 * SECOND],
    [9, 256 * SECOND],
    [10, 512 * SECOND],
    [11, 1024 * SECOND],
    [12, 2048 * SECOND],
    [13, HOUR],
    [14, HOUR],
    [100, HOUR],
    [100_000, HOUR],
  ])('failure %i: nominal %i ms', (failures, nominal) => {
    const at = (random: number) => jitteredDelay(DEFAULT_RETRY_POLICY, failures, randomOf(random));
    expect(at(0)).toBe(nominal / 2);
    expect(at(0.5)).toBe((nominal * 3) / 4);
    expect(at(ALMOST_ONE)).toBe(nominal - 1);
  });

  it.each([
    ['exactly 1', 1],
    ['above 1', 7],
    ['negative', -0.5],
    ['NaN', Number.NaN],
  ])('a random source that breaks its contract (%s) still stays within the bounds', (_, random) => {
    const wait = jitteredDelay(DEFAULT_RETRY_POLICY, 3, randomOf(random));
    expect(wait).toBeGreaterThanOrEqual(2 * SECOND);
    expect(wait).toBeLessThan(4 * SECOND);
  });

  it('below the cap, no wait is shorter than any earlier one could have been', () => {
    for (let failures = 1; failures < 12; failures += 1) {
      const longestNow = jitteredDelay(DEFAULT_RETRY_POLICY, failures, randomOf(ALMOST_ONE));
      const shortestNext = jitteredDelay(DEFAULT_RETRY_POLICY, failures + 1, randomOf(0));
      expect(shortestNext).toBeGreaterThan(longestNow);
    }
  });
});

describe('when to retry, or give up', () => {
  const window = DEFAULT_RETRY_POLICY.giveUpAfterMs;

  it.each<[string, Partial<FailedAttempt>, RetryDecision]>([
    ['the first failure waits the first step', {}, { retryAt: 500 }],
    ['the backoff counts from this failure', { failures: 3, now: 10 * SECOND }, { retryAt: 12 * SECOND }],
    ['a Retry-After later than the backoff is honoured', { retryAfterMs: 10 * SECOND }, { retryAt: 10 * SECOND }],
    [
      'a Retry-After shorter than the backoff is not',
      { failures: 5, now: MINUTE, retryAfterMs: 2 * SECOND },
      { retryAt: MINUTE + 8 * SECOND },
    ],
    ['a Retry-After of 0 changes nothing', { failures: 2, retryAfterMs: 0 }, { retryAt: SECOND }],
    [
      'one ms before the window ends: the last retry is at its end, not one backoff step later',
      { failures: 40, now: window - 1 },
      { retryAt: window },
    ],
    ['exactly at the end of the window: given up', { failures: 40, now: window }, { giveUp: 'window-elapsed' }],
    ['after the window: given up', { failures: 40, now: window + HOUR }, { giveUp: 'window-elapsed' }],
    [
      'the window counts from the first failure, not from now',
      { failures: 2, firstFailedAt: 5 * HOUR, now: 5 * HOUR + window },
      { giveUp: 'window-elapsed' },
    ],
    [
      'a Retry-After that ends exactly with the window is honoured',
      { failures: 1, now: window - HOUR, retryAfterMs: HOUR },
      { retryAt: window },
    ],
    [
      'a Retry-After past the end of the window: given up now',
      { failures: 1, now: window - HOUR, retryAfterMs: HOUR + 1 },
      { giveUp: 'retry-after-beyond-window' },
    ],
  ])('%s', (_, overrides, decision) => {
    expect(scheduleRetry(DEFAULT_RETRY_POLICY, aFailure(overrides), randomOf(0))).toEqual(decision);
  });

  it.each<[RetryPolicy, number, RetryDecision]>([
    [{ ...DEFAULT_RETRY_POLICY, giveUpAfterMs: MINUTE }, MINUTE - 1, { retryAt: MINUTE }],
    [{ ...DEFAULT_RETRY_POLICY, giveUpAfterMs: MINUTE }, MINUTE, { giveUp: 'window-elapsed' }],
    [{ ...DEFAULT_RETRY_POLICY, giveUpAfterMs: 2 * DAY }, DAY, { retryAt: DAY + HOUR / 2 }],
    [{ baseMs: 10, maxMs: 40, giveUpAfterMs: SECOND }, 100, { retryAt: 120 }],
  ])('a configured policy %o, failing at %i ms', (policy, now, decision) => {
    expect(scheduleRetry(policy, aFailure({ failures: 30, now }), randomOf(0))).toEqual(decision);
  });

  it('a notification that keeps failing is tried on the doubling schedule and given up at exactly 24 h', () => {
    const attempts: number[] = [0];
    let decision: RetryDecision = { retryAt: 0 };
    for (let failures = 1; 'retryAt' in decision; failures += 1) {
      const now: number = decision.retryAt;
      decision = scheduleRetry(DEFAULT_RETRY_POLICY, { failures, firstFailedAt: 0, now }, randomOf(0.5));
      if ('retryAt' in decision) attempts.push(decision.retryAt);
    }
    const waits = attempts.slice(1).map((at, i) => at - (attempts[i] ?? 0));
    expect(waits.slice(0, 13)).toEqual(
      [0.75, 1.5, 3, 6, 12, 24, 48, 96, 192, 384, 768, 1536, 2700].map((s) => s * SECOND),
    );
    expect(waits.slice(13, -1).every((wait) => wait === 2700 * SECOND)).toBe(true);
    expect(attempts.at(-1)).toBe(DAY);
    expect(decision).toEqual({ giveUp: 'window-elapsed' });
  });
});
