import { beforeEach, describe, expect, it } from 'vitest';
import type { PartitionLeaseStore } from '../../src/store/partition-lease-store.js';

const T0 = 1_000_000;
const LEASE = 15_000;

/**
 * What every PartitionLeaseStore adapter must do: run by the in-memory unit
 * test and the MongoDB integration test alike.
 */
export function partitionLeaseStoreContract(name: string, makeStore: () => Promise<PartitionLeaseStore>): void {
  describe(`PartitionLeaseStore contract: ${name}`, () => {
    let store: PartitionLeaseStore;
    beforeEach(async () => {
      store = await makeStore();
    });

    it('knows the workers whose heartbeat holds, and forgets one that leaves', async () => {
      await store.heartbeat('a', T0 + LEASE);
      await store.heartbeat('b', T0 + 10);
      expect([...(await store.liveWorkers(T0))].sort()).toEqual(['a', 'b']);
      // A heartbeat holds up to and including its time.
      expect([...(await store.liveWorkers(T0 + 10))].sort()).toEqual(['a', 'b']);
      expect(await store.liveWorkers(T0 + 11)).toEqual(['a']);
      await store.leave('a');
      expect(await store.liveWorkers(T0)).toEqual(['b']);
    });

    it('tells the partition count each live worker beat with (none: a worker that did not say)', async () => {
      await store.heartbeat('a', T0 + LEASE, 32);
      await store.heartbeat('b', T0 + LEASE, 64);
      await store.heartbeat('old', T0 + LEASE);
      await store.heartbeat('gone', T0 - 1, 16);
      // A later beat says the count again.
      await store.heartbeat('a', T0 + 2 * LEASE, 32);
      const beats = [...(await store.liveBeats(T0))].sort((x, y) => (x.worker < y.worker ? -1 : 1));
      expect(beats).toEqual([{ worker: 'a', partitions: 32 }, { worker: 'b', partitions: 64 }, { worker: 'old' }]);
    });

    it.each<[string, (s: PartitionLeaseStore) => Promise<unknown>, number, boolean]>([
      ['never claimed', async () => Promise.resolve(), T0, true],
      ['held by a live lease', async (s) => s.claim(7, 'b', T0 + LEASE, T0), T0 + LEASE, false],
      ['held by an expired lease', async (s) => s.claim(7, 'b', T0 + LEASE, T0), T0 + LEASE + 1, true],
      [
        'released',
        async (s) => {
          await s.claim(7, 'b', T0 + LEASE, T0);
          await s.release(7, 'b');
        },
        T0 + 1,
        true,
      ],
      [
        'released by someone not holding it (nothing happens)',
        async (s) => {
          await s.claim(7, 'b', T0 + LEASE, T0);
          await s.release(7, 'c');
        },
        T0 + 1,
        false,
      ],
    ])('a partition %s: claimed = %s', async (_case, arrange, now, taken) => {
      await arrange(store);
      expect(await store.claim(7, 'a', now + LEASE, now)).toBe(taken);
      const lease = (await store.leases()).find((l) => l.partition === 7);
      expect(lease?.owner === 'a').toBe(taken);
    });

    it('lets one of two workers claiming at once win', async () => {
      const results = await Promise.all([store.claim(1, 'a', T0 + LEASE, T0), store.claim(1, 'b', T0 + LEASE, T0)]);
      expect(results.filter(Boolean)).toHaveLength(1);
    });

    it('renews only what the worker still holds, and says which', async () => {
      await store.claim(1, 'a', T0 + LEASE, T0);
      await store.claim(2, 'a', T0 + LEASE, T0);
      // Partition 2's lease expired and another worker took it.
      await store.claim(2, 'b', T0 + 3 * LEASE, T0 + LEASE + 1);
      expect(await store.renew('a', [1, 2, 3], T0 + 2 * LEASE)).toEqual([1]);
      expect(await store.leases()).toEqual([
        { partition: 1, owner: 'a', until: T0 + 2 * LEASE },
        { partition: 2, owner: 'b', until: T0 + 3 * LEASE },
      ]);
      expect(await store.renew('a', [], T0)).toEqual([]);
    });
  });
}
