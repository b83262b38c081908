import { afterEach, describe, expect, it } from 'vitest';
import type { NotifyRequestBody } from '../../src/contract/ops.js';
import { DeliveryJournal } from '../../src/delivery-service/delivery-journal.js';
import { NotifyIntake } from '../../src/delivery-service/notify-intake.js';
import { PartitionCoordinator } from '../../src/delivery-service/partition-coordinator.js';
import { createLogger } from '../../src/logging/logger.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { InMemoryPartitionLeaseStore } from '../../src/store/in-memory-partition-lease-store.js';
import { aCuttableLeaseStore } from '../support/cuttable-lease-store.js';

const LEASE = 3_000;
const COUNT = 4;
const SILENT = createLogger('silent');

const stops: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

/**
 * The partition queues as consumer/partition-queues.ts runs them: a part
 * arrives only on a partition subscribed, goes to the intake, and letting
 * the partition go waits for the verdict of every part taken in (the
 * channel is closed only then, returning the rest in order).
 */
function aPartitionQueue(intake: () => NotifyIntake) {
  const lanes = new Map<number, Set<Promise<unknown>>>();
  return {
    consumer: {
      subscribe: async (partition: number) => {
        if (!lanes.has(partition)) lanes.set(partition, new Set());
        return Promise.resolve();
      },
      unsubscribe: async (partition: number) => {
        const lane = lanes.get(partition);
        lanes.delete(partition);
        await Promise.allSettled([...(lane ?? [])]);
      },
    },
    /** A part published to the partition: taken in if the partition is consumed here. */
    publish(partition: number, request: NotifyRequestBody, messageId: string): void {
      const verdict = intake()
        .accept(request, messageId, partition)
        .catch(() => undefined);
      lanes.get(partition)?.add(verdict);
    },
  };
}

const aNotify = (event: string): NotifyRequestBody => ({
  op: 'notify',
  notification: { event_id: event, room_id: '!r:example.org' },
  recipients: [{ user_id: '@alice:example.org' }],
});

/**
 * A worker's coordinator, journal and intake wired as worker-process.ts
 * wires them, with a store whose reads of a partition end when the test
 * says (`endReads`): a store slowed down by a loaded machine.
 */
function aWorker(clock: { now: number }) {
  const leases = new InMemoryPartitionLeaseStore();
  const { store: leaseStore, link } = aCuttableLeaseStore(leases);
  const store = new InMemoryDeliveryStore();
  const reads: (() => void)[] = [];
  const journal: DeliveryJournal = new DeliveryJournal({
    store,
    writable: (partition, now) => coordinator.writable(partition, now),
    persistAfterMs: 60_000,
    logger: SILENT,
    now: () => clock.now,
  });
  const stop = new AbortController();
  const queue = aPartitionQueue(() => intake);
  const intake: NotifyIntake = new NotifyIntake({
    store,
    journal,
    pushers: {
      listPushers: async () => Promise.resolve([]),
      listPushersOfUsers: async () => Promise.resolve(new Map()),
    },
    holder: { hold: () => undefined },
    gate: { takesIn: (partition, now) => coordinator.takesIn(partition, now) },
    backoff: { baseMs: 10, maxMs: 10 },
    signal: stop.signal,
    logger: SILENT,
    now: () => clock.now,
  });
  const coordinator: PartitionCoordinator = new PartitionCoordinator({
    me: 'a',
    partitions: COUNT,
    leaseMs: LEASE,
    leases: leaseStore,
    deliveries: {
      assignPartitions: async () => Promise.resolve(0),
      listPartition: async (partition) => {
        await new Promise<void>((resolve) => reads.push(resolve));
        return store.listPartition(partition);
      },
    },
    intake,
    journal,
    scheduler: {
      hold: () => undefined,
      watchFinished: () => ({ has: () => false, end: () => undefined }),
      resume: () => undefined,
      releasePartition: async () => Promise.resolve(),
      close: async () => Promise.resolve(),
    },
    consumer: queue.consumer,
    graceMs: 0,
    writeGraceMs: 0,
    logger: SILENT,
    now: () => clock.now,
    random: () => 0.5,
  });
  stops.push(async () => {
    stop.abort();
    await coordinator.close();
    journal.close();
  });
  const endReads = () => {
    for (const end of reads.splice(0)) end();
  };
  /** A round, and the takes and handovers it started let run. */
  const round = async () => {
    await coordinator.round();
    await new Promise((resolve) => setTimeout(resolve, 20));
  };
  return { coordinator, link, queue, endReads, round };
}

describe('a worker whose leases run out while it reads its partitions (a slow store)', () => {
  it('takes every one back once the store keeps up again: none is left stuck in its handover', async () => {
    const clock = { now: 1_000_000 };
    const { coordinator, link, queue, endReads, round } = aWorker(clock);
    await round();
    // The reads of the store take longer than the lease, whose renewals fail meanwhile: the partitions are let go.
    link.cut = true;
    clock.now += LEASE + 1;
    await round();
    expect(coordinator.partitions).toEqual([]);
    // The reads end now; a part arrives on partition 0 if this worker consumes it (the lease is let go: it must not).
    endReads();
    await new Promise((resolve) => setTimeout(resolve, 20));
    queue.publish(0, aNotify('$1'), 'm-1');
    // The store answers again: the partitions are claimed back; their reads are slow again, past two thirds of the
    // lease (in doubt: nothing taken in), and the renewals fail again until the lease ran out.
    link.cut = false;
    await round();
    clock.now += (2 * LEASE) / 3 + 1;
    endReads();
    await new Promise((resolve) => setTimeout(resolve, 20));
    link.cut = true;
    clock.now += LEASE;
    await round();
    // The store keeps up from now on: every partition is back within a round, and stays.
    link.cut = false;
    for (let rounds = 0; rounds < 4; rounds += 1) {
      await round();
      endReads();
      await new Promise((resolve) => setTimeout(resolve, 20));
      clock.now += LEASE / 3;
    }
    expect(coordinator.partitions).toEqual([0, 1, 2, 3]);
  });
});
