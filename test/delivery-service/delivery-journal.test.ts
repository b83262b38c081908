import { describe, expect, it } from 'vitest';
import { DEFAULT_BREAKER_POLICY } from '../../src/delivery/circuit-breaker.js';
import { DeliveryScheduler } from '../../src/delivery-service/delivery-scheduler.js';
import { IntakeStoppedError } from '../../src/delivery-service/notify-intake.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import type { DeliveryStore, PendingDelivery } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { StoreUnavailableError } from '../../src/store/push-store.js';
import { eventually } from '../support/eventually.js';
import { aJournal, aPart, aRequest, closeJournalsAfterEach, P, state, wait } from '../support/journal-world.js';

closeJournalsAfterEach();

describe('the delivery journal: when a part may be acknowledged', () => {
  it('acknowledges a part whose requests are all done at once, storing no request, only its record', async () => {
    const { journal, store } = aJournal({ persistAfterMs: 10_000 });
    const secured = journal.admit(P, aPart('m1'), [aRequest('a'), aRequest('b')]);
    await journal.remove(['a', 'b']);
    await expect(secured).resolves.toBeUndefined();
    expect(store.size).toBe(0);
    expect(await store.findAccepted('m1')).toMatchObject({ id: 'm1' });
  });

  it('stores what is still waiting after persistAfterMs, acknowledges, and deletes it from the store once done', async () => {
    const { journal, store } = aJournal({ persistAfterMs: 30 });
    const secured = journal.admit(P, aPart('m1'), [aRequest('a'), aRequest('b')]);
    await journal.remove(['a']);
    expect(await state(secured)).toBe('pending');
    await wait(80);
    expect(await state(secured)).toBe('resolved');
    expect((await store.listPartition(P)).map((d) => d.id)).toEqual(['b']);
    await journal.remove(['b']);
    expect(store.size).toBe(0);
  });

  it('acknowledges parts in intake order: a later part done at once waits for the one before it', async () => {
    const { journal, store } = aJournal({ persistAfterMs: 50 });
    const first = journal.admit(P, aPart('m1'), [aRequest('a')]);
    const second = journal.admit(P, aPart('m2'), [aRequest('b')]);
    await journal.remove(['b']);
    expect(await state(second)).toBe('pending');
    await wait(120);
    expect([await state(first), await state(second)]).toEqual(['resolved', 'resolved']);
    expect((await store.listPartition(P)).map((d) => d.id)).toEqual(['a']);
  });

  it('writes nothing and acknowledges nothing while the lease is in doubt; carries on once it holds', async () => {
    let holds = false;
    const { journal, store } = aJournal({ persistAfterMs: 10, writable: () => holds });
    const secured = journal.admit(P, aPart('m1'), [aRequest('a')]);
    await wait(60);
    expect(await state(secured)).toBe('pending');
    expect(store.size).toBe(0);
    holds = true;
    await wait(60);
    expect(await state(secured)).toBe('resolved');
    expect(store.size).toBe(1);
  });

  it('stores everything of a partition at once on flush (a handover), and nothing of another', async () => {
    const { journal, store } = aJournal({ persistAfterMs: 60_000 });
    const mine = journal.admit(P, aPart('m1'), [aRequest('a'), aRequest('b')]);
    const other = journal.admit(P + 1, aPart('m2'), [aRequest('c', { partition: P + 1 })]);
    await journal.flush(P);
    expect(await state(mine)).toBe('resolved');
    expect(await state(other)).toBe('pending');
    expect((await store.listPartition(P)).map((d) => d.id)).toEqual(['a', 'b']);
  });

  it('refuses to acknowledge the parts of a partition another worker took over, and writes nothing of them', async () => {
    const { journal, store } = aJournal({ persistAfterMs: 10 });
    const secured = journal.admit(P, aPart('m1'), [aRequest('a')]);
    journal.forget(P);
    await expect(secured).rejects.toBeInstanceOf(IntakeStoppedError);
    await wait(40);
    expect(store.size).toBe(0);
  });

  it('deletes a request done while it was being written, once the write landed', async () => {
    const inner = new InMemoryDeliveryStore();
    let landWrite: () => void = () => undefined;
    const slow: Pick<DeliveryStore, 'acceptAll' | 'remove' | 'saveRetry' | 'markDone'> = {
      markDone: async (done) => inner.markDone(done),
      acceptAll: async (notifies, deliveries) => {
        // The requests' write is the slow one (the records go after it).
        if (deliveries.length > 0)
          await new Promise<void>((resolve) => {
            landWrite = resolve;
          });
        await inner.acceptAll(notifies, deliveries);
      },
      remove: async (ids) => inner.remove(ids),
      saveRetry: async (id, retry) => inner.saveRetry(id, retry),
    };
    const { journal } = aJournal({ persistAfterMs: 10, store: slow });
    const secured = journal.admit(P, aPart('m1'), [aRequest('a')]);
    await wait(40);
    await journal.remove(['a']);
    landWrite();
    await secured;
    await wait(10);
    expect(inner.size).toBe(0);
  });

  it('deletes a request done after its write failed: the write may have landed all the same', async () => {
    const inner = new InMemoryDeliveryStore();
    let holds = true;
    const store: Pick<DeliveryStore, 'acceptAll' | 'remove' | 'saveRetry' | 'markDone'> = {
      markDone: async (done) => inner.markDone(done),
      acceptAll: async (notifies, deliveries) => {
        await inner.acceptAll(notifies, deliveries);
        if (deliveries.length === 0) return;
        // No second write (the lease in doubt, say): the request stays in memory, and goes out from there.
        holds = false;
        throw new StoreUnavailableError('the connection dropped before the answer');
      },
      remove: async (ids) => inner.remove(ids),
      saveRetry: async (id, retry) => inner.saveRetry(id, retry),
    };
    const { journal } = aJournal({ persistAfterMs: 10, store, writable: () => holds });
    void journal.admit(P, aPart('m1', Date.now() - 100), [aRequest('a')]).catch(() => undefined);
    await wait(40);
    expect(inner.size).toBe(1);
    await journal.remove(['a']);
    // Left there, the partition's holder (this worker) would never send nor delete it: it waits until the partition moves.
    expect(inner.size).toBe(0);
  });

  describe('a write that lands after the lease came into doubt (the next holder may have read the partition already)', () => {
    /** A store whose requests' writes land only when told to. */
    function aSlowStore() {
      const inner = new InMemoryDeliveryStore();
      const landings: (() => void)[] = [];
      const store: Pick<DeliveryStore, 'acceptAll' | 'remove' | 'saveRetry' | 'markDone'> = {
        markDone: async (done) => inner.markDone(done),
        acceptAll: async (notifies, deliveries) => {
          if (deliveries.length > 0) await new Promise<void>((resolve) => landings.push(resolve));
          await inner.acceptAll(notifies, deliveries);
        },
        remove: async (ids) => inner.remove(ids),
        saveRetry: async (id, retry) => inner.saveRetry(id, retry),
      };
      return { inner, store, land: () => landings.shift()?.() };
    }

    it('acknowledges nothing and records no part; the part goes back to the queue once the partition is let go', async () => {
      const { inner, store, land } = aSlowStore();
      let holds = true;
      const { journal } = aJournal({ persistAfterMs: 10, store, writable: () => holds });
      const secured = journal.admit(P, aPart('m1', Date.now() - 100), [aRequest('a')]);
      await wait(40);
      // Started under the lease; the lease lapses before the write lands.
      holds = false;
      land();
      await wait(20);
      expect(await state(secured)).toBe('pending');
      expect((await inner.listPartition(P)).map((d) => d.id)).toEqual(['a']);
      // No record: the next holder that takes the part in again plans it, rather than skipping it as done.
      expect(await inner.findAccepted('m1')).toBeUndefined();
      journal.forget(P);
      await expect(secured).rejects.toBeInstanceOf(IntakeStoppedError);
    });

    it('acknowledges it, with its record, once the lease holds again (renewed)', async () => {
      const { inner, store, land } = aSlowStore();
      let holds = true;
      const { journal } = aJournal({ persistAfterMs: 10, store, writable: () => holds });
      const secured = journal.admit(P, aPart('m1', Date.now() - 100), [aRequest('a')]);
      await wait(40);
      holds = false;
      land();
      await wait(20);
      holds = true;
      await wait(60);
      expect(await state(secured)).toBe('resolved');
      expect(await inner.findAccepted('m1')).toMatchObject({ id: 'm1' });
      // Done later: deleted from the store (it was written).
      await journal.remove(['a']);
      expect(inner.size).toBe(0);
    });

    it('says when the partition’s writes under way ended: taking its own lapsed partition back, a worker reads it then', async () => {
      const { inner, store, land } = aSlowStore();
      const { journal } = aJournal({ persistAfterMs: 10, store });
      void journal.admit(P, aPart('m1', Date.now() - 100), [aRequest('a')]).catch(() => undefined);
      await wait(40);
      // The lease ran out: the partition is let go while its write is on its way.
      journal.forget(P);
      const written = journal.written(P);
      expect(await state(written)).toBe('pending');
      land();
      await written;
      expect((await inner.listPartition(P)).map((d) => d.id)).toEqual(['a']);
    });

    it('deletes the last holder’s late copy of a request it planned itself, once done', async () => {
      const { journal, store } = aJournal({ persistAfterMs: 60_000 });
      void journal.admit(P, aPart('m1'), [aRequest('a')]);
      // The last holder's write landed after this worker read the partition; a second read finds it.
      await store.acceptAll([], [aRequest('a')]);
      journal.stored(await store.listPartition(P));
      await journal.remove(['a']);
      expect(store.size).toBe(0);
    });
  });

  it('notes in the store, within moments, what is done of a part not yet secured', async () => {
    const { journal, store } = aJournal({ persistAfterMs: 10_000 });
    const secured = journal.admit(P, aPart('m1'), [aRequest('a'), aRequest('b')]);
    await journal.remove(['a']);
    await wait(100);
    expect(await store.findProgress('m1')).toEqual({ done: new Set(['a']) });
    expect(await state(secured)).toBe('pending');
  });

  it('keeps a request planned twice (the same part taken in again) with its first part', async () => {
    const { journal, store } = aJournal({ persistAfterMs: 10_000 });
    const first = journal.admit(P, aPart('m1'), [aRequest('a')]);
    const again = journal.admit(P, aPart('m1'), [aRequest('a')]);
    await journal.remove(['a']);
    await expect(first).resolves.toBeUndefined();
    await expect(again).resolves.toBeUndefined();
    expect(store.size).toBe(0);
  });
});

