import { beforeEach, describe, expect, it } from 'vitest';
import type { AcceptedNotify, DeliveryStore, PendingDelivery, RetryState } from '../../src/store/delivery-store.js';

/** A fresh, empty store per test. */
export type DeliveryStoreFactory = () => Promise<DeliveryStore>;

/** Stores a request as the service did before partitions (no `partition` field): each adapter's own way. */
export type StoreUnpartitioned = (store: DeliveryStore, delivery: Omit<PendingDelivery, 'partition'>) => Promise<void>;

/** The same stored data, as a worker with `partitions` (`delivery.partitions`) sees it. */
export type WithPartitions = (store: DeliveryStore, partitions: number) => Promise<DeliveryStore>;

const T0 = 1_000_000;

export function aNotify(overrides: Partial<AcceptedNotify> = {}): AcceptedNotify {
  return { id: 'notify-1', recipients: 1, devices: 1, acceptedAt: T0, ...overrides };
}

export function aDelivery(overrides: Partial<PendingDelivery> = {}): PendingDelivery {
  const id = overrides.id ?? 'notify-1/0';
  return {
    id,
    partition: 3,
    key: 'key-a',
    seq: 1,
    userId: '@alice:example.org',
    url: 'https://push.example.org/_matrix/push/v1/notify',
    // Event keys may be anything: the body is kept as text.
    body: JSON.stringify({ notification: { event_id: `$${id}`, content: { $weird: { 'a.b': [1, null] } } } }),
    devices: [
      { appId: 'org.example.app', pushkey: 'phone' },
      { appId: 'org.example.app', pushkey: 'tablet' },
    ],
    acceptedAt: T0,
    ...overrides,
  };
}

/** `count` requests of one notify on `key`, seq from `firstSeq`. */
function requestsOf(notifyId: string, key: string, count: number, firstSeq = 1, partition = 3): PendingDelivery[] {
  return Array.from({ length: count }, (_, n) =>
    aDelivery({ id: `${notifyId}/${key}/${n}`, key, seq: firstSeq + n, partition }),
  );
}

const ids = (deliveries: readonly PendingDelivery[]) => deliveries.map((d) => d.id);

/**
 * What every DeliveryStore adapter must do. Run by the in-memory unit test
 * and by the MongoDB integration test with the same expectations.
 */
