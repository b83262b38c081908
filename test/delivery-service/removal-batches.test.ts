import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RemovalBatches } from '../../src/delivery-service/removal-batches.js';
import { createLogger } from '../../src/logging/logger.js';

/** A store whose deletions land when the test says; records what each deletion named. */
function aSlowStore() {
  const removed: string[][] = [];
  const landings: (() => void)[] = [];
  /** The deletion under way; the test reacts to its landing after the batches do. */
  let last: Promise<void> = Promise.resolve();
  return {
    removed,
    get last() {
      return last;
    },
    land: () => {
      for (const go of landings.splice(0)) go();
    },
    store: {
      // eslint-disable-next-line @typescript-eslint/promise-function-async -- the batches must await this very promise: a reaction the test adds to it then runs right after theirs
      remove: (ids: readonly string[]) => {
        removed.push([...ids]);
        last = new Promise<void>((resolve) => landings.push(resolve));
        return last;
      },
    },
  };
}

let closed = false;
const batchesOn = (store: ReturnType<typeof aSlowStore>['store']) =>
  new RemovalBatches(store, createLogger('silent'), () => closed);

beforeEach(() => {
  closed = false;
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe('the removal batches', () => {
  it('deletes in the same flush what is done while a deletion is under way', async () => {
    const slow = aSlowStore();
    const batches = batchesOn(slow.store);
    batches.add('a');
    await vi.advanceTimersByTimeAsync(10);
    batches.add('b');
    slow.land();
    await vi.advanceTimersByTimeAsync(0);
    slow.land();
    await vi.advanceTimersByTimeAsync(10);
    expect(slow.removed).toEqual([['a'], ['b']]);
    expect(batches.has('a') || batches.has('b')).toBe(false);
  });

  it('deletes what is done as the last deletion lands, and a flush asked for then waits for it', async () => {
    const slow = aSlowStore();
    const batches = batchesOn(slow.store);
    batches.add('a');
    await vi.advanceTimersByTimeAsync(10);
    let flushedLate: Promise<void> | undefined;
    // Reacts to the landing after the flush saw nothing left, before the flush is over: as a send's verdict may.
    void slow.last.then(() => {
      batches.add('late');
      flushedLate = batches.flush();
    });
    slow.land();
    await vi.advanceTimersByTimeAsync(0);
    let over = false;
    void flushedLate?.then(() => {
      over = true;
    });
    await vi.advanceTimersByTimeAsync(10);
    expect(slow.removed).toEqual([['a'], ['late']]);
    expect(over).toBe(false);
    slow.land();
    await vi.advanceTimersByTimeAsync(10);
    expect(over).toBe(true);
    expect(batches.has('late')).toBe(false);
  });
});
