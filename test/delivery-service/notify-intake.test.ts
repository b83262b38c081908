import { afterEach, describe, expect, it } from 'vitest';
import { DeliveryJournal } from '../../src/delivery-service/delivery-journal.js';
import type { NotifyRequestBody } from '../../src/contract/ops.js';
import { IntakeStoppedError, NotifyIntake } from '../../src/delivery-service/notify-intake.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import type { DeliveryStore, PendingDelivery } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { planIntake } from '../../src/delivery/intake-plan.js';
import type { DeliveryPusher } from '../../src/delivery/device-batches.js';
import { StoreFailedError, StoreUnavailableError } from '../../src/store/push-store.js';
import { bodyText } from '../../src/delivery/request-body.js';
import { aStoredPusher } from '../support/notify-builders.js';

const SILENT = createLogger('silent');

const aPusher = (userId: string): StoredPusher => aStoredPusher(userId, { ts: 1_700_000_000_000 });

/** `aPusher` as the plan takes it. */
function toPlanPusher(userId: string): DeliveryPusher {
  const { user_id, kind, app_id, pushkey, data, enabled } = aPusher(userId);
  return { user_id, kind, app_id, pushkey, data, enabled, pushkeyTsMs: 1_700_000_000_000 };
}

const aNotify = (event: string, users: readonly string[]): NotifyRequestBody => ({
  op: 'notify',
  notification: { event_id: event, room_id: '!r:example.org' },
  recipients: users.map((user_id) => ({ user_id })),
});

/** A store that forwards to `inner` except for the given methods: how a test makes one fail. */
function wrapped(inner: InMemoryDeliveryStore, overrides: Partial<IntakeStore>): IntakeStore {
  return {
    findProgress: async (id) => inner.findProgress(id),
    markDone: async (done) => inner.markDone(done),
    acceptAll: async (notifies, deliveries) => inner.acceptAll(notifies, deliveries),
    remove: async (ids) => inner.remove(ids),
    saveRetry: async (id, retry) => inner.saveRetry(id, retry),
    ...overrides,
  };
}

type IntakeStore = Pick<DeliveryStore, 'findProgress' | 'markDone' | 'acceptAll' | 'remove' | 'saveRetry'>;
const P = 5;

/** An intake on an in-memory store; `pushersDelay` delays each user's pushers (to let a later message overtake). */
function anIntake(
  options: {
    readonly store?: IntakeStore;
    readonly pushersDelayMs?: (users: readonly string[]) => number;
    /** Whether the partition's lease holds: the coordinator's gate. */
    readonly takesIn?: () => boolean;
  } = {},
) {
  const store: IntakeStore = options.store ?? new InMemoryDeliveryStore();
  const held: PendingDelivery[] = [];
  const stop = new AbortController();
  // Nothing is ever sent here: every part is secured by storing its requests, a few milliseconds after intake.
  const journal = new DeliveryJournal({ store, writable: () => true, persistAfterMs: 5, logger: SILENT });
  journal.start();
  journals.push(journal);
  const intake = new NotifyIntake({
    store,
    journal,
    pushers: {
      listPushers: async (userId) => Promise.resolve([aPusher(userId)]),
      listPushersOfUsers: async (userIds) => {
        await new Promise((resolve) => setTimeout(resolve, options.pushersDelayMs?.(userIds) ?? 0));
        return new Map(userIds.map((userId) => [userId, [aPusher(userId)]]));
      },
    },
    holder: {
      hold: (deliveries) => {
        held.push(...deliveries);
      },
    },
    gate: { takesIn: options.takesIn ?? (() => true) },
    backoff: { baseMs: 1, maxMs: 2 },
    signal: stop.signal,
    logger: SILENT,
  });
  intake.open(P, 0);
  return { store, intake, held, stop };
}

const journals: DeliveryJournal[] = [];
afterEach(() => {
  for (const journal of journals.splice(0)) journal.close();
});

