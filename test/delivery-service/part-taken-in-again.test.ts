import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { NotifyRequestBody } from '../../src/contract/ops.js';
import { DEFAULT_BREAKER_POLICY } from '../../src/delivery/circuit-breaker.js';
import { deliveryPusherOf } from '../../src/delivery/delivery-pusher-of.js';
import { planIntake } from '../../src/delivery/intake-plan.js';
import type { GatewayExchange } from '../../src/delivery/response-outcome.js';
import { DeliveryJournal } from '../../src/delivery-service/delivery-journal.js';
import { DeliveryScheduler } from '../../src/delivery-service/delivery-scheduler.js';
import { NotifyIntake } from '../../src/delivery-service/notify-intake.js';
import { takePartition } from '../../src/delivery-service/partition-take.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import type { DeliveryStore } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { aStoredPusher } from '../support/notify-builders.js';

/**
 * A worker cut from MongoDB stored a part's requests (they had waited
 * `persistAfterMs`), but not the part's record: the part stays
 * unacknowledged and goes back to the queue. The next holder reads the
 * stored requests, sends them, deletes them, and then takes the part in
 * again from the queue. Planned again, the part has the same request IDs,
 * and what the new holder sent of them must not be sent a second time (the
 * old holder may have sent it once already). Seen in CI's store-cut fault
 * test: a device got `$event1, $event2, $event1, $event3…` from the new
 * holder, so `$event1` three times in all.
 */
const P = 3;
const SILENT = createLogger('silent');
const USERS = ['@alice:example.org', '@bob:example.org'];
const OK: GatewayExchange = { kind: 'response', status: 200, body: '{"rejected":[]}' };

const aPusher = (userId: string): StoredPusher => aStoredPusher(userId);

const PUSHERS = {
  listPushers: async (userId: string) => Promise.resolve([aPusher(userId)]),
  listPushersOfUsers: async (users: readonly string[]) =>
    Promise.resolve(new Map(users.map((user) => [user, [aPusher(user)]]))),
};

const PART: NotifyRequestBody = {
  op: 'notify',
  notification: { event_id: '$event1', room_id: '!r:example.org' },
  recipients: USERS.map((user_id) => ({ user_id })),
};

/** The part's requests as the old holder planned and stored them, without the part's record. */
async function storedByTheOldHolder(store: InMemoryDeliveryStore): Promise<void> {
  const plan = planIntake(PART, (userId) => [aPusher(userId)].map(deliveryPusherOf), {
    notifyId: 'm1',
    partition: P,
    seq: 1,
    acceptedAt: Date.now(),
  });
  await store.acceptAll([], plan.deliveries);
}

type Port = Pick<DeliveryStore, 'findProgress' | 'markDone' | 'acceptAll' | 'remove' | 'saveRetry' | 'listPartition'>;

/** A store port whose `findProgress` and `markDone` wait while held (a loaded store's slow round trips). */
function aSlowablePort(inner: InMemoryDeliveryStore) {
  const held = { progress: false, marks: false };
  const waiting: (() => void)[] = [];
  const gate = async (which: keyof typeof held) => {
    while (held[which]) await new Promise<void>((resolve) => waiting.push(resolve));
  };
  const port: Port = {
    findProgress: async (id) => {
      const read = await inner.findProgress(id);
      await gate('progress');
      return read;
    },
    markDone: async (done) => {
      await gate('marks');
      await inner.markDone(done);
    },
    acceptAll: async (notifies, deliveries) => inner.acceptAll(notifies, deliveries),
    remove: async (ids) => inner.remove(ids),
    saveRetry: async (id, retry) => inner.saveRetry(id, retry),
    listPartition: async (partition) => inner.listPartition(partition),
  };
  return {
    port,
    hold(which: keyof typeof held) {
      held[which] = true;
    },
    release(which: keyof typeof held) {
      held[which] = false;
      for (const resume of waiting.splice(0)) resume();
    },
  };
}

