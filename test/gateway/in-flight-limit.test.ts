import { describe, expect, it } from 'vitest';
import { InFlightLimit } from '../../src/gateway/in-flight-limit.js';

describe('InFlightLimit', () => {
  it('admits up to max, refuses beyond, and admits again once a slot is free', () => {
    const limit = new InFlightLimit(2);
    const a = limit.tryEnter();
    const b = limit.tryEnter();
    expect([a === undefined, b === undefined, limit.tryEnter()]).toEqual([false, false, undefined]);
    a?.release();
    expect(limit.count).toBe(1);
    expect(limit.tryEnter()).toBeDefined();
    expect(limit.count).toBe(2);
  });

  it.each<[string, ('hold' | 'release')[], number[]]>([
    ['an answered request: one hold, one release', ['release'], [1, 0]],
    [
      'a call to the workers: the slot waits for the call and the response, in either order',
      ['hold', 'release', 'release'],
      [1, 0],
    ],
    ['the client goes away before the call: the call counts again', ['release', 'hold', 'release'], [1, 0, 1, 0]],
    ['extra releases change nothing', ['release', 'release', 'release'], [1, 0]],
  ])('%s', (_name, steps, counts) => {
    const seen: number[] = [];
    const limit = new InFlightLimit(10, (count) => seen.push(count));
    const slot = limit.tryEnter();
    for (const step of steps) slot?.[step]();
    expect(seen).toEqual(counts);
    expect(limit.count).toBe(0);
  });

  it('counts without a cap with max Infinity', () => {
    const limit = new InFlightLimit(Number.POSITIVE_INFINITY);
    for (let i = 0; i < 10_000; i += 1) expect(limit.tryEnter()).toBeDefined();
    expect(limit.count).toBe(10_000);
  });
});