describe('the intake of notify messages', () => {
  it('stores and hands over one request per device, and answers the counts', async () => {
    const { intake, held } = anIntake();
    expect(await intake.accept(aNotify('$1', ['@a:x.org', '@b:x.org']), 'm1', P)).toEqual({
      recipients: 2,
      devices: 2,
      replayed: false,
    });
    expect(held.map((d) => d.id)).toEqual([
      expect.stringMatching(/^m1\//) as string,
      expect.stringMatching(/^m1\//) as string,
    ]);
    expect(new Set(held.map((d) => d.id)).size).toBe(2);
    expect(held.every((d) => d.partition === P)).toBe(true);
    const body = JSON.parse(held[0] === undefined ? '{}' : bodyText(held[0].body)) as {
      notification: { devices: { pushkey_ts: number }[] };
    };
    // The pusher's time, in seconds.
    expect(body.notification.devices[0]?.pushkey_ts).toBe(1_700_000_000);
  });

  it('answers a messageId taken in before from its record and stores nothing again', async () => {
    const { intake, held } = anIntake();
    await intake.accept(aNotify('$1', ['@a:x.org']), 'm1', P);
    expect(await intake.accept(aNotify('$1', ['@a:x.org']), 'm1', P)).toEqual({
      recipients: 1,
      devices: 1,
      replayed: true,
    });
    expect(held).toHaveLength(1);
  });

  it('stores messages in the order they were taken in, even when a later one is planned first', async () => {
    // The first message's pushers take longer to read.
    const { intake, held } = anIntake({ pushersDelayMs: (users) => (users.includes('@slow:x.org') ? 30 : 0) });
    await Promise.all([
      intake.accept(aNotify('$1', ['@a:x.org', '@slow:x.org']), 'm1', P),
      intake.accept(aNotify('$2', ['@a:x.org']), 'm2', P),
    ]);
    const forA = held.filter((d) => d.userId === '@a:x.org');
    expect(forA.map((d) => d.id.split('/')[0])).toEqual(['m1', 'm2']);
    expect((forA[0]?.seq ?? 0) < (forA[1]?.seq ?? 0)).toBe(true);
  });

  it('retries while the store is unavailable, with the same IDs (nothing stored twice)', async () => {
    const store = new InMemoryDeliveryStore();
    let failures = 2;
    const flaky = wrapped(store, {
      acceptAll: async (notifies, deliveries) => {
        if (failures > 0) {
          failures -= 1;
          // Half of it went through before the store stopped answering.
          await store.acceptAll([], deliveries.slice(0, 1));
          throw new StoreUnavailableError('stalled');
        }
        return store.acceptAll(notifies, deliveries);
      },
    });
    const { intake, held } = anIntake({ store: flaky });
    expect(await intake.accept(aNotify('$1', ['@a:x.org', '@b:x.org']), undefined, P)).toMatchObject({ devices: 2 });
    expect(new Set(held.map((d) => d.id)).size).toBe(2);
    expect(await store.listPartition(P)).toHaveLength(2);
  });

  it('gives up at once on a failure that retrying would not change, and the next message is still taken', async () => {
    const store = new InMemoryDeliveryStore();
    let fail = true;
    const broken = wrapped(store, {
      findProgress: async (id) => {
        if (fail) {
          fail = false;
          throw new StoreFailedError('a bug of the store');
        }
        return store.findProgress(id);
      },
    });
    const { intake } = anIntake({ store: broken });
    const first = intake.accept(aNotify('$1', ['@a:x.org']), 'm1', P);
    const second = intake.accept(aNotify('$2', ['@a:x.org']), 'm2', P);
    await expect(first).rejects.toBeInstanceOf(StoreFailedError);
    await expect(second).resolves.toMatchObject({ devices: 1 });
  });

  it('stops waiting for the store at shutdown: the message goes back to the queue', async () => {
    const down = wrapped(new InMemoryDeliveryStore(), {
      findProgress: async () => Promise.reject(new StoreUnavailableError('down')),
    });
    const { intake, stop } = anIntake({ store: down });
    const accepted = intake.accept(aNotify('$1', ['@a:x.org']), 'm1', P);
    setTimeout(() => {
      stop.abort();
    }, 20);
    await expect(accepted).rejects.toBeInstanceOf(IntakeStoppedError);
  });

  it('gives every later message of the partition back too when one gives up, so they return to the queue in order', async () => {
    // The store takes every message but the first: the first waits, retried, until the shutdown.
    const store = wrapped(new InMemoryDeliveryStore(), {
      findProgress: async (id) =>
        id === 'm1' ? Promise.reject(new StoreUnavailableError('down')) : Promise.resolve({ done: new Set<string>() }),
    });
    const { intake, stop, held } = anIntake({ store });
    const first = intake.accept(aNotify('$1', ['@a:x.org']), 'm1', P);
    const second = intake.accept(aNotify('$2', ['@a:x.org']), 'm2', P);
    await new Promise((resolve) => setTimeout(resolve, 20));
    stop.abort();
    await expect(first).rejects.toBeInstanceOf(IntakeStoppedError);
    await expect(second).rejects.toBeInstanceOf(IntakeStoppedError);
    expect(held).toEqual([]);
  });

  it('does not send again what a worker that died had delivered of a part it takes in again', async () => {
    const store = new InMemoryDeliveryStore();
    const first = anIntake({ store });
    const users = ['@a:x.org', '@b:x.org', '@c:x.org'];
    // The first worker planned the part; it delivered b's request, noted it, and died before securing the part.
    const planned = planIntake(aNotify('$1', users), (userId) => [toPlanPusher(userId)], {
      notifyId: 'm1',
      partition: P,
      seq: 1,
      acceptedAt: Date.now(),
    }).deliveries;
    const bs = planned.filter((d) => d.userId === '@b:x.org').map((d) => d.id);
    await store.markDone(new Map([['m1', bs]]));
    expect(await first.intake.accept(aNotify('$1', users), 'm1', P)).toMatchObject({ recipients: 3, devices: 3 });
    expect(first.held.map((d) => d.userId).sort()).toEqual(['@a:x.org', '@c:x.org']);
  });

  it('waits while the partition’s lease is in doubt, stores once it holds again, and gives up when drained', async () => {
    const store = new InMemoryDeliveryStore();
    let holds = false;
    const { intake } = anIntake({ store, takesIn: () => holds });
    const first = intake.accept(aNotify('$1', ['@a:x.org']), 'm1', P);
    await new Promise((resolve) => setTimeout(resolve, 150));
    // Nothing written while the lease is in doubt: another worker may have read the partition already.
    expect(await store.listPartition(P)).toHaveLength(0);
    holds = true;
    await expect(first).resolves.toMatchObject({ devices: 1 });
    expect(await store.listPartition(P)).toHaveLength(1);
    holds = false;
    const second = intake.accept(aNotify('$2', ['@a:x.org']), 'm2', P);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await intake.drain(P);
    await expect(second).rejects.toBeInstanceOf(IntakeStoppedError);
    expect(await store.listPartition(P)).toHaveLength(1);
  });

  it('returns to the queue at a handover what the flush could not store (the store down): the queue is let go', async () => {
    const store = wrapped(new InMemoryDeliveryStore(), {
      acceptAll: async () => Promise.reject(new StoreUnavailableError('the store does not answer')),
    });
    const { intake } = anIntake({ store });
    const outcome = intake.accept(aNotify('$1', ['@a:x.org']), 'm1', P).then(
      () => 'acknowledged',
      (error: unknown) => (error instanceof IntakeStoppedError ? 'returned to the queue' : 'dead-lettered'),
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    // A clean handover (keep): the partition queue's consumer is closed once every part taken in is settled, and
    // the lease released after. A part left waiting here would hold the queue, and the lease, for good.
    await intake.drain(P, true);
    const settled = await Promise.race([outcome, new Promise((resolve) => setTimeout(resolve, 200, 'still waiting'))]);
    expect(settled).toBe('returned to the queue');
  });

  it('refuses a partition it does not hold, and one being drained; orders a new holder after what is stored', async () => {
    const { intake, held } = anIntake();
    await expect(intake.accept(aNotify('$1', ['@a:x.org']), 'm1', P + 1)).rejects.toBeInstanceOf(IntakeStoppedError);
    // Another worker stored requests of this partition on a clock ahead of this one's.
    const highest = Date.now() * 1000 + 5_000_000;
    intake.open(P + 1, highest);
    await intake.accept(aNotify('$1', ['@a:x.org']), 'm1', P + 1);
    expect(held[0]?.seq).toBeGreaterThan(highest);
    const draining = intake.drain(P + 1);
    await expect(intake.accept(aNotify('$2', ['@a:x.org']), 'm2', P + 1)).rejects.toBeInstanceOf(IntakeStoppedError);
    await draining;
  });
});
