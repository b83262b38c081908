import { afterEach, describe, expect, it } from 'vitest';
import { PartitionCoordinator } from '../../src/delivery-service/partition-coordinator.js';
import {
  PartitionCountGuard,
  PartitionCountMismatchError,
  PARTITIONS_PROCEDURE,
} from '../../src/delivery-service/partition-count-guard.js';
import { createLogger } from '../../src/logging/logger.js';
import { InMemoryPartitionLeaseStore } from '../../src/store/in-memory-partition-lease-store.js';

const LEASE = 3_000;
const T0 = 1_000_000;
const silent = createLogger('silent');

const coordinators: PartitionCoordinator[] = [];
afterEach(async () => {
  for (const coordinator of coordinators.splice(0)) await coordinator.close();
});

/** A worker's coordinator on the shared leases, guarded with its own `delivery.partitions`. */
function aWorker(me: string, partitions: number, leases: InMemoryPartitionLeaseStore, clock: { now: number }) {
  const coordinator = new PartitionCoordinator({
    me,
    partitions,
    leaseMs: LEASE,
    leases: new PartitionCountGuard(leases, { partitions, logger: silent }),
    deliveries: { assignPartitions: async () => Promise.resolve(0), listPartition: async () => Promise.resolve([]) },
    intake: { open: () => undefined, drain: async () => Promise.resolve() },
    scheduler: {
      hold: () => undefined,
      watchFinished: () => ({ has: () => false, end: () => undefined }),
      resume: () => undefined,
      releasePartition: async () => Promise.resolve(),
      close: async () => Promise.resolve(),
    },
    consumer: { subscribe: async () => Promise.resolve(), unsubscribe: async () => Promise.resolve() },
    graceMs: 0,
    writeGraceMs: 0,
    logger: silent,
    now: () => clock.now,
    random: () => 0.5,
  });
  coordinators.push(coordinator);
  return coordinator;
}

const settle = async () => new Promise((resolve) => setTimeout(resolve, 20));

describe('the partition count of the pool', () => {
  it.each<[string, readonly [string, number | undefined, number][], readonly string[]]>([
    ['alone', [], []],
    ['with workers of the same count', [['b', 32, T0 + LEASE]], []],
    ['with a worker of another count', [['b', 64, T0 + LEASE]], ['b']],
    ['with a worker of another count whose heartbeat expired', [['b', 64, T0 - 1]], []],
    ['with a worker of a version that did not say its count', [['old', undefined, T0 + LEASE]], []],
  ])('a worker of 32 partitions %s: disagreeing %j', async (_case, others, disagreeing) => {
    const leases = new InMemoryPartitionLeaseStore();
    for (const [worker, partitions, until] of others) await leases.heartbeat(worker, until, partitions);
    const guard = new PartitionCountGuard(leases, { partitions: 32, logger: silent, now: () => T0 });
    expect((await guard.disagreeing(T0)).map((beat) => beat.worker)).toEqual(disagreeing);
    // At start: the worker does not start; in a round: nothing planned.
    const starting = guard.refuseMismatch({ signal: new AbortController().signal, backoff: { baseMs: 10, maxMs: 10 } });
    const round = guard.liveWorkers(T0);
    if (disagreeing.length === 0) {
      await expect(starting).resolves.toBeUndefined();
      await expect(round).resolves.toEqual([...others.filter(([, , until]) => until >= T0).map(([worker]) => worker)]);
      return;
    }
    for (const refused of [starting, round]) {
      await expect(refused).rejects.toBeInstanceOf(PartitionCountMismatchError);
      await expect(refused).rejects.toThrow(PARTITIONS_PROCEDURE);
    }
  });

  it('beats with its count', async () => {
    const leases = new InMemoryPartitionLeaseStore();
    await new PartitionCountGuard(leases, { partitions: 32, logger: silent }).heartbeat('a', T0 + LEASE);
    expect(await leases.liveBeats(T0)).toEqual([{ worker: 'a', partitions: 32 }]);
  });

  it('mixed counts in a rolling restart: nobody claims or hands over anything until they agree', async () => {
    const clock = { now: T0 };
    const leases = new InMemoryPartitionLeaseStore();
    const a = aWorker('a', 4, leases, clock);
    await a.round();
    await settle();
    expect(a.partitions).toEqual([0, 1, 2, 3]);
    // b comes up with 8 partitions: without the check it would claim 4…7 (which no queue of a's count feeds)
    // and a would hand it half of its own, so that one user's notifications go through two partitions.
    const b = aWorker('b', 8, leases, clock);
    for (let round = 0; round < 3; round += 1) {
      clock.now += LEASE / 3;
      await b.round();
      await a.round();
      await settle();
    }
    expect(b.partitions).toEqual([]);
    expect(a.partitions).toEqual([0, 1, 2, 3]);
    expect((await leases.leases()).map((lease) => lease.owner)).toEqual(['a', 'a', 'a', 'a']);
    // b is stopped and started again with the pool's count: the pool shares out as usual.
    await b.close();
    const c = aWorker('b', 4, leases, clock);
    // a's rounds failed while the counts disagreed, so it holds still for a lease after them (no handover
    // right after a failed round): rounds for a little more than a lease.
    for (let round = 0; round < 5; round += 1) {
      clock.now += LEASE / 3;
      await c.round();
      await a.round();
      await settle();
    }
    expect([...a.partitions, ...c.partitions].sort()).toEqual([0, 1, 2, 3]);
    expect(c.partitions).not.toEqual([]);
  });
});
