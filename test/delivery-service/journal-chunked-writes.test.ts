import { describe, expect, it } from 'vitest';
import type { DeliveryStore } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { StoreUnavailableError } from '../../src/store/push-store.js';
import { eventually } from '../support/eventually.js';
import { aJournal, aPart, aRequest, closeJournalsAfterEach, P, state, wait } from '../support/journal-world.js';

closeJournalsAfterEach();

type JournalStore = Pick<DeliveryStore, 'acceptAll' | 'remove' | 'saveRetry' | 'markDone'>;

/** An in-memory store whose writes of requests take `ms`, recording their sizes and how many were out at once. */
function aRecordingStore(ms: number) {
  const inner = new InMemoryDeliveryStore();
  const sizes: number[] = [];
  let out = 0;
  let most = 0;
  const store: JournalStore = {
    markDone: async (done) => inner.markDone(done),
    acceptAll: async (notifies, deliveries) => {
      if (deliveries.length > 0) {
        sizes.push(deliveries.length);
        out += 1;
        most = Math.max(most, out);
        await wait(ms);
        out -= 1;
      }
      await inner.acceptAll(notifies, deliveries);
    },
    remove: async (ids) => inner.remove(ids),
    saveRetry: async (id, retry) => inner.saveRetry(id, retry),
  };
  return {
    inner,
    store,
    sizes,
    get most() {
      return most;
    },
  };
}

/** `count` requests of one part of `partition`, each for its own device. */
const requestsOf = (part: string, partition: number, count: number) =>
  Array.from({ length: count }, (_, i) => aRequest(`${part}/${String(i)}`, { partition }));

