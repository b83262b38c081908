import { describe, expect, it } from 'vitest';
import { LogThrottle } from '../../src/gateway/log-throttle.js';

describe('LogThrottle', () => {
  it.each<[string, number, [number, number | undefined][]]>([
    ['logs the first event at once', 1000, [[0, 0]]],
    [
      'holds back events within the interval, then reports how many',
      1000,
      [
        [0, 0],
        [1, undefined],
        [999, undefined],
        [1000, 2],
        [1500, undefined],
        [2000, 1],
      ],
    ],
    [
      'after a quiet spell, logs at once with nothing held back',
      1000,
      [
        [0, 0],
        [60_000, 0],
        [60_001, undefined],
        [120_000, 1],
      ],
    ],
    [
      'with interval 0, logs every event',
      0,
      [
        [0, 0],
        [0, 0],
        [1, 0],
      ],
    ],
  ])('%s', (_name, intervalMs, steps) => {
    const clock = { now: 0 };
    const throttle = new LogThrottle(intervalMs, () => clock.now);
    expect(
      steps.map(([at]) => {
        clock.now = at;
        return throttle.note();
      }),
    ).toEqual(steps.map(([, expected]) => expected));
  });
});
