import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { deviceQueueKey } from '../../src/delivery/delivery-key.js';
import type { GatewayExchange } from '../../src/delivery/response-outcome.js';
import { DeliveryJournal } from '../../src/delivery-service/delivery-journal.js';
import { DeliveryScheduler } from '../../src/delivery-service/delivery-scheduler.js';
import { takePartition, type Lapsed } from '../../src/delivery-service/partition-take.js';
import { createLogger } from '../../src/logging/logger.js';
import type { PendingDelivery } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import { HOLDER_SCHEDULER_SETTINGS } from '../support/partition-holder-world.js';

/**
 * A partition taken over from a lapsed lease is read, then read once more a
 * write grace later (partition-take.ts). On a loaded store that second read
 * (a page at a time) can end after the new holder has sent what it lists and
 * deleted it: the read is stale by then, and what it lists that was done with
 * meanwhile must not be held, and sent, again. Seen in CI's store-cut fault
 * test: a device got its first notification three times.
 */
const ALICE = '@alice:example.org';
const URL = 'https://push.example.org/_matrix/push/v1/notify';
const OK: GatewayExchange = { kind: 'response', status: 200, body: '{"rejected":[]}' };
const SILENT = createLogger('silent');
const ALICES_PUSHER: StoredPusher = {
  user_id: ALICE,
  kind: 'http',
  app_id: 'org.example.app',
  pushkey: 'alice-phone',
  app_display_name: 'App',
  device_display_name: 'Phone',
  lang: 'en',
  data: { url: URL },
  enabled: true,
};

function aStoredRequest(n: number): PendingDelivery {
  return {
    id: `notify-${String(n)}/alice`,
    partition: 0,
    key: deviceQueueKey(ALICE, URL, undefined),
    seq: n,
    userId: ALICE,
    url: URL,
    body: JSON.stringify({ notification: { event_id: `$${String(n)}`, devices: [] } }),
    devices: [{ appId: 'org.example.app', pushkey: 'alice-phone' }],
    acceptedAt: Date.now(),
  };
}

/** A gateway that answers only when told, and records the events it was sent. */
function aHeldGateway() {
  const events: string[] = [];
  const waiting: (() => void)[] = [];
  let holding = true;
  return {
    events,
    release() {
      holding = false;
      for (const answer of waiting.splice(0)) answer();
    },
    sender: {
      send: async (_url: string, body: string): Promise<GatewayExchange> => {
        events.push((JSON.parse(body) as { notification: { event_id: string } }).notification.event_id);
        if (holding) await new Promise<void>((resolve) => waiting.push(resolve));
        return OK;
      },
    },
  };
}

const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** The new holder as worker-delivery.ts wires it (journal as the scheduler's store), with reads the test ends. */
function aNewHolder(store: InMemoryDeliveryStore) {
  const gateway = aHeldGateway();
  const journal = new DeliveryJournal({ store, writable: () => true, persistAfterMs: 60_000, logger: SILENT });
  const scheduler = new DeliveryScheduler({
    store: journal,
    gate: { sendable: () => true },
    sender: gateway.sender,
    // Requests read from the store are checked against the user's pushers before they are sent: Alice's is there.
    pushers: {
      listPushers: async () => Promise.resolve([ALICES_PUSHER]),
      listPushersOfUsers: async (users) => Promise.resolve(new Map(users.map((u) => [u, [ALICES_PUSHER]]))),
    },
    ...HOLDER_SCHEDULER_SETTINGS,
  });
  closers.push(async () => {
    await scheduler.close();
    journal.close();
  });
  /** Each read lists the store as it is when the read starts, and returns when `endRead` is called. */
  const reads: { started: number; end: (() => void) | undefined } = { started: 0, end: undefined };
  const take = async (lapsed: Lapsed, writeGraceMs: number) =>
    takePartition(
      {
        me: 'new-holder',
        deliveries: {
          listPartition: async (partition) => {
            reads.started += 1;
            const snapshot = await store.listPartition(partition);
            if (reads.started > 1) await new Promise<void>((resolve) => (reads.end = resolve));
            return snapshot;
          },
        },
        intake: { open: () => undefined },
        journal,
        scheduler,
        consumer: { subscribe: async () => Promise.resolve() },
        writeGraceMs,
        logger: SILENT,
      },
      0,
      lapsed,
      { holds: () => true, loaded: () => undefined, failed: () => undefined },
    );
  return { gateway, journal, reads, take };
}

async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

describe('a partition read again after a takeover', () => {
  it('does not send again what it lists that was sent and deleted while the read was under way', async () => {
    const store = new InMemoryDeliveryStore();
    await store.accept({ id: 'part', recipients: 1, devices: 2, acceptedAt: Date.now() }, [
      aStoredRequest(1),
      aStoredRequest(2),
    ]);
    const holder = aNewHolder(store);

    await holder.take('another', 20);
    // The first read is held and sending; the second read has listed both requests and not returned yet.
    await until(() => holder.reads.started === 2, 'the second read');
    holder.gateway.release();
    await until(() => holder.gateway.events.length === 2, 'both sent');
    await until(() => store.size === 0, 'both deleted');
    holder.reads.end?.();
    await sleep(50);

    expect(holder.gateway.events).toEqual(['$1', '$2']);
    expect(holder.journal.tracking(0)).toBe(0);
  });
});