describe('the delivery journal: how it stores what still waits', () => {
  it('writes a catching-up intake’s waiting requests in chunks, a few writes at a time, every partition together', async () => {
    // Three partitions, two parts of 700 each: one write per partition would be 1,400 requests, three at once.
    const recording = aRecordingStore(5);
    const { journal } = aJournal({ persistAfterMs: 10, store: recording.store, writes: { chunk: 500, inFlight: 2 } });
    const secured = [P, P + 1, P + 2].flatMap((partition) =>
      ['m1', 'm2'].map(async (m) => {
        const part = `${m}-${String(partition)}`;
        return journal.admit(partition, aPart(part), requestsOf(part, partition, 700));
      }),
    );
    await Promise.all(secured);
    expect(recording.inner.size).toBe(4200);
    expect(Math.max(...recording.sizes)).toBeLessThanOrEqual(500);
    expect(recording.sizes.reduce((a, b) => a + b, 0)).toBe(4200);
    expect(recording.most).toBe(2);
  });

  it('stops between chunks when the lease comes into doubt: the part waits, and is stored and acknowledged once it holds', async () => {
    const recording = aRecordingStore(1);
    let holds = true;
    let lapsed = false;
    const { journal } = aJournal({
      persistAfterMs: 10,
      store: {
        ...recording.store,
        acceptAll: async (notifies, deliveries) => {
          await recording.store.acceptAll(notifies, deliveries);
          // The lease lapses while the first chunk is written.
          if (deliveries.length > 0 && !lapsed) {
            lapsed = true;
            holds = false;
          }
        },
      },
      writable: () => holds,
      writes: { chunk: 1, inFlight: 1 },
    });
    const secured = journal.admit(P, aPart('m1', Date.now() - 100), requestsOf('m1', P, 3));
    await eventually(() => {
      expect(recording.sizes).toEqual([1]);
    });
    await wait(40);
    expect(await state(secured)).toBe('pending');
    expect(recording.inner.size).toBe(1);
    // No record: a part only partly stored is planned again by whoever takes it in.
    expect(await recording.inner.findAccepted('m1')).toBeUndefined();
    holds = true;
    await secured;
    // The chunk written stays stored: the rest is written, then the record.
    expect(recording.sizes).toEqual([1, 1, 1]);
    expect(recording.inner.size).toBe(3);
    expect(await recording.inner.findAccepted('m1')).toMatchObject({ id: 'm1' });
  });

  it('stores no request done while its chunk waited for its turn, and deletes one done while its chunk was written as soon as the chunk landed', async () => {
    // A long pass on a slow store: a crash in its middle must leave the next holder only one chunk to send twice.
    const inner = new InMemoryDeliveryStore();
    const written: string[][] = [];
    const gates: (() => void)[] = [];
    const store: JournalStore = {
      markDone: async (done) => inner.markDone(done),
      acceptAll: async (notifies, deliveries) => {
        if (deliveries.length > 0) {
          written.push(deliveries.map((delivery) => delivery.id));
          await new Promise<void>((resolve) => gates.push(resolve));
        }
        await inner.acceptAll(notifies, deliveries);
      },
      remove: async (ids) => inner.remove(ids),
      saveRetry: async (id, retry) => inner.saveRetry(id, retry),
    };
    const { journal } = aJournal({ persistAfterMs: 10, store, writes: { chunk: 1, inFlight: 1 } });
    const secured = journal.admit(P, aPart('m1', Date.now() - 100), requestsOf('m1', P, 3));
    await eventually(() => {
      expect(written).toEqual([['m1/0']]);
    });
    // Sent while the first chunk is written, and while the last waits for its turn.
    await journal.remove(['m1/0', 'm1/2']);
    gates.shift()?.();
    await eventually(() => {
      expect(written).toEqual([['m1/0'], ['m1/1']]);
    });
    // The second chunk is still out, the pass not over: the first is deleted already, and both noted done.
    expect(await inner.listPartition(P)).toEqual([]);
    await eventually(async () => {
      expect([...(await inner.findProgress('m1')).done].sort()).toEqual(['m1/0', 'm1/2']);
    });
    gates.shift()?.();
    await secured;
    expect(written).toEqual([['m1/0'], ['m1/1']]);
    expect((await inner.listPartition(P)).map((delivery) => delivery.id)).toEqual(['m1/1']);
  });

  it('marks a request done while its write failed as done for its part: taken in again, it is not sent again', async () => {
    const inner = new InMemoryDeliveryStore();
    let fail: () => void = () => undefined;
    const store: JournalStore = {
      markDone: async (done) => inner.markDone(done),
      acceptAll: async (notifies, deliveries) => {
        if (deliveries.length > 0)
          await new Promise<void>((_, reject) => {
            fail = () => {
              reject(new StoreUnavailableError('the connection dropped before the answer'));
            };
          });
        await inner.acceptAll(notifies, deliveries);
      },
      remove: async (ids) => inner.remove(ids),
      saveRetry: async (id, retry) => inner.saveRetry(id, retry),
    };
    const { journal } = aJournal({ persistAfterMs: 10, store });
    void journal.admit(P, aPart('m1', Date.now() - 100), [aRequest('m1/a'), aRequest('m1/b')]).catch(() => undefined);
    await wait(40);
    await journal.remove(['m1/a']);
    fail();
    await eventually(async () => {
      expect([...(await inner.findProgress('m1')).done]).toEqual(['m1/a']);
    });
  });
  it('deletes a request done while its failed write was out until the store answers, and holds it from no read meanwhile', async () => {
    const inner = new InMemoryDeliveryStore();
    let fail: () => void = () => undefined;
    let deletionsRefused = 1;
    const store: JournalStore = {
      markDone: async (done) => inner.markDone(done),
      acceptAll: async (notifies, deliveries) => {
        await inner.acceptAll(notifies, deliveries);
        // The requests' write lands, and is reported failed (the answer lost with the connection).
        if (deliveries.length > 0)
          await new Promise<void>((_, reject) => {
            fail = () => {
              reject(new StoreUnavailableError('the connection dropped before the answer'));
            };
          });
      },
      remove: async (ids) => {
        if (deletionsRefused > 0) {
          deletionsRefused -= 1;
          throw new StoreUnavailableError('the store cannot be reached');
        }
        await inner.remove(ids);
      },
      saveRetry: async (id, retry) => inner.saveRetry(id, retry),
    };
    const { journal } = aJournal({ persistAfterMs: 10, store });
    void journal.admit(P, aPart('m1', Date.now() - 100), [aRequest('m1/a')]).catch(() => undefined);
    await wait(40);
    await journal.remove(['m1/a']);
    fail();
    await wait(20);
    // The partition read meanwhile (taken back) lists it: done with, it is not tracked, so not sent, again.
    journal.stored(await inner.listPartition(P));
    expect(journal.tracking(P)).toBe(0);
    await eventually(() => {
      expect(inner.size).toBe(0);
    }, 3_000);
  });
});
