import { describe, expect, it } from 'vitest';
import { InMemoryPartitionLeaseStore } from '../../src/store/in-memory-partition-lease-store.js';
import { StoreUnavailableError } from '../../src/store/push-store.js';
import { aCoordinator, COUNT, LEASE, settle } from '../support/coordinator-world.js';
import { aCuttableLeaseStore } from '../support/cuttable-lease-store.js';

describe('partition coordination when the store is cut, stalls or lags', () => {
  it('a worker cut from the store (not the broker) lets its partitions go once its lease ran out; another takes them', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const cuttable = aCuttableLeaseStore(leases);
    const a = aCoordinator('a', leases, clock, { leases: cuttable.store });
    const b = aCoordinator('b', leases, clock);
    await a.coordinator.round();
    await settle();
    await b.coordinator.round();
    await settle();
    const aShare = [...a.coordinator.partitions];
    expect(aShare).toEqual([0, 1, 2, 3]);
    cuttable.link.cut = true;
    // Rounds every third of a lease, for a lease and a third.
    for (let round = 0; round < 4; round += 1) {
      clock.now += LEASE / 3;
      await a.coordinator.round();
      await b.coordinator.round();
      await settle();
    }
    for (const partition of aShare) expect(a.calls).toContain(`unsubscribe ${partition}`);
    expect(a.coordinator.partitions).toEqual([]);
    expect(b.coordinator.partitions).toEqual([0, 1, 2, 3]);
    cuttable.link.cut = false;
    await a.coordinator.close();
    await b.coordinator.close();
  });

  it('after a store stall longer than a lease, the partitions stay where they were (nobody claims the others’)', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const a = aCoordinator('a', leases, clock);
    const b = aCoordinator('b', leases, clock);
    // Settled: each runs its share.
    for (let round = 0; round < 3; round += 1) {
      await a.coordinator.round();
      await settle();
      await b.coordinator.round();
      await settle();
      clock.now += LEASE / 3;
    }
    const before = { a: [...a.coordinator.partitions], b: [...b.coordinator.partitions] };
    expect(before.a.length + before.b.length).toBe(COUNT);
    // Nobody reached the store for 20 s (every heartbeat and lease expired); b comes back first.
    a.calls.length = 0;
    b.calls.length = 0;
    clock.now += 20_000;
    for (let round = 0; round < 4; round += 1) {
      await b.coordinator.round();
      await settle();
      await a.coordinator.round();
      await settle();
      expect({ a: a.coordinator.partitions, b: b.coordinator.partitions }).toEqual(before);
      clock.now += LEASE / 3;
    }
    expect(a.calls.filter((call) => call.startsWith('unsubscribe'))).toEqual([]);
    expect(b.calls.filter((call) => call.startsWith('unsubscribe'))).toEqual([]);
    await a.coordinator.close();
    await b.coordinator.close();
  });

  it('renews its leases while its heartbeat waits for the store, and keeps them when the heartbeat fails', async () => {
    // A store slow or failing on the workers' documents: the leases must not wait for, nor fall with, the heartbeat.
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const beat = { held: false, failing: false, waiting: [] as (() => void)[] };
    const slowBeats = new Proxy(leases, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (typeof value !== 'function') return value;
        const call = async (...args: unknown[]) => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        if (property !== 'heartbeat') return call;
        return async (...args: unknown[]) => {
          if (beat.held) await new Promise<void>((resume) => beat.waiting.push(resume));
          if (beat.failing) throw new StoreUnavailableError('the store cannot be reached');
          return call(...args);
        };
      },
    });
    const a = aCoordinator('a', leases, clock, { leases: slowBeats });
    await a.coordinator.round();
    await settle();
    expect(a.coordinator.partitions).toEqual([0, 1, 2, 3]);
    clock.now += LEASE / 3;
    beat.held = true;
    const round = a.coordinator.round();
    await settle();
    expect((await leases.leases()).map((lease) => lease.until)).toEqual(Array(COUNT).fill(clock.now + LEASE));
    beat.held = false;
    beat.failing = true;
    for (const resume of beat.waiting.splice(0)) resume();
    await round;
    // Heartbeats failing for a whole lease since the first round: the renewals alone hold every partition.
    for (let step = 0; step < 3; step += 1) {
      clock.now += LEASE / 3;
      await a.coordinator.round();
      await settle();
    }
    expect(a.coordinator.partitions).toEqual([0, 1, 2, 3]);
    expect(a.coordinator.writable(0, clock.now)).toBe(true);
    expect(a.calls.filter((call) => call.startsWith('unsubscribe'))).toEqual([]);
    beat.failing = false;
    await a.coordinator.close();
  });

  it('on close with a store that does not answer: stops waiting after the grace, and the scheduler is closed', async () => {
    const clock = { now: 1_000_000 };
    const leases = new InMemoryPartitionLeaseStore();
    const link = { hangs: false };
    const never = async () => new Promise<never>(() => undefined);
    const hanging = new Proxy(leases, {
      get: (target, property, receiver) =>
        link.hangs ? never : (Reflect.get(target, property, receiver) as unknown as () => unknown).bind(target),
    });
    const { coordinator, calls } = aCoordinator('a', leases, clock, {
      leases: hanging,
      graceMs: 50,
      // The parts being taken in wait on the store (their journal write): unsubscribing never ends.
      consumer: { subscribe: async () => Promise.resolve(), unsubscribe: never },
    });
    await coordinator.round();
    await settle();
    link.hangs = true;
    await coordinator.close();
    expect(calls).toContain('close scheduler');
  });
});
