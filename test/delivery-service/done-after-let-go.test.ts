import { describe, expect, it } from 'vitest';
import type { DeliveryStore } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { StoreUnavailableError } from '../../src/store/push-store.js';
import { eventually } from '../support/eventually.js';
import { aJournal, aPart, aRequest, closeJournalsAfterEach, P } from '../support/journal-world.js';

closeJournalsAfterEach();

type JournalStore = Pick<DeliveryStore, 'acceptAll' | 'remove' | 'saveRetry' | 'markDone'>;

/**
 * A store whose writes of requests wait until the test settles them: `land`
 * stores the requests and answers, `fail` stores them and loses the answer
 * (a write reported failed may have landed all the same).
 */
function aHeldStore() {
  const inner = new InMemoryDeliveryStore();
  const held: { store: () => Promise<void>; land: () => void; fail: () => void }[] = [];
  const store: JournalStore = {
    markDone: async (done) => inner.markDone(done),
    acceptAll: async (notifies, deliveries) => {
      if (deliveries.length === 0) return inner.acceptAll(notifies, deliveries);
      return new Promise<void>((resolve, reject) => {
        const stored = { done: false };
        const storeOnce = async () => {
          if (!stored.done) await inner.acceptAll(notifies, deliveries);
          stored.done = true;
        };
        held.push({
          // Stored, not answered yet.
          store: storeOnce,
          land: () => {
            void storeOnce().then(resolve, reject);
          },
          fail: () => {
            void storeOnce().then(() => {
              reject(new StoreUnavailableError('the connection dropped before the answer'));
            }, reject);
          },
        });
      });
    },
    remove: async (ids) => inner.remove(ids),
    saveRetry: async (id, retry) => inner.saveRetry(id, retry),
  };
  return { inner, store, held };
}

const storedIds = async (inner: InMemoryDeliveryStore) =>
  (await inner.listPartition(P)).map((delivery) => delivery.id).sort();

/**
 * Part m1 (m1/a, m1/b) is being stored when the lease runs out and the
 * partition is let go; then m1/a's send, out at the lapse, is answered and
 * its deletion comes, before the write landed.
 */
async function aDeletionBeforeTheWriteLanded() {
  const { inner, store, held } = aHeldStore();
  const { journal } = aJournal({ persistAfterMs: 10, store });
  void journal.admit(P, aPart('m1', Date.now() - 100), [aRequest('m1/a'), aRequest('m1/b')]).catch(() => undefined);
  await eventually(() => {
    expect(held).toHaveLength(1);
  });
  journal.forget(P);
  await journal.remove(['m1/a']);
  const write = held[0];
  if (write === undefined) throw new Error('no write held');
  return { inner, journal, write };
}

describe('the delivery journal: a request done after its partition was let go while its write was out', () => {
  it.each(['land', 'fail'] as const)(
    'is deleted once the write settles (%s), not before: left in the store, the next holder would send it again',
    async (settle) => {
      const { inner, write } = await aDeletionBeforeTheWriteLanded();
      write[settle]();
      await eventually(async () => {
        expect(await storedIds(inner)).toEqual(['m1/b']);
      }, 2_000);
      // Noted done for its part too: taken in again from the queue, the part skips it.
      await eventually(async () => {
        expect([...(await inner.findProgress('m1')).done]).toEqual(['m1/a']);
      }, 2_000);
    },
  );

  it('leaves alone the same request planned again from its part, taken in again before the write was answered', async () => {
    const { inner, journal, write } = await aDeletionBeforeTheWriteLanded();
    // The partition taken back, the part came back from the queue before m1/a's progress mark was read.
    // (Taken in a minute from now, as far as the journal sees: not old enough to be stored meanwhile.)
    const again = journal.admit(P, aPart('m1', Date.now() + 60_000), [aRequest('m1/a')]);
    write.land();
    await eventually(async () => {
      expect(await storedIds(inner)).toEqual(['m1/b']);
    }, 2_000);
    // The request planned again is the scheduler's to settle: until then its part is not acknowledged.
    expect(journal.tracking(P)).toBe(1);
    await journal.remove(['m1/a']);
    await again;
    expect(journal.tracking(P)).toBe(0);
  });

  it('is not held again by a read of the partition taken back before the write was answered', async () => {
    const { inner, journal, write } = await aDeletionBeforeTheWriteLanded();
    // The write landed; before its answer came, the partition was claimed back and read.
    await write.store();
    expect(await storedIds(inner)).toEqual(['m1/a', 'm1/b']);
    journal.stored(await inner.listPartition(P));
    expect(journal.tracking(P)).toBe(1);
    write.land();
    await eventually(async () => {
      expect(await storedIds(inner)).toEqual(['m1/b']);
    }, 2_000);
  });
});
