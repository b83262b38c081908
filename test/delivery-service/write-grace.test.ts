import { describe, expect, it } from 'vitest';
import { writeGraceMs, type StoreWriteBounds } from '../../src/delivery-service/write-grace.js';

/** The shipped defaults (config/default.json). */
const DEFAULTS: StoreWriteBounds = {
  serverSelectionTimeoutMs: 2_000,
  waitQueueTimeoutMs: 2_000,
  operationTimeoutMs: 4_000,
};

describe('the write grace after claiming an expired partition lease', () => {
  it.each<[string, Partial<StoreWriteBounds>, number, number]>([
    // The former grace (operationTimeoutMs − leaseMs / 3) was 0 here: no time for a write the driver was still sending.
    ['the defaults', {}, 15_000, 3_000],
    ['a slow server selection', { serverSelectionTimeoutMs: 30_000 }, 15_000, 31_000],
    ['a long lease, whose last third covers every wait', {}, 60_000, 0],
    ['a lease that is not a multiple of three', { operationTimeoutMs: 4_001 }, 10_000, 4_668],
  ])('with %s', (_case, bounds, leaseMs, expected) => {
    expect(writeGraceMs({ ...DEFAULTS, ...bounds }, leaseMs)).toBe(expected);
  });
});
