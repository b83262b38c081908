import { afterEach, describe, expect, it } from 'vitest';
import { partitionsOf } from '../../src/delivery/partitions.js';
import { DeliveryJournal } from '../../src/delivery-service/delivery-journal.js';
import { PartitionCoordinator } from '../../src/delivery-service/partition-coordinator.js';
import { createLogger } from '../../src/logging/logger.js';
import type { PendingDelivery } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { InMemoryPartitionLeaseStore } from '../../src/store/in-memory-partition-lease-store.js';

const LEASE = 3_000;
const COUNT = 4;
const REQUESTS_PER_PARTITION = 50;

function aRequest(partition: number, n: number): PendingDelivery {
  return {
    id: `m-${partition}-${n}/tag`,
    partition,
    key: `key-${partition}-${n}`,
    seq: n,
    userId: '@alice:example.org',
    url: 'https://push.example.org/_matrix/push/v1/notify',
    bodyJson: JSON.stringify({ notification: { event_id: `$${partition}-${n}`, padding: 'x'.repeat(2_000) } }),
    devices: [{ appId: 'app', pushkey: `k${n}` }],
    acceptedAt: Date.now(),
  };
}

const stops: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

/**
 * A worker's coordinator wired to a real journal, as worker-process.ts
 * wires them: the intake's drain secures (flush) or lets go (forget) what
 * the journal holds of the partition.
 */
function aWorker(
  me: string,
  leases: InMemoryPartitionLeaseStore,
  store: InMemoryDeliveryStore,
  clock: { now: number },
) {
  const journal: DeliveryJournal = new DeliveryJournal({
    store,
    // Called only once the coordinator below exists.
    writable: (partition, now) => coordinator.writable(partition, now),
    persistAfterMs: 60_000,
    logger: createLogger('silent'),
    now: () => clock.now,
  });
  const coordinator: PartitionCoordinator = new PartitionCoordinator({
    me,
    partitions: COUNT,
    leaseMs: LEASE,
    leases,
    deliveries: store,
    intake: {
      open: () => undefined,
      drain: async (partition, keep = true) => {
        if (keep) await journal.flush(partition);
        else journal.forget(partition);
      },
    },
    journal,
    scheduler: {
      hold: () => undefined,
      resume: () => undefined,
      releasePartition: async () => Promise.resolve(),
      close: async () => Promise.resolve(),
    },
    consumer: { subscribe: async () => Promise.resolve(), unsubscribe: async () => Promise.resolve() },
    graceMs: 0,
    writeGraceMs: 0,
    logger: createLogger('silent'),
    now: () => clock.now,
    random: () => 0.5,
  });
  stops.push(async () => {
    await coordinator.close();
    journal.close();
  });
  return { coordinator, journal };
}

const settle = async () => new Promise((resolve) => setTimeout(resolve, 20));

describe('a clean handover and the journal', () => {
  it('keeps nothing of a partition handed over: its requests are in the store, for the next holder only', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const store = new InMemoryDeliveryStore();
    const a = aWorker('a', leases, store, clock);
    await a.coordinator.round();
    await settle();
    expect(a.coordinator.partitions).toEqual([0, 1, 2, 3]);
    // Every partition has parts taken in whose requests still wait (a silent gateway): nothing secured yet.
    const secured: Promise<void>[] = [];
    for (let partition = 0; partition < COUNT; partition += 1) {
      const requests = Array.from({ length: REQUESTS_PER_PARTITION }, (_, n) => aRequest(partition, n));
      secured.push(
        a.journal.admit(
          partition,
          { id: `m-${partition}`, recipients: 1, devices: 1, acceptedAt: clock.now },
          requests,
        ),
      );
    }
    expect(a.journal.tracking()).toBe(COUNT * REQUESTS_PER_PARTITION);

    // b joins: a hands b's share over cleanly.
    const b = aWorker('b', leases, store, clock);
    await b.coordinator.round();
    clock.now += LEASE / 3;
    await a.coordinator.round();
    await settle();
    const handedOver = partitionsOf(COUNT, ['a', 'b'], 'b');
    const kept = partitionsOf(COUNT, ['a', 'b'], 'a');
    expect(a.coordinator.partitions).toEqual(kept);

    for (const partition of handedOver) {
      // Secured for the next holder: stored, the part acknowledged…
      expect(await store.listPartition(partition)).toHaveLength(REQUESTS_PER_PARTITION);
      // …and nothing of it left in this worker's memory.
      expect(a.journal.tracking(partition)).toBe(0);
    }
    for (const partition of kept) expect(a.journal.tracking(partition)).toBe(REQUESTS_PER_PARTITION);
    expect(a.journal.tracking()).toBe(kept.length * REQUESTS_PER_PARTITION);
    await Promise.all(handedOver.map(async (partition) => expect(secured[partition]).resolves.toBeUndefined()));
  });
});
