import { describe, expect, it } from 'vitest';
import { backoffDelay } from '../../src/retry/backoff.js';

describe('jittered backoff', () => {
  const policy = { baseMs: 2, maxMs: 100 };

  it.each([
    [0, 2],
    [1, 4],
    [3, 16],
    [10, 100],
  ])('attempt %i waits below a ceiling of %i ms', (attempt, ceiling) => {
    expect(backoffDelay(policy, attempt, () => 0.999999)).toBe(ceiling - 1);
    expect(backoffDelay(policy, attempt, () => 0)).toBe(0);
  });
});