describe('the delivery journal under the scheduler, across a second read of a partition', () => {
  /** A delivery store whose deletions land when the test says. */
  class SlowDeletions extends InMemoryDeliveryStore {
    readonly #landings: (() => void)[] = [];

    get deleting(): number {
      return this.#landings.length;
    }

    land(): void {
      for (const go of this.#landings.splice(0)) go();
    }

    override async remove(ids: readonly string[]): Promise<void> {
      await new Promise<void>((resolve) => this.#landings.push(resolve));
      await super.remove(ids);
    }
  }

  it('tracks nothing of a request whose deletion was under way when the partition was read again', async () => {
    const store = new SlowDeletions();
    const { journal } = aJournal({ store });
    const request = aRequest('a');
    // Wired as worker-delivery.ts wires them: the scheduler deletes what is done through the journal.
    const scheduler = new DeliveryScheduler({
      store: journal,
      gate: { sendable: () => true },
      sender: { send: async () => Promise.resolve({ kind: 'response', status: 200, body: '{"rejected":[]}' }) },
      pushers: {
        listPushers: async () => Promise.resolve([aPusherOf(request)]),
        listPushersOfUsers: async (users) => Promise.resolve(new Map(users.map((u) => [u, [aPusherOf(request)]]))),
      },
      remover: { removeRejected: async () => Promise.resolve() },
      retry: { baseMs: 1000, maxMs: 60_000, giveUpAfterMs: 3_600_000 },
      backlog: { maxPending: 20 },
      age: { maxAgeMs: 3_600_000 },
      breaker: DEFAULT_BREAKER_POLICY,
      logger: createLogger('silent'),
    });
    // The partition taken over: what the store lists goes to the journal, then to the scheduler (partition-take.ts).
    await store.acceptAll([], [request]);
    const read = async () => {
      const pending = await store.listPartition(P);
      journal.stored(pending);
      scheduler.hold(pending);
    };
    await read();
    // Sent and done: its deletion is on its way, not landed, when the partition is read once more.
    await eventually(() => {
      expect(store.deleting).toBe(1);
    });
    await read();
    store.land();
    await eventually(() => {
      expect(store.size).toBe(0);
    });
    await scheduler.close();
    expect(store.size).toBe(0);
    expect(scheduler.pending).toBe(0);
    expect(journal.tracking(P)).toBe(0);
  });
});

function aPusherOf(request: PendingDelivery): StoredPusher {
  const device = request.devices[0];
  return {
    user_id: request.userId,
    kind: 'http',
    app_id: device?.appId ?? '',
    pushkey: device?.pushkey ?? '',
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: request.url },
    enabled: true,
  };
}
