import { DEFAULT_BREAKER_POLICY } from '../../src/delivery/circuit-breaker.js';
import type { GatewayExchange } from '../../src/delivery/response-outcome.js';
import { DeliveryJournal } from '../../src/delivery-service/delivery-journal.js';
import { DeliveryScheduler } from '../../src/delivery-service/delivery-scheduler.js';
import { NotifyIntake } from '../../src/delivery-service/notify-intake.js';
import { takePartition } from '../../src/delivery-service/partition-take.js';
import { createLogger } from '../../src/logging/logger.js';
import type { DeliveryStore } from '../../src/store/delivery-store.js';
import type { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { aStoredPusher } from './notify-builders.js';

/**
 * One partition's holder wired as worker-delivery.ts wires it (the journal
 * as the scheduler's store, the intake handing to both), over a store port
 * whose slow round trips a test holds and releases: for the interleavings
 * of a part taken in again with its progress, marks and deletions.
 */
const SILENT = createLogger('silent');
const OK: GatewayExchange = { kind: 'response', status: 200, body: '{"rejected":[]}' };

/** Every recipient has one pusher, a phone (`<user ID>-phone`). */
const PUSHERS = {
  listPushers: async (userId: string) => Promise.resolve([aStoredPusher(userId)]),
  listPushersOfUsers: async (users: readonly string[]) =>
    Promise.resolve(new Map(users.map((user) => [user, [aStoredPusher(user)]]))),
};

/** A holder's scheduler settings, bar its store, gate, sender and pushers: nothing retried, given up or dropped in a test. */
export const HOLDER_SCHEDULER_SETTINGS = {
  remover: { removeRejected: async () => Promise.resolve() },
  retry: { baseMs: 1000, maxMs: 60_000, giveUpAfterMs: 86_400_000 },
  backlog: { maxPending: 20 },
  age: { maxAgeMs: 86_400_000 },
  breaker: DEFAULT_BREAKER_POLICY,
  logger: SILENT,
} as const;

export type HolderPort = Pick<
  DeliveryStore,
  'findProgress' | 'markDone' | 'acceptAll' | 'remove' | 'saveRetry' | 'listPartition'
>;

/** The store's round trips a test can hold: the progress read, the marks' writes, the deletions. */
export type HeldTrip = 'progress' | 'marks' | 'remove';

/** A store port over `inner` whose held round trips wait until released (a loaded store). */
export function aSlowablePort(inner: InMemoryDeliveryStore) {
  const held: Record<HeldTrip, boolean> = { progress: false, marks: false, remove: false };
  const waiting: (() => void)[] = [];
  const gate = async (which: HeldTrip) => {
    while (held[which]) await new Promise<void>((resolve) => waiting.push(resolve));
  };
  const port: HolderPort = {
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
    remove: async (ids) => {
      await gate('remove');
      await inner.remove(ids);
    },
    saveRetry: async (id, retry) => inner.saveRetry(id, retry),
    listPartition: async (partition) => inner.listPartition(partition),
  };
  return {
    port,
    hold(which: HeldTrip) {
      held[which] = true;
    },
    release(which: HeldTrip) {
      held[which] = false;
      for (const resume of waiting.splice(0)) resume();
    },
  };
}

/**
 * A holder of partition `partition` over `port`; what it sends is listed as
 * `<pushkey> <event ID>`. `close` goes to the test's `afterEach`.
 */
export function aPartitionHolder(port: HolderPort, partition: number) {
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
    ...HOLDER_SCHEDULER_SETTINGS,
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
  const parts = {
    me: 'holder',
    deliveries: port,
    intake,
    journal,
    scheduler,
    consumer: { subscribe: async () => Promise.resolve() },
    writeGraceMs: 0,
    logger: SILENT,
  };
  return {
    sent,
    journal,
    intake,
    /** Claims the partition, as a free one or (`lapsed`) one whose lease ran out. */
    take: async (lapsed?: 'mine' | 'another') =>
      takePartition(parts, partition, lapsed, {
        holds: () => true,
        loaded: () => undefined,
        failed: () => undefined,
      }),
    /**
     * Its lease ran out unrenewed (partition-coordinator.ts, not released):
     * the intake drained without writing, the sends let go, the journal's
     * tracking of the partition dropped.
     */
    lapse: async () => {
      await intake.drain(partition, false);
      await scheduler.releasePartition(partition, 0, false);
      journal.released(partition);
    },
    /** The gateway answers only once released. */
    holdGateway: () => (gateway.held = true),
    releaseGateway: () => {
      gateway.held = false;
      for (const answer of gateway.waiting.splice(0)) answer();
    },
    close: async () => {
      stop.abort();
      await scheduler.close();
      journal.close();
    },
  };
}
