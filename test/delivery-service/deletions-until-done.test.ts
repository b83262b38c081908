import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  deleteUntilDone,
  DeletionsUnderWay,
  DELETION_RETRY_MS,
} from '../../src/delivery-service/deletions-until-done.js';

/** A store refusing the first `refusals` deletions, recording every attempt. */
function aStore(refusals: number) {
  const attempts: (readonly string[])[] = [];
  let left = refusals;
  return {
    attempts,
    remove: async (ids: readonly string[]) => {
      attempts.push(ids);
      if (left > 0) {
        left -= 1;
        throw new Error('the store cannot be reached');
      }
      return Promise.resolve();
    },
  };
}

describe('deleteUntilDone', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('tries again every DELETION_RETRY_MS while the store refuses, until it deletes', async () => {
    const store = aStore(2);
    let ended = false;
    void deleteUntilDone(store, ['a', 'b'], () => false).then(() => {
      ended = true;
    });
    await vi.advanceTimersByTimeAsync(DELETION_RETRY_MS - 1);
    expect(store.attempts).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(2 * DELETION_RETRY_MS);
    expect(store.attempts).toEqual([
      ['a', 'b'],
      ['a', 'b'],
      ['a', 'b'],
    ]);
    expect(ended).toBe(true);
  });

  it('gives up once stopped (the journal closed)', async () => {
    const store = aStore(Number.POSITIVE_INFINITY);
    let stopped = false;
    const deleting = deleteUntilDone(store, ['a'], () => stopped);
    await vi.advanceTimersByTimeAsync(DELETION_RETRY_MS);
    stopped = true;
    await vi.advanceTimersByTimeAsync(DELETION_RETRY_MS);
    await deleting;
    expect(store.attempts).toHaveLength(2);
  });
});

describe('DeletionsUnderWay', () => {
  it('lists an ID while any deletion of it runs, whether it ends well or not', async () => {
    const under = new DeletionsUnderWay();
    let endFirst: () => void = () => undefined;
    const first = under.run(['a'], async () => new Promise<void>((resolve) => (endFirst = resolve)));
    const second = under.run(['a', 'b'], async () => Promise.reject(new Error('refused')));
    expect([under.has('a'), under.has('b')]).toEqual([true, true]);
    await expect(second).rejects.toThrow('refused');
    expect([under.has('a'), under.has('b')]).toEqual([true, false]);
    endFirst();
    await first;
    expect(under.has('a')).toBe(false);
  });
});
