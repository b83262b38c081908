import { beforeEach, describe, expect, it } from 'vitest';
import type {
  AcceptedNotify,
  DeliveryStore,
  Lease,
  PendingDelivery,
  RetryState,
} from '../../src/store/delivery-store.js';

/** A fresh, empty store per test: `claimExpired` takes whatever has expired, so tests must not see each other's. */
export type DeliveryStoreFactory = () => Promise<DeliveryStore>;

const T0 = 1_000_000;
const LEASE_MS = 30_000;

export function aNotify(overrides: Partial<AcceptedNotify> = {}): AcceptedNotify {
  return { id: 'notify-1', recipients: 1, devices: 1, acceptedAt: T0, ...overrides };
}

export function aDelivery(overrides: Partial<PendingDelivery> = {}): PendingDelivery {
  const id = overrides.id ?? 'notify-1/0';
  return {
    id,
    key: 'key-a',
    seq: 1,
    userId: '@alice:example.org',
    url: 'https://push.example.org/_matrix/push/v1/notify',
    // Event keys may be anything: the body is kept as text.
    bodyJson: JSON.stringify({ notification: { event_id: `$${id}`, content: { $weird: { 'a.b': [1, null] } } } }),
    devices: [
      { appId: 'org.example.app', pushkey: 'phone' },
      { appId: 'org.example.app', pushkey: 'tablet' },
    ],
    acceptedAt: T0,
    ...overrides,
  };
}

const aLease = (owner: string, until = T0 + LEASE_MS): Lease => ({ owner, until });

/** `count` requests of one notify on `key`, seq from `firstSeq`. */
function requestsOf(notifyId: string, key: string, count: number, firstSeq = 1): PendingDelivery[] {
  return Array.from({ length: count }, (_, n) => aDelivery({ id: `${notifyId}/${key}/${n}`, key, seq: firstSeq + n }));
}

const ids = (deliveries: readonly PendingDelivery[]) => deliveries.map((d) => d.id);

/**
 * What every DeliveryStore adapter must do. Run by the in-memory unit test
 * and by the MongoDB integration test with the same expectations.
 */
