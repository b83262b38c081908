import { describe, expect, it } from 'vitest';
import { etaMs, formatBar, formatDuration, formatProgress } from '../../src/import/import-progress.js';

describe('import progress', () => {
  it.each([
    [{ done: 12_000, total: 100_000, elapsedMs: 5000 }, '12,000/100,000 users (12%), 2,400 users/s, ETA 37s'],
    [{ done: 0, total: 100, elapsedMs: 0 }, '0/100 users (0%), 0 users/s'],
    [{ done: 500, elapsedMs: 1000 }, '500 users, 500 users/s'],
    [{ done: 100, total: 100, elapsedMs: 2000 }, '100/100 users (100%), 50 users/s, ETA 0s'],
  ])('%o reads %s', (state, text) => {
    expect(formatProgress(state)).toBe(text);
  });

  it.each([
    [0, '0s'],
    [59_400, '59s'],
    [65_000, '1m05s'],
    [3_720_000, '1h02m'],
  ])('%i ms is %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it.each([
    [{ done: 0, total: 10, elapsedMs: 1 }, '[..........]'],
    [{ done: 5, total: 10, elapsedMs: 1 }, '[#####.....]'],
    [{ done: 12, total: 10, elapsedMs: 1 }, '[##########]'],
    [{ done: 5, elapsedMs: 1 }, ''],
  ])('a bar of 10 for %o', (state, bar) => {
    expect(formatBar(state, 10)).toBe(bar);
  });

  it('has no ETA before any time has passed', () => {
    expect(etaMs({ done: 0, total: 10, elapsedMs: 0 })).toBeUndefined();
  });
});
