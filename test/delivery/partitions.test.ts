import { describe, expect, it } from 'vitest';
import { planOwnership, type LeaseView, type OwnershipView } from '../../src/delivery/partition-ownership.js';
import { assignPartitions, partitionName, partitionOf, partitionsOf } from '../../src/delivery/partitions.js';

describe('the partition of a user', () => {
  it.each([
    // Fixed values: the partition decides which queue a user's notifications wait in, so it must never change.
    ['', 32, 0x811c9dc5 % 32],
  ])('%s of %i is stable', (userId, count, expected) => {
    expect(partitionOf(userId, count)).toBe(expected);
    expect(partitionOf(userId, count)).toBeGreaterThanOrEqual(0);
    expect(partitionOf(userId, count)).toBeLessThan(count);
  });

  it('is FNV-1a of the user ID (a value pinned here, so that a change of the hash fails)', () => {
    expect(partitionOf('@alice:example.org', 1 << 30)).toMatchInlineSnapshot(`936837061`);
  });

  it('spreads 6,000 users over 32 partitions within 30 % of an even share', () => {
    const counts = new Array<number>(32).fill(0);
    for (let n = 0; n < 6_000; n += 1) {
      const partition = partitionOf(`@user${n}:example.org`, 32);
      counts[partition] = (counts[partition] ?? 0) + 1;
    }
    for (const count of counts) expect(Math.abs(count - 6_000 / 32)).toBeLessThan(0.3 * (6_000 / 32));
  });

  it.each([
    [0, 'p000'],
    [7, 'p007'],
    [123, 'p123'],
  ])('partition %i is named %s', (partition, name) => {
    expect(partitionName(partition)).toBe(name);
  });
});

describe('partitions shared out among workers', () => {
  const pool = (n: number) => Array.from({ length: n }, (_, i) => `worker-${i}`);

  it.each([1, 2, 3, 5, 10, 32, 40])('%i workers: every partition has one, each worker a fair share', (workers) => {
    const owners = assignPartitions(32, pool(workers));
    expect(owners.every((owner) => owner !== undefined)).toBe(true);
    for (const worker of pool(workers)) {
      const count = owners.filter((owner) => owner === worker).length;
      expect(count).toBeLessThanOrEqual(Math.ceil(32 / workers));
      expect(count).toBeGreaterThanOrEqual(Math.floor(32 / workers));
    }
  });

  it('is the same whatever the order the workers are listed in', () => {
    expect(assignPartitions(32, ['c', 'a', 'b'])).toEqual(assignPartitions(32, ['a', 'b', 'c']));
  });

  it('leaves every partition to nobody with no worker', () => {
    expect(assignPartitions(4, [])).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('moves few partitions when a worker joins: mostly those the new one takes', () => {
    const before = assignPartitions(32, pool(3));
    const after = assignPartitions(32, pool(4));
    const moved = before.filter((owner, partition) => after[partition] !== owner).length;
    const taken = after.filter((owner) => owner === 'worker-3').length;
    expect(taken).toBeGreaterThanOrEqual(7);
    expect(moved).toBeLessThanOrEqual(taken + 4);
  });

  it('lists what one worker delivers', () => {
    const owners = assignPartitions(8, ['a', 'b']);
    expect(partitionsOf(8, ['a', 'b'], 'a')).toEqual(
      owners.flatMap((owner, partition) => (owner === 'a' ? [partition] : [])),
    );
  });
});

describe('a round of partition ownership', () => {
  const NOW = 1_000_000;
  const lease = (partition: number, owner: string | null, until = NOW + 10_000): LeaseView => ({
    partition,
    owner,
    until,
  });
  const view = (overrides: Partial<OwnershipView>): OwnershipView => ({
    me: 'a',
    count: 4,
    workers: ['a'],
    leases: [],
    running: new Set(),
    now: NOW,
    ...overrides,
  });

  it.each<[string, Partial<OwnershipView>, { lost: number[]; release: number[]; claim: number[] }]>([
    ['alone, nothing claimed yet: claims all', {}, { lost: [], release: [], claim: [0, 1, 2, 3] }],
    [
      'alone, released and expired leases: claims them',
      { leases: [lease(0, null, 0), lease(1, 'dead', NOW - 1), lease(2, 'dead', NOW), lease(3, 'a')] },
      // Partition 2's lease holds up to and including NOW.
      { lost: [], release: [], claim: [0, 1, 3] },
    ],
    [
      'running what the store gives to another: lost',
      { running: new Set([0, 1, 2, 3]), leases: [lease(0, 'a'), lease(1, 'b'), lease(2, 'a'), lease(3, 'a')] },
      { lost: [1], release: [], claim: [] },
    ],
    [
      'running, alone: nothing to do',
      { running: new Set([0, 1, 2, 3]), leases: [0, 1, 2, 3].map((p) => lease(p, 'a')) },
      { lost: [], release: [], claim: [] },
    ],
  ])('%s', (_name, overrides, expected) => {
    expect(planOwnership(view(overrides))).toEqual(expected);
  });

  it('hands over to a worker that joined what is now its, and claims nothing held by a live worker', () => {
    const workers = ['a', 'b'];
    const mine = new Set(partitionsOf(4, workers, 'a'));
    const theirs = [0, 1, 2, 3].filter((p) => !mine.has(p));
    expect(theirs.length).toBeGreaterThan(0);
    const steps = planOwnership(
      view({ workers, running: new Set([0, 1, 2, 3]), leases: [0, 1, 2, 3].map((p) => lease(p, 'a')) }),
    );
    expect(steps).toEqual({ lost: [], release: theirs, claim: [] });
    // The joiner waits for the release: a live lease of another worker is never claimed.
    const joiner = planOwnership(view({ me: 'b', workers, leases: [0, 1, 2, 3].map((p) => lease(p, 'a')) }));
    expect(joiner.claim).toEqual([]);
  });
});
