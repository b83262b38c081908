import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { deviceQueueKey } from '../../src/delivery/delivery-key.js';
import type { DeliveryPusher, DeviceBatch } from '../../src/delivery/device-batches.js';
import { plannedPushers, queueNames } from '../../src/delivery/queue-names.js';
import { ALICE } from '../support/builders.js';
import { aDeliveryPusher, GATEWAY_URL } from '../support/notify-builders.js';

function aBatch(pushers: readonly DeliveryPusher[], overrides: Partial<DeviceBatch> = {}): DeviceBatch {
  return { userId: ALICE, url: GATEWAY_URL, pushers, ...overrides };
}

const phone = aDeliveryPusher({ pushkey: 'phone' });
const tablet = aDeliveryPusher({ pushkey: 'tablet' });

describe("a device queue's names", () => {
  it('are the key of the batch, and the tag request IDs were always planned with (a redelivery plans the same IDs)', () => {
    const key = deviceQueueKey(ALICE, GATEWAY_URL, undefined);
    expect(queueNames(aBatch([phone, tablet]))).toEqual({
      key,
      tag: createHash('sha256').update(key).digest('base64url').slice(0, 22),
      devices: [
        { appId: 'org.example.app', pushkey: 'phone' },
        { appId: 'org.example.app', pushkey: 'tablet' },
      ],
    });
  });

  it('are made once for every request to the same pusher objects', () => {
    const first = queueNames(aBatch([phone, tablet]));
    expect(queueNames(aBatch([phone, tablet]))).toBe(first);
    expect(plannedPushers([phone, tablet])).toBe(plannedPushers([phone, tablet]));
  });

  it.each<[string, readonly DeliveryPusher[], DeviceBatch['pushers'], Partial<DeviceBatch>]>([
    ['a device gone', [phone, tablet], [phone], {}],
    ['a device added', [phone], [phone, tablet], {}],
    [
      'a device changed in the store (a new object with another app ID)',
      [phone, tablet],
      [phone, aDeliveryPusher({ pushkey: 'tablet', app_id: 'org.example.other' })],
      {},
    ],
    [
      'its pushers moved to another gateway (new objects, the same pushkeys)',
      [phone],
      [aDeliveryPusher({ pushkey: 'phone', data: { url: 'https://other.example.org/_matrix/push/v1/notify' } })],
      { url: 'https://other.example.org/_matrix/push/v1/notify' },
    ],
  ])('follow the batch after %s, never the names planned before', (_name, before, after, overrides) => {
    const earlier = aBatch(before);
    queueNames(earlier);
    const batch = aBatch(after, overrides);
    expect(queueNames(batch)).toEqual({
      key: deviceQueueKey(batch.userId, batch.url, batch.format),
      tag: createHash('sha256')
        .update(deviceQueueKey(batch.userId, batch.url, batch.format))
        .digest('base64url')
        .slice(0, 22),
      devices: after.map((pusher) => ({ appId: pusher.app_id, pushkey: pusher.pushkey })),
    });
    expect(plannedPushers(after)).toEqual(after);
    expect(plannedPushers(after)).not.toBe(after);
  });

  it('hands out lists no one can change: every waiting request of the device shares them', () => {
    const { devices } = queueNames(aBatch([phone]));
    expect(Object.isFrozen(devices) && devices.every((device) => Object.isFrozen(device))).toBe(true);
    expect(Object.isFrozen(plannedPushers([phone]))).toBe(true);
  });
});