const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** The new holder as worker-delivery.ts wires it: journal as the scheduler's store, the intake handing to both. */
function aNewHolder(port: Port) {
  const sent: string[] = [];
  const gateway = { held: false, waiting: [] as (() => void)[] };
  const journal = new DeliveryJournal({ store: port, writable: () => true, persistAfterMs: 60_000, logger: SILENT });
  const scheduler = new DeliveryScheduler({
    store: journal,
    gate: { sendable: () => true },
    sender: {
      send: async (_url: string, body: string) => {
        const { notification } = JSON.parse(body) as {
          notification: { event_id: string; devices: { pushkey: string }[] };
        };
        for (const device of notification.devices) sent.push(`${device.pushkey} ${notification.event_id}`);
        if (gateway.held) await new Promise<void>((resolve) => gateway.waiting.push(resolve));
        return OK;
      },
    },
    pushers: PUSHERS,
    remover: { removeRejected: async () => Promise.resolve() },
    retry: { baseMs: 1000, maxMs: 60_000, giveUpAfterMs: 86_400_000 },
    backlog: { maxPending: 20 },
    age: { maxAgeMs: 86_400_000 },
    breaker: DEFAULT_BREAKER_POLICY,
    logger: SILENT,
  });
  const stop = new AbortController();
  const intake = new NotifyIntake({
    store: port,
    journal,
    pushers: PUSHERS,
    holder: scheduler,
    gate: { takesIn: () => true },
    backoff: { baseMs: 1, maxMs: 2 },
    signal: stop.signal,
    logger: SILENT,
  });
  closers.push(async () => {
    stop.abort();
    await scheduler.close();
    journal.close();
  });
  const take = async () =>
    takePartition(
      {
        me: 'new-holder',
        deliveries: port,
        intake,
        journal,
        scheduler,
        consumer: { subscribe: async () => Promise.resolve() },
        writeGraceMs: 0,
        logger: SILENT,
      },
      P,
      undefined,
      { holds: () => true, loaded: () => undefined, failed: () => undefined },
    );
  /** The gateway answers only once released. */
  const holdGateway = () => (gateway.held = true);
  const releaseGateway = () => {
    gateway.held = false;
    for (const answer of gateway.waiting.splice(0)) answer();
  };
  return { sent, journal, intake, take, holdGateway, releaseGateway };
}

async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

const ONCE_EACH = ['@alice:example.org-phone $event1', '@bob:example.org-phone $event1'];

describe('a part taken in again after its stored requests were sent by the new holder', () => {
  it('does not send them again once their progress is in the store', async () => {
    const store = new InMemoryDeliveryStore();
    await storedByTheOldHolder(store);
    const holder = aNewHolder(aSlowablePort(store).port);

    await holder.take();
    await until(() => holder.sent.length === 2 && store.size === 0, 'both sent and deleted');
    // The progress flush (every 50 ms) has landed.
    await sleep(120);
    expect(await holder.intake.accept(PART, 'm1', P)).toEqual({ recipients: 2, devices: 2, replayed: false });
    await sleep(50);

    expect([...holder.sent].sort()).toEqual(ONCE_EACH);
    expect(holder.journal.tracking()).toBe(0);
  });

  it('does not send them again while their progress is still on its way to the store', async () => {
    const store = new InMemoryDeliveryStore();
    await storedByTheOldHolder(store);
    const slow = aSlowablePort(store);
    slow.hold('marks');
    const holder = aNewHolder(slow.port);

    await holder.take();
    await until(() => holder.sent.length === 2 && store.size === 0, 'both sent and deleted');
    await sleep(120);
    await holder.intake.accept(PART, 'm1', P);
    await sleep(50);
    slow.release('marks');

    expect([...holder.sent].sort()).toEqual(ONCE_EACH);
  });

  it('does not send them again when they finish while the part’s progress is being read', async () => {
    const store = new InMemoryDeliveryStore();
    await storedByTheOldHolder(store);
    const slow = aSlowablePort(store);
    slow.hold('progress');
    const holder = aNewHolder(slow.port);
    holder.holdGateway();

    await holder.take();
    await until(() => holder.sent.length === 2, 'both sent, unanswered');
    // The part's progress is read (and held) while both are in flight: the read cannot list them.
    slow.hold('progress');
    const again = holder.intake.accept(PART, 'm1', P);
    await sleep(20);
    holder.releaseGateway();
    await until(() => store.size === 0, 'both deleted');
    await sleep(120);
    slow.release('progress');
    await again;
    await sleep(50);

    expect([...holder.sent].sort()).toEqual(ONCE_EACH);
  });
});
