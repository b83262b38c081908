import { describe, expect, it } from 'vitest';
import { cacheShares } from '../../src/evaluate-threads/cache-shares.js';

const total = { maxEntries: 1000, maxBytes: 10_000 };

describe("cacheShares: the worker's cache bounds in equal parts, one per thread and one for the event loop", () => {
  it.each([
    // threads, the event loop evaluates, each part
    [0, true, { maxEntries: 1000, maxBytes: 10_000 }],
    [1, false, { maxEntries: 1000, maxBytes: 10_000 }],
    [1, true, { maxEntries: 500, maxBytes: 5000 }],
    [2, true, { maxEntries: 333, maxBytes: 3333 }],
    [3, false, { maxEntries: 333, maxBytes: 3333 }],
    [3, true, { maxEntries: 250, maxBytes: 2500 }],
  ])('%i threads, event loop %s: %o each', (threads, eventLoop, share) => {
    const shares = cacheShares(total, threads, eventLoop);
    expect(shares.perThread).toEqual(share);
    expect(shares.eventLoop).toEqual(eventLoop ? share : undefined);
    // Never more than the configured bounds in all.
    const parts = threads + (eventLoop ? 1 : 0);
    expect(shares.perThread.maxEntries * parts).toBeLessThanOrEqual(total.maxEntries);
    expect(shares.perThread.maxBytes * parts).toBeLessThanOrEqual(total.maxBytes);
  });
});