export function deliveryStoreContract(
  name: string,
  makeStore: DeliveryStoreFactory,
  storeUnpartitioned: StoreUnpartitioned,
  withPartitions: WithPartitions,
): void {
  describe(`DeliveryStore contract: ${name}`, () => {
    let store: DeliveryStore;
    beforeEach(async () => {
      store = await makeStore();
    });

    async function accepted(deliveries: readonly PendingDelivery[]): Promise<void> {
      const notifyId = deliveries[0]?.id.split('/')[0] ?? 'empty';
      await store.accept(aNotify({ id: notifyId }), deliveries);
    }

    describe('intake', () => {
      it('stores the requests in their partition, and records the notify', async () => {
        const deliveries = [aDelivery({ id: 'n/0' }), aDelivery({ id: 'n/1', key: 'key-b' })];
        const notify = aNotify({ id: 'n', recipients: 2, devices: 4 });
        expect(await store.findAccepted('n')).toBeUndefined();
        await store.accept(notify, deliveries);
        expect(await store.findAccepted('n')).toEqual(notify);
        expect(await store.listPartition(3)).toEqual(deliveries);
        expect(await store.listPartition(4)).toEqual([]);
      });

      it('records a notify that planned no request', async () => {
        const notify = aNotify({ id: 'nothing', recipients: 0, devices: 0 });
        await store.accept(notify, []);
        expect(await store.findAccepted('nothing')).toEqual(notify);
      });

      it('is idempotent: the same notify again stores nothing twice and keeps the first record and requests', async () => {
        const deliveries = requestsOf('n', 'key-a', 3);
        await store.accept(aNotify({ id: 'n' }), deliveries);
        await store.accept(
          aNotify({ id: 'n', acceptedAt: T0 + 5, devices: 9 }),
          deliveries.map((d) => ({ ...d, body: '{"changed":true}' })),
        );
        expect(await store.listPartition(3)).toEqual(deliveries);
        expect(await store.findAccepted('n')).toEqual(aNotify({ id: 'n' }));
      });

      it('is idempotent after a crash between the requests and the record: the missing ones are filled in', async () => {
        const deliveries = requestsOf('n', 'key-a', 3);
        // The first attempt stored two requests and died before the third and the record.
        await store.accept(aNotify({ id: 'partial' }), deliveries.slice(0, 2));
        expect(await store.findAccepted('n')).toBeUndefined();
        await store.accept(aNotify({ id: 'n' }), deliveries);
        expect(await store.listPartition(3)).toEqual(deliveries);
        expect(await store.findAccepted('n')).toEqual(aNotify({ id: 'n' }));
      });

      // Read back in 15 pages: on the MongoDB stand-in, under load, both take tens of seconds.
      it('takes 30,000 requests of one notify at once', async () => {
        const deliveries = requestsOf('big', 'key', 30_000);
        await store.accept(aNotify({ id: 'big' }), deliveries);
        expect(await store.listPartition(3)).toHaveLength(30_000);
      }, 180_000);
    });

    it('lists a partition by key, then by seq, whatever the intake order, and nothing of other partitions', async () => {
      await accepted([
        aDelivery({ id: 'x/0', key: 'key-b', seq: 20 }),
        aDelivery({ id: 'x/1', key: 'key-a', seq: 30 }),
        aDelivery({ id: 'x/2', key: 'key-b', seq: 3 }),
        aDelivery({ id: 'x/3', key: 'key-z', seq: 3, partition: 4 }),
      ]);
      await accepted([aDelivery({ id: 'y/0', key: 'key-a', seq: 4 }), aDelivery({ id: 'y/1', key: 'key-c', seq: 1 })]);
      expect((await store.listPartition(3)).map((d) => [d.key, d.seq])).toEqual([
        ['key-a', 4],
        ['key-a', 30],
        ['key-b', 3],
        ['key-b', 20],
        ['key-c', 1],
      ]);
      expect(ids(await store.listPartition(4))).toEqual(['x/3']);
    });

    it('removes the given requests only; unknown IDs are no error', async () => {
      await accepted(requestsOf('r', 'key-a', 4));
      await store.remove(['r/key-a/1', 'r/key-a/3', 'unknown/0']);
      expect(ids(await store.listPartition(3))).toEqual(['r/key-a/0', 'r/key-a/2']);
      await store.remove([]);
      expect(await store.listPartition(3)).toHaveLength(2);
    });

    it('removes more requests than one delete takes', async () => {
      const deliveries = requestsOf('many', 'key-a', 2_500);
      await accepted(deliveries);
      await store.remove(ids(deliveries).slice(0, 2_499));
      expect(ids(await store.listPartition(3))).toEqual(['many/key-a/2499']);
    });

    it.each<[string, RetryState]>([
      ['a first failure', { failures: 1, firstFailedAt: T0 + 10, retryAt: T0 + 1_010 }],
      ['a later one', { failures: 7, firstFailedAt: T0 + 10, retryAt: T0 + 64_010 }],
    ])('keeps the retry state of %s for the partition’s next holder', async (_case, retry) => {
      await accepted(requestsOf('f', 'key-a', 2));
      await store.saveRetry('f/key-a/0', retry);
      await store.saveRetry('gone/0', retry);
      expect((await store.listPartition(3)).map((d) => d.retry)).toEqual([retry, undefined]);
    });

    it('finds the records of notifies accepted, one or many', async () => {
      await accepted(requestsOf('known', 'key-a', 1));
      await accepted(requestsOf('other', 'key-b', 1));
      expect(await store.findAccepted('known')).toEqual(aNotify({ id: 'known' }));
      expect(await store.findAccepted('unknown')).toBeUndefined();
      const many = await store.findAcceptedMany(['known', 'unknown', 'other']);
      expect(many.map((record) => record.id).sort()).toEqual(['known', 'other']);
      expect(await store.findAcceptedMany([])).toEqual([]);
    });

    it('notes the requests done of a part, and tells them with its record (or without one) in one answer', async () => {
      expect(await store.findProgress('p1')).toEqual({ done: new Set() });
      await store.markDone(new Map([['p1', ['a', 'b']]]));
      await store.markDone(
        new Map([
          ['p1', ['b', 'c']],
          ['p2', ['x']],
        ]),
      );
      expect(await store.findProgress('p1')).toEqual({ done: new Set(['a', 'b', 'c']) });
      await store.accept(aNotify({ id: 'p1' }), []);
      expect(await store.findProgress('p1')).toEqual({
        accepted: aNotify({ id: 'p1' }),
        done: new Set(['a', 'b', 'c']),
      });
      // The progress is not a record: a router waiting for records sees only those.
      expect((await store.findAcceptedMany(['p1', 'p2'])).map((record) => record.id)).toEqual(['p1']);
    });

    it('gives requests stored before partitions the partition of their user, once', async () => {
      const { partition: _, ...old } = aDelivery({ id: 'old/0', userId: '@bob:example.org' });
      await storeUnpartitioned(store, old);
      await accepted([aDelivery({ id: 'new/0', partition: 1 })]);
      const partitionOf = (userId: string) => (userId === '@bob:example.org' ? 5 : 0);
      expect(await store.assignPartitions(partitionOf)).toBe(1);
      expect(await store.assignPartitions(partitionOf)).toBe(0);
      expect(ids(await store.listPartition(5))).toEqual(['old/0']);
      expect(ids(await store.listPartition(1))).toEqual(['new/0']);
    });

    it('moves requests stored under another partition count (or none said) to their user’s partition, once', async () => {
      const bob = '@bob:example.org';
      const carol = '@carol:example.org';
      const under4 = await withPartitions(store, 4);
      const under8 = await withPartitions(store, 8);
      // Stored by a worker of 4 partitions, and one by a version that did not store the count.
      await under4.accept(aNotify({ id: 'old' }), [
        aDelivery({ id: 'old/bob', userId: bob, partition: 1 }),
        aDelivery({ id: 'old/carol', userId: carol, partition: 2, key: 'key-c' }),
      ]);
      await store.accept(aNotify({ id: 'older' }), [aDelivery({ id: 'older/bob', userId: bob, partition: 1, seq: 0 })]);
      const partitionOf8 = (userId: string) => (userId === bob ? 5 : 2);
      expect(await under8.assignPartitions(partitionOf8)).toBe(3);
      expect(await under8.assignPartitions(partitionOf8)).toBe(0);
      expect(ids(await under8.listPartition(5))).toEqual(['older/bob', 'old/bob']);
      expect(ids(await under8.listPartition(2))).toEqual(['old/carol']);
      expect(await under8.listPartition(1)).toEqual([]);
      // Stored under 8 since: left where they are.
      await under8.accept(aNotify({ id: 'new' }), [aDelivery({ id: 'new/bob', userId: bob, partition: 5, seq: 9 })]);
      expect(await under8.assignPartitions(() => 0)).toBe(0);
      expect(ids(await under8.listPartition(5))).toEqual(['older/bob', 'old/bob', 'new/bob']);
      // Back to 4 (the same procedure): every request moves again.
      expect(await under4.assignPartitions((userId) => (userId === bob ? 1 : 2))).toBe(4);
      expect(ids(await under4.listPartition(1))).toEqual(['older/bob', 'old/bob', 'new/bob']);
    });
  });
}
