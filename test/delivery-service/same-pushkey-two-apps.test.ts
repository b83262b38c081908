import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_BREAKER_POLICY } from '../../src/delivery/circuit-breaker.js';
import type { DeliveryPusher } from '../../src/delivery/device-batches.js';
import { planIntake } from '../../src/delivery/intake-plan.js';
import type { GatewayExchange } from '../../src/delivery/response-outcome.js';
import { DeliveryScheduler } from '../../src/delivery-service/delivery-scheduler.js';
import { createLogger } from '../../src/logging/logger.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { eventually } from '../support/eventually.js';
import { aDeliveryPusher, aNotification, aRecipient } from '../support/notify-builders.js';

const OK: GatewayExchange = { kind: 'response', status: 200, body: '{"rejected":[]}' };
const STAMP = { notifyId: 'n1', partition: 0, seq: 1, acceptedAt: Date.now() };

/** One request of a message, as the gateway got it: the app IDs it names. */
type Sent = readonly string[];

function aScheduler(sent: Sent[]): DeliveryScheduler {
  return new DeliveryScheduler({
    store: new InMemoryDeliveryStore(),
    gate: { sendable: () => true },
    sender: {
      send: async (_url: string, body: string) => {
        const parsed = JSON.parse(body) as { notification: { devices: { app_id: string }[] } };
        sent.push(parsed.notification.devices.map((device) => device.app_id));
        return Promise.resolve(OK);
      },
    },
    pushers: {
      listPushers: async () => Promise.resolve([]),
      listPushersOfUsers: async () => Promise.resolve(new Map()),
    },
    remover: { removeRejected: async () => Promise.resolve() },
    retry: { baseMs: 1000, maxMs: 3_600_000, giveUpAfterMs: 86_400_000 },
    backlog: { maxPending: 20 },
    age: { maxAgeMs: 86_400_000 },
    breaker: DEFAULT_BREAKER_POLICY,
    logger: createLogger('silent'),
  });
}

const schedulers: DeliveryScheduler[] = [];
afterEach(async () => {
  for (const scheduler of schedulers.splice(0)) await scheduler.close();
});

describe('one pushkey under two app IDs on one gateway URL', () => {
  const pushers: DeliveryPusher[] = [
    aDeliveryPusher({ app_id: 'app.a', pushkey: 'k1' }),
    aDeliveryPusher({ app_id: 'app.b', pushkey: 'k1' }),
  ];
  const request = { op: 'notify' as const, notification: aNotification(), recipients: [aRecipient()] };

  it('plans two requests with distinct IDs, the same for the same input', () => {
    const plan = planIntake(request, () => pushers, STAMP);
    const ids = plan.deliveries.map((delivery) => delivery.id);
    expect(ids).toHaveLength(2);
    expect(new Set(ids).size).toBe(2);
    // Redelivery dedup relies on it: the same message planned again names its requests the same.
    expect(planIntake(request, () => pushers, STAMP).deliveries.map((delivery) => delivery.id)).toEqual(ids);
  });

  it('sends each app its request', async () => {
    const sent: Sent[] = [];
    const scheduler = aScheduler(sent);
    schedulers.push(scheduler);
    const plan = planIntake(request, () => pushers, STAMP);
    scheduler.hold(plan.deliveries, STAMP.acceptedAt);
    await eventually(() => {
      expect(sent).toEqual([['app.a'], ['app.b']]);
    }, 2_000);
  });
});
