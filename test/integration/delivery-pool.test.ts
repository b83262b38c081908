import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NotifyRecipient } from '../../src/client/push-rules-client.js';
import { partitionOf } from '../../src/delivery/partitions.js';
import { eventually as eventuallyWithin } from '../support/eventually.js';
import type { RecordedRequest } from '../support/gateway-double-records.js';
import { PushGatewayDouble } from '../support/push-gateway-double.js';
import { startDeliveringWorker, type DeliveringWorker } from './support/delivery-harness.js';

const APP = 'org.example.app';
const WAIT_MS = 60_000;
const PARTITIONS = 8;

const eventually = async (check: () => void | Promise<void>) => eventuallyWithin(check, WAIT_MS);

const users = (count: number) => Array.from({ length: count }, (_, n) => `@pool${n}:example.org`);
const pushkeyOf = (userId: string) => `${userId}-phone`;

/** Per device, every event it was sent with a 200, in arrival order: duplicates kept, so a resend shows. */
function eventsByDevice(requests: readonly RecordedRequest[]): Map<string, string[]> {
  const byDevice = new Map<string, string[]>();
  for (const request of requests) {
    if (request.answer !== 200) continue;
    const event = (request.body as { notification: { event_id: string } }).notification.event_id;
    for (const pushkey of request.pushkeys) byDevice.set(pushkey, [...(byDevice.get(pushkey) ?? []), event]);
  }
  return byDevice;
}

/** The worker that last took each partition, from the workers' own log lines. */
function partitionHolders(logs: readonly string[]): Map<number, string> {
  const holders = new Map<number, string>();
  for (const line of logs) {
    const entry = JSON.parse(line) as { msg?: string; partition?: number; worker?: string };
    if (entry.msg === 'delivering a partition' && entry.partition !== undefined && entry.worker !== undefined)
      holders.set(entry.partition, entry.worker);
  }
  return holders;
}

describe('delivery across a pool of workers', () => {
  let gateway: PushGatewayDouble;
  let h: DeliveringWorker;

  beforeAll(async () => {
    gateway = await PushGatewayDouble.start();
  });

  afterAll(async () => {
    await gateway.close();
  });

  afterEach(async () => {
    await h.close();
    gateway.restore();
    gateway.clearRequests();
  });

  async function withPushers(userIds: readonly string[]): Promise<void> {
    for (const userId of userIds)
      await h.client.setPusher(userId, {
        kind: 'http',
        app_id: APP,
        pushkey: pushkeyOf(userId),
        app_display_name: 'App',
        device_display_name: 'Phone',
        lang: 'en',
        data: { url: gateway.notifyUrl },
      });
  }

  const recipients = (userIds: readonly string[]): NotifyRecipient[] =>
    userIds.map((user_id) => ({ user_id, counts: { unread: 1 } }));

  it('shares the partitions out among three workers, each delivering its users’, every device once', async () => {
    h = await startDeliveringWorker({ delivery: { partitions: PARTITIONS } });
    await h.startAnother();
    await h.startAnother();
    const audience = users(300);
    await withPushers(audience);
    // Three workers agree on the shares within a round or two (a third of the 3 s lease each).
    await eventually(() => {
      const holders = partitionHolders(h.logs);
      expect(holders.size).toBe(PARTITIONS);
      expect(new Set(holders.values()).size).toBe(3);
    });
    await eventually(() => {
      const holders = partitionHolders(h.logs);
      const shares = new Map<string, number>();
      for (const worker of holders.values()) shares.set(worker, (shares.get(worker) ?? 0) + 1);
      // 8 partitions over 3 workers: 2 or 3 each.
      expect([...shares.values()].sort()).toEqual([2, 3, 3]);
    });
    const reply = await h.client.notify({ event_id: '$pool1', room_id: '!r:example.org' }, recipients(audience), {
      reply: true,
    });
    expect(reply).toEqual({ recipients: 300, devices: 300 });
    await eventually(() => {
      expect(eventsByDevice(gateway.requests).size).toBe(300);
    });
    const byDevice = eventsByDevice(gateway.requests);
    for (const userId of audience) expect(byDevice.get(pushkeyOf(userId))).toEqual(['$pool1']);
    // Every partition with users of this audience was delivered by one worker: all three took part.
    const holders = partitionHolders(h.logs);
    const senders = new Set(audience.map((userId) => holders.get(partitionOf(userId, PARTITIONS))));
    expect(senders.size).toBe(3);
  });

  it('keeps each device’s notifications in publish order, none lost and none twice, while workers join and leave', async () => {
    h = await startDeliveringWorker({ delivery: { partitions: PARTITIONS } });
    const audience = users(120);
    await withPushers(audience);
    // A slow gateway, so that notifications wait while partitions move.
    gateway.behave({ kind: 'answer', delayMs: 150 });
    const events = Array.from({ length: 12 }, (_, n) => `$order${n + 1}`);
    const publish = async (from: number, to: number) => {
      for (const event of events.slice(from, to))
        await h.client.notify({ event_id: event, room_id: '!r:example.org' }, recipients(audience));
    };
    await publish(0, 4);
    // Two workers join: the first hands partitions over to them with notifications still waiting.
    await h.startAnother();
    await h.startAnother();
    await eventually(() => {
      expect(h.logs.some((line) => line.includes('handed a delivery partition over'))).toBe(true);
    });
    await publish(4, 8);
    // The first worker leaves (it routed every notify so far): the others take its partitions and the routing.
    await h.stopOne();
    await publish(8, 12);
    await eventually(() => {
      const byDevice = eventsByDevice(gateway.requests);
      for (const userId of audience) expect(byDevice.get(pushkeyOf(userId))?.length ?? 0).toBeGreaterThanOrEqual(12);
    });
    const byDevice = eventsByDevice(gateway.requests);
    for (const userId of audience) expect(byDevice.get(pushkeyOf(userId))).toEqual(events);
  });
});
