import { describe, expect, it } from 'vitest';
import { retryUntilDone } from '../../src/retry/retry-until-done.js';

describe('retryUntilDone', () => {
  it('retries until the operation succeeds, reporting each failure with a wait of at least the base', async () => {
    let calls = 0;
    const failures: [number, number][] = [];
    const result = await retryUntilDone(
      async () => {
        calls += 1;
        if (calls < 3) throw new Error(`down ${calls}`);
        return Promise.resolve('up');
      },
      {
        policy: { baseMs: 5, maxMs: 20 },
        signal: new AbortController().signal,
        random: () => 0,
        onFailure: (_error, attempt, retryInMs) => failures.push([attempt, retryInMs]),
      },
    );
    expect(result).toBe('up');
    expect(failures).toEqual([
      [1, 5],
      [2, 5],
    ]);
  });

  it('stops waiting and gives up when aborted', async () => {
    const controller = new AbortController();
    let calls = 0;
    const started = Date.now();
    const result = retryUntilDone<string>(
      async () => {
        calls += 1;
        return Promise.reject(new Error('down'));
      },
      {
        policy: { baseMs: 60_000, maxMs: 60_000 },
        signal: controller.signal,
        onFailure: () => {
          controller.abort();
        },
      },
    );
    expect(await result).toBeUndefined();
    expect(calls).toBe(1);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
