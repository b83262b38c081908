import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { NotifyRequestBody } from '../../src/contract/ops.js';
import { deliveryPusherOf } from '../../src/delivery/delivery-pusher-of.js';
import { planIntake } from '../../src/delivery/intake-plan.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { aStoredPusher } from '../support/notify-builders.js';
import { aPartitionHolder, aSlowablePort, type HolderPort } from '../support/partition-holder-world.js';

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
const USERS = ['@alice:example.org', '@bob:example.org'];

const PART: NotifyRequestBody = {
  op: 'notify',
  notification: { event_id: '$event1', room_id: '!r:example.org' },
  recipients: USERS.map((user_id) => ({ user_id })),
};

/** The part's requests as the old holder planned and stored them, without the part's record. */
async function storedByTheOldHolder(store: InMemoryDeliveryStore): Promise<void> {
  const plan = planIntake(PART, (userId) => [aStoredPusher(userId)].map(deliveryPusherOf), {
    notifyId: 'm1',
    partition: P,
    seq: 1,
    acceptedAt: Date.now(),
  });
  await store.acceptAll([], plan.deliveries);
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** The holder taking the partition over from the old one. */
function aNewHolder(port: HolderPort) {
  const holder = aPartitionHolder(port, P);
  closers.push(holder.close);
  return holder;
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