export function deliveryStoreContract(name: string, makeStore: DeliveryStoreFactory): void {
  describe(`DeliveryStore contract: ${name}`, () => {
    let store: DeliveryStore;
    beforeEach(async () => {
      store = await makeStore();
    });

    /** Requests of a notify accepted by `owner` at T0, the lease running to `until`. */
    async function heldBy(owner: string, deliveries: readonly PendingDelivery[], until = T0 + LEASE_MS) {
      const notifyId = deliveries[0]?.id.split('/')[0] ?? 'empty';
      return store.accept(aNotify({ id: notifyId }), deliveries, aLease(owner, until), T0);
    }

    describe('intake', () => {
      it('stores the requests, held by the accepting worker, and records the notify', async () => {
        const deliveries = [aDelivery({ id: 'n/0' }), aDelivery({ id: 'n/1', key: 'key-b' })];
        const notify = aNotify({ id: 'n', recipients: 2, devices: 4 });
        expect(await store.findAccepted('n')).toBeUndefined();
        expect(await store.accept(notify, deliveries, aLease('w1'), T0)).toEqual(deliveries);
        expect(await store.findAccepted('n')).toEqual(notify);
        expect(await store.listHeld('w1')).toEqual(deliveries);
        expect(await store.listHeld('w2')).toEqual([]);
      });

      it('records a notify that planned no request', async () => {
        const notify = aNotify({ id: 'nothing', recipients: 0, devices: 0 });
        expect(await store.accept(notify, [], aLease('w1'), T0)).toEqual([]);
        expect(await store.findAccepted('nothing')).toEqual(notify);
      });

      it('is idempotent: the same notify again stores nothing twice and keeps the first record and requests', async () => {
        const deliveries = requestsOf('n', 'key-a', 3);
        const first = await store.accept(aNotify({ id: 'n' }), deliveries, aLease('w1'), T0);
        const again = await store.accept(
          aNotify({ id: 'n', acceptedAt: T0 + 5, devices: 9 }),
          deliveries.map((d) => ({ ...d, bodyJson: '{"changed":true}' })),
          aLease('w1', T0 + 2 * LEASE_MS),
          T0 + 5,
        );
        expect(again).toEqual(first);
        expect(await store.listHeld('w1')).toEqual(deliveries);
        expect(await store.findAccepted('n')).toEqual(aNotify({ id: 'n' }));
      });

      it('is idempotent after a crash between the requests and the record: the missing ones are filled in', async () => {
        const deliveries = requestsOf('n', 'key-a', 3);
        // The first attempt stored two requests and died before the third and the record.
        await store.accept(aNotify({ id: 'partial' }), deliveries.slice(0, 2), aLease('w1'), T0);
        expect(await store.findAccepted('n')).toBeUndefined();
        expect(await store.accept(aNotify({ id: 'n' }), deliveries, aLease('w1'), T0)).toEqual(deliveries);
        expect(await store.findAccepted('n')).toEqual(aNotify({ id: 'n' }));
      });

      it.each<[string, (held: () => Promise<unknown>) => Promise<unknown>, number, string]>([
        ['no request yet', async () => Promise.resolve(), T0, 'w2'],
        ['requests under a live lease of another worker', async (held) => held(), T0 + LEASE_MS, 'w1'],
        ['requests whose other holder’s lease expired', async (held) => held(), T0 + LEASE_MS + 1, 'w2'],
        [
          'requests another worker released',
          async (held) => {
            await held();
            await store.release('w1');
          },
          T0 + 1,
          'w2',
        ],
      ])('sends a key with %s to the right holder, the whole key in one hand', async (_case, arrange, now, holder) => {
        await arrange(async () => heldBy('w1', requestsOf('old', 'key-a', 2)));
        const fresh = aDelivery({ id: 'new/0', key: 'key-a', seq: 10 });
        const answered = await store.accept(aNotify({ id: 'new' }), [fresh], aLease('w2', now + LEASE_MS), now);
        const heldByHolder = await store.listHeld(holder);
        expect(heldByHolder.at(-1)).toEqual(fresh);
        // Every request of the key, old and new, has the one holder.
        const other = holder === 'w1' ? 'w2' : 'w1';
        expect((await store.listHeld(other)).filter((d) => d.key === 'key-a')).toEqual([]);
        expect(answered).toEqual(holder === 'w2' ? heldByHolder : []);
      });

      it('keeps a live holder’s lease on the requests it gets: they expire with its others', async () => {
        await heldBy('w1', requestsOf('old', 'key-a', 1), T0 + 100);
        await store.accept(aNotify({ id: 'new' }), requestsOf('new', 'key-a', 1, 5), aLease('w2', T0 + LEASE_MS), T0);
        expect(ids(await store.claimExpired(aLease('w3', T0 + 2 * LEASE_MS), T0 + 100))).toEqual([]);
        expect(ids(await store.claimExpired(aLease('w3', T0 + 2 * LEASE_MS), T0 + 101))).toEqual([
          'old/key-a/0',
          'new/key-a/0',
        ]);
      });

      it('answers what the worker now holds of the notify’s keys only, taken-over requests included, oldest first', async () => {
        await heldBy('dead', [...requestsOf('old', 'key-b', 2), ...requestsOf('old', 'key-z', 1)], T0);
        await heldBy('w1', requestsOf('mine', 'key-c', 1));
        const now = T0 + 1;
        const fresh = [
          aDelivery({ id: 'new/0', key: 'key-b', seq: 7 }),
          aDelivery({ id: 'new/1', key: 'key-a', seq: 8 }),
        ];
        const answered = await store.accept(aNotify({ id: 'new' }), fresh, aLease('w1', now + LEASE_MS), now);
        expect(ids(answered)).toEqual(['new/1', 'old/key-b/0', 'old/key-b/1', 'new/0']);
        // key-z was not the notify's: it stays for a claim.
        expect(ids(await store.claimExpired(aLease('w2', now + LEASE_MS), now))).toEqual(['old/key-z/0']);
      });

      it('sends each of many keys to its holder, and answers only the notify’s keys', async () => {
        const keys = (from: number, to: number) =>
          Array.from({ length: to - from }, (_, n) => `key-${String(from + n).padStart(3, '0')}`);
        const now = T0 + 1;
        await heldBy(
          'w1',
          [...keys(0, 300), 'key-other'].flatMap((key) => requestsOf('w1', key, 1)),
          now + LEASE_MS,
        );
        await heldBy(
          'w2',
          keys(300, 600).flatMap((key) => requestsOf('w2', key, 1)),
          now + LEASE_MS,
        );
        await heldBy(
          'dead',
          [...keys(600, 900), 'key-zzz'].flatMap((key) => requestsOf('dead', key, 1)),
          T0,
        );
        const fresh = keys(0, 900).flatMap((key) => requestsOf('new', key, 1, 2));
        const answered = await store.accept(aNotify({ id: 'new' }), fresh, aLease('w1', now + LEASE_MS), now);
        const mine = [...keys(0, 300), ...keys(600, 900)];
        expect(answered.map((d) => `${d.key}:${d.seq}`)).toEqual(mine.flatMap((key) => [`${key}:1`, `${key}:2`]));
        expect((await store.listHeld('w2')).map((d) => `${d.key}:${d.seq}`)).toEqual(
          keys(300, 600).flatMap((key) => [`${key}:1`, `${key}:2`]),
        );
        expect(ids(await store.claimExpired(aLease('w3', now + LEASE_MS), now))).toEqual(['dead/key-zzz/0']);
      });

      it('takes 30,000 requests of one notify at once', async () => {
        const deliveries = Array.from({ length: 30_000 }, (_, n) =>
          aDelivery({ id: `big/${n}`, key: `key-${String(n % 3_000).padStart(4, '0')}`, seq: n }),
        );
        const answered = await store.accept(aNotify({ id: 'big', devices: 60_000 }), deliveries, aLease('w1'), T0);
        expect(answered).toHaveLength(30_000);
        expect(answered[0]?.key).toBe('key-0000');
        expect(answered.slice(0, 10).map((d) => d.seq)).toEqual([
          0, 3_000, 6_000, 9_000, 12_000, 15_000, 18_000, 21_000, 24_000, 27_000,
        ]);
        await store.remove(ids(deliveries));
        expect(await store.listHeld('w1')).toEqual([]);
      }, 60_000);
    });

    it('renews every request the worker holds, and counts them', async () => {
      await heldBy('w1', [...requestsOf('a', 'key-a', 2), ...requestsOf('b', 'key-b', 1)], T0 + 10);
      await heldBy('w2', requestsOf('c', 'key-c', 1), T0 + 10);
      expect(await store.renew(aLease('w1', T0 + 500))).toBe(3);
      expect(await store.renew(aLease('nobody', T0 + 500))).toBe(0);
      // w2 did not renew: only its request is taken.
      expect(ids(await store.claimExpired(aLease('w3'), T0 + 11))).toEqual(['c/key-c/0']);
      expect(await store.listHeld('w1')).toHaveLength(3);
    });

    describe('claimExpired', () => {
      it.each([
        ['before the lease ends', T0 + 99, []],
        ['at the last ms of the lease', T0 + 100, []],
        ['once it has expired', T0 + 101, ['a/key-a/0', 'a/key-a/1']],
      ])('takes a request %s: %j', async (_case, now, taken) => {
        await heldBy('w1', requestsOf('a', 'key-a', 2), T0 + 100);
        expect(ids(await store.claimExpired(aLease('w2', now + LEASE_MS), now))).toEqual(taken);
        expect(await store.listHeld('w1')).toHaveLength(2 - taken.length);
      });

      it('takes only the expired ones, and answers what it took, oldest first per key', async () => {
        await heldBy('dead', [...requestsOf('d', 'key-b', 2), ...requestsOf('d2', 'key-d', 1)], T0);
        await heldBy('alive', requestsOf('l', 'key-c', 2), T0 + LEASE_MS);
        await heldBy('w1', requestsOf('m', 'key-a', 1), T0 + LEASE_MS);
        const claimed = await store.claimExpired(aLease('w1', T0 + 2 * LEASE_MS), T0 + 1);
        expect(ids(claimed)).toEqual(['d/key-b/0', 'd/key-b/1', 'd2/key-d/0']);
        expect(ids(await store.listHeld('w1'))).toEqual(['m/key-a/0', 'd/key-b/0', 'd/key-b/1', 'd2/key-d/0']);
        expect(ids(await store.listHeld('alive'))).toEqual(['l/key-c/0', 'l/key-c/1']);
        expect(await store.listHeld('dead')).toEqual([]);
        // What it claimed runs under its new lease; what it held before keeps its own (a claim renews nothing).
        expect(ids(await store.claimExpired(aLease('w2'), T0 + LEASE_MS + 1))).toEqual([
          'm/key-a/0',
          'l/key-c/0',
          'l/key-c/1',
        ]);
      });

      it('never splits a key between two workers claiming at the same moment', async () => {
        const keys = Array.from({ length: 20 }, (_, k) => `key-${String(k).padStart(2, '0')}`);
        await heldBy(
          'dead',
          keys.flatMap((key) => requestsOf('d', key, 5)),
          T0,
        );
        const now = T0 + 1;
        const [first, second] = await Promise.all([
          store.claimExpired(aLease('w1', now + LEASE_MS), now),
          store.claimExpired(aLease('w2', now + LEASE_MS), now),
        ]);
        const keysOf = (held: readonly PendingDelivery[]) => new Set(held.map((d) => d.key));
        for (const key of keysOf(first)) expect(keysOf(second).has(key)).toBe(false);
        expect([...ids(first), ...ids(second)].sort()).toEqual(
          keys.flatMap((key) => ids(requestsOf('d', key, 5))).sort(),
        );
        // Whoever did not get a key can claim again later and finds nothing left.
        expect(await store.claimExpired(aLease('w3', now + LEASE_MS), now)).toEqual([]);
      });
    });

    it('lists what a worker holds by key, then by seq, whatever the intake order', async () => {
      await heldBy('w1', [
        aDelivery({ id: 'x/0', key: 'key-b', seq: 20 }),
        aDelivery({ id: 'x/1', key: 'key-a', seq: 30 }),
        aDelivery({ id: 'x/2', key: 'key-b', seq: 3 }),
      ]);
      await heldBy('w1', [
        aDelivery({ id: 'y/0', key: 'key-a', seq: 4 }),
        aDelivery({ id: 'y/1', key: 'key-c', seq: 1 }),
      ]);
      expect((await store.listHeld('w1')).map((d) => [d.key, d.seq])).toEqual([
        ['key-a', 4],
        ['key-a', 30],
        ['key-b', 3],
        ['key-b', 20],
        ['key-c', 1],
      ]);
    });

    it('removes the given requests only; unknown IDs are no error', async () => {
      await heldBy('w1', requestsOf('r', 'key-a', 4));
      await store.remove(['r/key-a/1', 'r/key-a/3', 'unknown/0']);
      expect(ids(await store.listHeld('w1'))).toEqual(['r/key-a/0', 'r/key-a/2']);
      await store.remove([]);
      expect(await store.listHeld('w1')).toHaveLength(2);
    });

    it('removes more requests than one delete takes', async () => {
      const deliveries = requestsOf('many', 'key-a', 2_500);
      await heldBy('w1', deliveries);
      await store.remove(ids(deliveries).slice(0, 2_499));
      expect(ids(await store.listHeld('w1'))).toEqual(['many/key-a/2499']);
    });

    it.each<[string, RetryState]>([
      ['a first failure', { failures: 1, firstFailedAt: T0 + 10, retryAt: T0 + 1_010 }],
      ['a later one', { failures: 7, firstFailedAt: T0 + 10, retryAt: T0 + 64_010 }],
    ])('keeps the retry state of %s, across a claim by another worker', async (_case, retry) => {
      await heldBy('w1', requestsOf('f', 'key-a', 2), T0 + 100);
      await store.saveRetry('f/key-a/0', retry);
      await store.saveRetry('gone/0', retry);
      expect((await store.listHeld('w1')).map((d) => d.retry)).toEqual([retry, undefined]);
      expect((await store.claimExpired(aLease('w2'), T0 + 101)).map((d) => d.retry)).toEqual([retry, undefined]);
    });

    it('lets a released worker’s requests be claimed at once, before its lease would have ended', async () => {
      await heldBy('w1', requestsOf('s', 'key-a', 2), T0 + LEASE_MS);
      await heldBy('w2', requestsOf('t', 'key-b', 1), T0 + LEASE_MS);
      await store.release('w1');
      expect(await store.listHeld('w1')).toEqual([]);
      expect(await store.renew(aLease('w1'))).toBe(0);
      expect(ids(await store.claimExpired(aLease('w3'), T0 + 1))).toEqual(['s/key-a/0', 's/key-a/1']);
      expect(ids(await store.listHeld('w2'))).toEqual(['t/key-b/0']);
    });

    it('finds no record for a notify never accepted', async () => {
      await heldBy('w1', requestsOf('known', 'key-a', 1));
      expect(await store.findAccepted('known')).toEqual(aNotify({ id: 'known' }));
      expect(await store.findAccepted('unknown')).toBeUndefined();
    });
  });
}
