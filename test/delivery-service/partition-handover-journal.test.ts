import { afterEach, describe, expect, it } from 'vitest';
import { partitionsOf } from '../../src/delivery/partitions.js';
import { DeliveryJournal } from '../../src/delivery-service/delivery-journal.js';
import { PartitionCoordinator } from '../../src/delivery-service/partition-coordinator.js';
import { createLogger } from '../../src/logging/logger.js';
import { IntakeStoppedError } from '../../src/delivery-service/notify-intake.js';
import type { AcceptedNotify, PendingDelivery } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { InMemoryPartitionLeaseStore } from '../../src/store/in-memory-partition-lease-store.js';
import type { PartitionLeaseStore } from '../../src/store/partition-lease-store.js';
import { aCuttableLeaseStore } from '../support/cuttable-lease-store.js';
import { eventually } from '../support/eventually.js';

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
    body: JSON.stringify({ notification: { event_id: `$${partition}-${n}`, padding: 'x'.repeat(2_000) } }),
    devices: [{ appId: 'app', pushkey: `k${n}` }],
    acceptedAt: Date.now(),
  };
}

const stops: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

/** How a worker below differs from the default one (no write grace, nothing stored before a handover). */
interface WorkerOverrides {
  readonly writeGraceMs?: number;
  /** The lease store as this worker reaches it (default: the shared one itself). */
  readonly leaseStore?: PartitionLeaseStore;
  /** Set: the journal runs its passes, storing what still waits this long after intake. */
  readonly persistAfterMs?: number;
}

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
  overrides: WorkerOverrides = {},
) {
  const held: string[] = [];
  const journal: DeliveryJournal = new DeliveryJournal({
    store,
    // Called only once the coordinator below exists.
    writable: (partition, now) => coordinator.writable(partition, now),
    persistAfterMs: overrides.persistAfterMs ?? 60_000,
    logger: createLogger('silent'),
    now: () => clock.now,
  });
  if (overrides.persistAfterMs !== undefined) journal.start();
  const coordinator: PartitionCoordinator = new PartitionCoordinator({
    me,
    partitions: COUNT,
    leaseMs: LEASE,
    leases: overrides.leaseStore ?? leases,
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
      hold: (deliveries) => held.push(...deliveries.map((delivery) => delivery.id)),
      watchFinished: () => ({ has: () => false, end: () => undefined }),
      resume: () => undefined,
      releasePartition: async () => Promise.resolve(),
      close: async () => Promise.resolve(),
    },
    consumer: { subscribe: async () => Promise.resolve(), unsubscribe: async () => Promise.resolve() },
    graceMs: 0,
    writeGraceMs: overrides.writeGraceMs ?? 0,
    logger: createLogger('silent'),
    now: () => clock.now,
    random: () => 0.5,
  });
  stops.push(async () => {
    await coordinator.close();
    journal.close();
  });
  return { coordinator, journal, held };
}

const settle = async () => new Promise((resolve) => setTimeout(resolve, 20));

/** A delivery store slow to take requests while `holding`: a write of requests started then lands at `land()`. */
class SlowRequestWrites extends InMemoryDeliveryStore {
  holding = false;
  readonly #waiting: (() => void)[] = [];

  get waiting(): number {
    return this.#waiting.length;
  }

  land(): void {
    this.holding = false;
    for (const go of this.#waiting.splice(0)) go();
  }

  override async acceptAll(notifies: readonly AcceptedNotify[], deliveries: readonly PendingDelivery[]): Promise<void> {
    if (this.holding && deliveries.length > 0) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    await super.acceptAll(notifies, deliveries);
  }
}

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

describe('taking over a partition whose holder stalled past its lease', () => {
  it('reads it a second time a write grace later: a write the last holder started in time may land after the first read', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const store = new InMemoryDeliveryStore();
    await leases.heartbeat('stalled', clock.now + LEASE);
    for (let partition = 0; partition < COUNT; partition += 1)
      await leases.claim(partition, 'stalled', clock.now + LEASE, clock.now);
    await store.accept({ id: 'm-early', recipients: 1, devices: 1, acceptedAt: clock.now }, [aRequest(0, 1)]);
    clock.now += LEASE + 1;
    const b = aWorker('b', leases, store, clock, { writeGraceMs: 40 });
    await b.coordinator.round();
    await eventually(() => {
      expect(b.held).toContain(aRequest(0, 1).id);
    }, 5_000);
    // The stalled holder's write lands now, its record with it: taking the part in again, b would skip it as done.
    await store.accept({ id: 'm-late', recipients: 1, devices: 1, acceptedAt: clock.now }, [aRequest(0, 2)]);
    await eventually(() => {
      expect(b.held).toContain(aRequest(0, 2).id);
    }, 5_000);
    // The journal deletes both from the store once done.
    expect(b.journal.tracking(0)).toBe(2);
  });

  it('reads a partition released cleanly once only: its last holder wrote everything before releasing it', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const store = new InMemoryDeliveryStore();
    const loads: number[] = [];
    const original = store.listPartition.bind(store);
    store.listPartition = async (partition: number) => {
      loads.push(partition);
      return original(partition);
    };
    const b = aWorker('b', leases, store, clock, { writeGraceMs: 40 });
    await b.coordinator.round();
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(loads.sort()).toEqual([0, 1, 2, 3]);
  });
});

describe('taking back its own partition, whose lease ran out unrenewed', () => {
  it('holds what its own write, started under the lapsed lease, stored after the partition was taken back', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const { store: leaseStore, link } = aCuttableLeaseStore(leases);
    const store = new SlowRequestWrites();
    const a = aWorker('a', leases, store, clock, { leaseStore, persistAfterMs: 100 });
    await a.coordinator.round();
    await settle();
    expect(a.coordinator.partitions).toEqual([0, 1, 2, 3]);
    // A part whose request still waits (a failing gateway) is stored once old enough; the store is slow to take it.
    store.holding = true;
    const request = aRequest(0, 1);
    const secured = a.journal
      .admit(0, { id: 'm-1', recipients: 1, devices: 1, acceptedAt: clock.now }, [request])
      .catch((error: unknown) => error);
    clock.now += 100;
    await eventually(() => {
      expect(store.waiting).toBe(1);
    }, 5_000);
    // Meanwhile the renewals fail for a whole lease: it lets its partitions go, unreleased (the store is out of reach).
    link.cut = true;
    clock.now += LEASE;
    await a.coordinator.round();
    await settle();
    expect(a.coordinator.partitions).toEqual([]);
    // Its part goes back to the queue, unacknowledged.
    expect(await secured).toBeInstanceOf(IntakeStoppedError);
    // The store answers again: nobody else took the partitions, so it claims them back; its write lands after that.
    link.cut = false;
    await a.coordinator.round();
    await settle();
    store.land();
    // The request is stored in a partition this worker holds: it must hold it, or nobody sends it until the partition moves.
    await eventually(() => {
      expect(a.held).toContain(request.id);
    }, 2_000);
    expect(a.coordinator.partitions).toEqual([0, 1, 2, 3]);
  });
});
