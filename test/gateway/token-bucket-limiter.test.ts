import { describe, expect, it } from 'vitest';
import { TokenBucketLimiter, type TakeOutcome } from '../../src/gateway/token-bucket-limiter.js';

function limiter(options: { perSecond: number; burst: number; maxKeys?: number }) {
  const clock = { now: 0 };
  const bucket = new TokenBucketLimiter({ maxKeys: 1000, ...options, now: () => clock.now });
  const at = (ms: number, key = 'k'): TakeOutcome => {
    clock.now = ms;
    return bucket.take(key);
  };
  return { bucket, clock, at };
}

const ok: TakeOutcome = { allowed: true };
const wait = (retryAfterMs: number): TakeOutcome => ({ allowed: false, retryAfterMs });

describe('TokenBucketLimiter', () => {
  it.each([
    [1, 1, 1000],
    [2, 5, 500],
    [3, 3, 334],
    [7, 1, 143],
    [10, 50, 100],
    [1000, 2, 1],
  ])('%i/s with burst %i: the burst passes at once, the next waits %i ms', (perSecond, burst, retryAfterMs) => {
    const { at } = limiter({ perSecond, burst });
    for (let i = 0; i < burst; i += 1) expect(at(0)).toEqual(ok);
    expect(at(0)).toEqual(wait(retryAfterMs));
  });

  it.each<[string, { perSecond: number; burst: number }, [number, TakeOutcome][]]>([
    [
      'refills one token per 1/perSecond',
      { perSecond: 2, burst: 2 },
      [
        [0, ok],
        [0, ok],
        [0, wait(500)],
        [499, wait(1)],
        [500, ok],
        [500, wait(500)],
        [1000, ok],
      ],
    ],
    [
      'keeps the fractions of a token between takes (3/s: 333⅓ ms a token)',
      { perSecond: 3, burst: 2 },
      [
        [0, ok],
        [0, ok],
        [0, wait(334)],
        [333, wait(1)],
        [334, ok],
        [334, wait(333)],
        [666, wait(1)],
        [667, ok],
      ],
    ],
    [
      'drops what a full bucket cannot hold, fractions too',
      { perSecond: 3, burst: 1 },
      [
        [0, ok],
        [0, wait(334)],
        [333, wait(1)],
        [334, ok],
        [334, wait(334)],
        [667, wait(1)],
        [668, ok],
      ],
    ],
    [
      'refills no further than the burst',
      { perSecond: 1, burst: 3 },
      [
        [0, ok],
        [0, ok],
        [0, ok],
        [0, wait(1000)],
        [60_000, ok],
        [60_000, ok],
        [60_000, ok],
        [60_000, wait(1000)],
      ],
    ],
    [
      'a refused take spends nothing',
      { perSecond: 1, burst: 1 },
      [
        [0, ok],
        [100, wait(900)],
        [200, wait(800)],
        [999, wait(1)],
        [1000, ok],
      ],
    ],
    [
      'a clock that steps back refills nothing',
      { perSecond: 1, burst: 1 },
      [
        [5000, ok],
        [4000, wait(2000)],
        [5999, wait(1)],
        [6000, ok],
      ],
    ],
  ])('%s', (_name, options, steps) => {
    const { at } = limiter(options);
    expect(steps.map(([ms]) => at(ms))).toEqual(steps.map(([, outcome]) => outcome));
  });

  it.each([1, 2, 3, 7, 10, 333, 1000, 9999].flatMap((perSecond) => [1, 2, 5].map((burst) => [perSecond, burst])))(
    '%i/s, burst %i: retryAfterMs is exact (1 ms sooner is refused, then it passes)',
    (perSecond, burst) => {
      const { at } = limiter({ perSecond, burst });
      let now = 1_000;
      for (let round = 0; round < 5; round += 1) {
        while (at(now).allowed) {
          // Drain the bucket.
        }
        const refused = at(now);
        if (refused.allowed) throw new Error('expected a refusal');
        expect(refused.retryAfterMs).toBeGreaterThan(0);
        expect(at(now + refused.retryAfterMs - 1).allowed).toBe(false);
        now += refused.retryAfterMs;
        expect(at(now)).toEqual(ok);
        // An odd gap, so that the next round starts from a fraction of a token.
        now += 37;
      }
    },
  );

  it('keeps one bucket per key', () => {
    const { at } = limiter({ perSecond: 1, burst: 1 });
    expect([at(0, 'a'), at(0, 'a'), at(0, 'b'), at(0, 'b')]).toEqual([ok, wait(1000), ok, wait(1000)]);
  });

  it.each([
    [2, 4, 2000],
    [3, 1, 334],
    [10, 50, 5000],
    [1000, 1, 1],
  ])('%i/s, burst %i: drops a bucket idle for %i ms (full again), not sooner', (perSecond, burst, refillMs) => {
    const { bucket, at } = limiter({ perSecond, burst });
    for (let i = 0; i < burst; i += 1) at(0, 'idle');
    at(refillMs - 1, 'other');
    expect(bucket.size).toBe(2);
    at(refillMs, 'other');
    expect(bucket.size).toBe(1);
    // Forgotten is the same as full.
    for (let i = 0; i < burst; i += 1) expect(at(refillMs, 'idle')).toEqual(ok);
    expect(at(refillMs, 'idle').allowed).toBe(false);
  });

  it('drops by last use, not by first: a key in use stays', () => {
    const { bucket, at } = limiter({ perSecond: 1, burst: 2 });
    at(0, 'a');
    at(0, 'b');
    at(1500, 'a');
    at(2000, 'c');
    expect(bucket.size).toBe(2);
    // a kept its bucket: one token spent at 0, one refilled by 1500, one spent at 1500 → 1.5 tokens at 2000.
    expect([at(2000, 'a'), at(2000, 'a')]).toEqual([ok, wait(500)]);
  });

  it('tracks at most maxKeys keys, forgetting the least recently used', () => {
    const { bucket, at } = limiter({ perSecond: 1, burst: 1, maxKeys: 2 });
    expect([at(0, 'a'), at(0, 'b'), at(0, 'c')]).toEqual([ok, ok, ok]);
    expect({ size: bucket.size, evictions: bucket.evictions }).toEqual({ size: 2, evictions: 1 });
    // a was forgotten (a fresh bucket, which forgets b); c was not.
    expect([at(0, 'a'), at(0, 'c')]).toEqual([ok, wait(1000)]);
    expect({ size: bucket.size, evictions: bucket.evictions }).toEqual({ size: 2, evictions: 2 });
  });

  it('is off with perSecond 0: every take passes and nothing is tracked', () => {
    const { bucket, at } = limiter({ perSecond: 0, burst: 1 });
    for (let i = 0; i < 10_000; i += 1) expect(at(0, `user-${i % 7}`)).toEqual(ok);
    expect({ enabled: bucket.enabled, size: bucket.size }).toEqual({ enabled: false, size: 0 });
  });

  it.each([
    [{ perSecond: -1, burst: 1, maxKeys: 1 }],
    [{ perSecond: 0.5, burst: 1, maxKeys: 1 }],
    [{ perSecond: 1, burst: 0, maxKeys: 1 }],
    [{ perSecond: 1, burst: 1, maxKeys: 0 }],
  ])('refuses %j', (options) => {
    expect(() => new TokenBucketLimiter({ ...options, now: () => 0 })).toThrow(RangeError);
  });
});
