import { describe, expect, it } from 'vitest';
import { partitionsOf } from '../../src/delivery/partitions.js';
import type { PendingDelivery } from '../../src/store/delivery-store.js';
import { InMemoryPartitionLeaseStore } from '../../src/store/in-memory-partition-lease-store.js';
import { aCoordinator, COUNT, LEASE, settle } from '../support/coordinator-world.js';
import { aCuttableLeaseStore } from '../support/cuttable-lease-store.js';

describe('partition coordination', () => {
  it('alone: claims every partition, loads what is pending, orders its intake after it, then consumes', async () => {
    const clock = { now: 1_000_000 };
    const { coordinator, calls, pending } = aCoordinator('a', new InMemoryPartitionLeaseStore(), clock);
    pending.set(2, [{ seq: 77 } as PendingDelivery, { seq: 99 } as PendingDelivery]);
    await coordinator.round();
    await settle();
    expect(coordinator.partitions).toEqual([0, 1, 2, 3]);
    expect(calls.filter((call) => /^(load|open|subscribe) 2\b/.test(call) || call.startsWith('hold 2'))).toEqual([
      'load 2',
      'open 2 after 99',
      'hold 2',
      'subscribe 2',
    ]);
    expect(coordinator.sendable(2, clock.now)).toBe(true);
    await coordinator.close();
  });

  it('hands over to a worker that joins exactly its share, released only after intake and sends let go', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const a = aCoordinator('a', leases, clock);
    const b = aCoordinator('b', leases, clock);
    await a.coordinator.round();
    await settle();
    // b beats its heartbeat; it cannot claim what a holds.
    await b.coordinator.round();
    await settle();
    expect(b.coordinator.partitions).toEqual([]);
    clock.now += LEASE / 3;
    await a.coordinator.round();
    await settle();
    const bShare = partitionsOf(COUNT, ['a', 'b'], 'b');
    expect(bShare.length).toBe(2);
    for (const partition of bShare) {
      const steps = a.calls.filter((call) => call.endsWith(` ${partition}`)).slice(-3);
      expect(steps).toEqual(expect.arrayContaining([`unsubscribe ${partition}`, `drain ${partition}`]));
      expect(steps.at(-1)).toBe(`let go ${partition}`);
    }
    expect(a.coordinator.partitions).toEqual(partitionsOf(COUNT, ['a', 'b'], 'a'));
    await b.coordinator.round();
    await settle();
    expect(b.coordinator.partitions).toEqual(bShare);
    await a.coordinator.close();
    await b.coordinator.close();
  });

  it('takes a dead worker’s partitions once its lease expired, and reads them only after the write grace', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    await leases.heartbeat('dead', clock.now + LEASE);
    for (let partition = 0; partition < COUNT; partition += 1)
      await leases.claim(partition, 'dead', clock.now + LEASE, clock.now);
    const { coordinator, calls } = aCoordinator('a', leases, clock, { writeGraceMs: 200 });
    await coordinator.round();
    await settle();
    expect(coordinator.partitions).toEqual([]);
    // Rounds every third of a lease, until the dead worker's lease ran out.
    for (let round = 0; round < 3; round += 1) {
      clock.now += LEASE / 3;
      await coordinator.round();
    }
    clock.now += 1;
    await coordinator.round();
    await settle();
    // Claimed, not read yet: nothing taken in or sent.
    expect(calls.filter((call) => call.startsWith('load'))).toEqual([]);
    expect(coordinator.sendable(0, clock.now)).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(calls.filter((call) => call.startsWith('load'))).toHaveLength(COUNT);
    expect(coordinator.partitions).toEqual([0, 1, 2, 3]);
    await coordinator.close();
  });

  it.each<[string, number, boolean]>([
    ['just renewed', 0, true],
    ['past two thirds of the lease without a renewal', (2 * LEASE) / 3, false],
  ])('sends %s: %s', async (_name, later, sendable) => {
    const clock = { now: 1_000_000 };
    const { coordinator } = aCoordinator('a', new InMemoryPartitionLeaseStore(), clock);
    await coordinator.round();
    await settle();
    expect(coordinator.sendable(0, clock.now + later)).toBe(sendable);
    expect(coordinator.takesIn(0, clock.now + later)).toBe(sendable);
    await coordinator.close();
  });

  it('stops at once, without releasing, a partition another worker took over while it stalled', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const { coordinator, calls } = aCoordinator('a', leases, clock);
    await coordinator.round();
    await settle();
    // a stalls past its lease; b takes partition 1.
    await leases.claim(1, 'b', clock.now + 10 * LEASE, clock.now + LEASE + 1);
    clock.now += LEASE + 2;
    await coordinator.round();
    await settle();
    expect(coordinator.partitions).not.toContain(1);
    expect(calls).toContain('unsubscribe 1');
    expect((await leases.leases()).find((lease) => lease.partition === 1)?.owner).toBe('b');
    await coordinator.close();
  });

  it('drops a read that ends after the lease it was made under ran out: nothing of it opened, held or consumed', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const cuttable = aCuttableLeaseStore(leases);
    // Reads of the store that end when the test says (a slow store): the first read of each partition waits.
    const slowReads: (() => void)[] = [];
    const log: string[] = [];
    const { coordinator, calls } = aCoordinator('a', leases, clock, {
      leases: cuttable.store,
      deliveries: {
        assignPartitions: async () => Promise.resolve(0),
        listPartition: async (partition) => {
          log.push(`load ${partition}`);
          if (log.filter((call) => call === `load ${partition}`).length === 1)
            await new Promise<void>((resolve) => slowReads.push(resolve));
          return [];
        },
      },
    });
    await coordinator.round();
    await settle();
    expect(slowReads).toHaveLength(COUNT);
    // The reads take longer than the lease, whose renewals fail meanwhile: the partitions are let go.
    cuttable.link.cut = true;
    clock.now += LEASE + 1;
    await coordinator.round();
    await settle();
    expect(coordinator.partitions).toEqual([]);
    const letGo = calls.length;
    // The reads end now: what they read is no longer this worker's to deliver.
    for (const end of slowReads.splice(0)) end();
    await settle();
    expect(calls.slice(letGo)).toEqual([]);
    expect(coordinator.sendable(0, clock.now)).toBe(false);
    // The store answers again: the partitions are claimed, read and consumed afresh, once each.
    cuttable.link.cut = false;
    await coordinator.round();
    await settle();
    expect(coordinator.partitions).toEqual([0, 1, 2, 3]);
    expect(
      calls
        .slice(letGo)
        .filter((call) => call.startsWith('subscribe'))
        .sort(),
    ).toEqual(['subscribe 0', 'subscribe 1', 'subscribe 2', 'subscribe 3']);
    await coordinator.close();
  });

  it('a read left over from a claim whose lease ran out does not open the partition that a new claim is still reading', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const cuttable = aCuttableLeaseStore(leases);
    const slowReads: (() => void)[] = [];
    const { coordinator } = aCoordinator('a', leases, clock, {
      leases: cuttable.store,
      deliveries: {
        assignPartitions: async () => Promise.resolve(0),
        listPartition: async () => {
          await new Promise<void>((resolve) => slowReads.push(resolve));
          return [];
        },
      },
    });
    await coordinator.round();
    await settle();
    cuttable.link.cut = true;
    clock.now += LEASE + 1;
    await coordinator.round();
    await settle();
    cuttable.link.cut = false;
    await coordinator.round();
    await settle();
    // Both claims' reads wait: the first claim's end first.
    expect(slowReads).toHaveLength(2 * COUNT);
    for (const end of slowReads.splice(0, COUNT)) end();
    await settle();
    // The second claim has read nothing yet: nothing of the partition may go out before what is stored in it.
    expect(coordinator.sendable(0, clock.now)).toBe(false);
    for (const end of slowReads.splice(0)) end();
    await settle();
    expect(coordinator.sendable(0, clock.now)).toBe(true);
    await coordinator.close();
  });

  it('on close: lets every partition go, closes the scheduler, releases every lease and leaves', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const { coordinator, calls } = aCoordinator('a', leases, clock);
    await coordinator.round();
    await settle();
    await coordinator.close();
    await coordinator.close();
    expect(calls.filter((call) => call === 'close scheduler')).toHaveLength(1);
    expect((await leases.leases()).every((lease) => lease.owner === null)).toBe(true);
    expect(await leases.liveWorkers(clock.now)).toEqual([]);
  });
});
