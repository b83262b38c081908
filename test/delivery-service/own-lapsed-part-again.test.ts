import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { NotifyRequestBody } from '../../src/contract/ops.js';
import { deliveryPusherOf } from '../../src/delivery/delivery-pusher-of.js';
import { planIntake } from '../../src/delivery/intake-plan.js';
import { IntakeStoppedError } from '../../src/delivery-service/notify-intake.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { aStoredPusher } from '../support/notify-builders.js';
import { aPartitionHolder, aSlowablePort } from '../support/partition-holder-world.js';

/**
 * A store slow enough that a worker's lease renewals fail for a whole
 * lease: the worker lets the partition go (its unsecured parts go back to
 * the queue), then claims it back and takes those parts in again. What it
 * delivered of them before the lapse must not be sent again, even when
 * their deletions were still batched behind a slow one when it let go: the
 * journal, having forgotten the partition, must still note them done. Seen
 * in CI's SIGKILL fault test: a worker sent 437 devices `$event1` twice,
 * both times itself, seconds apart, around its own lapsed lease.
 */
const P = 5;

const aPart = (event: string, users: readonly string[]): NotifyRequestBody => ({
  op: 'notify',
  notification: { event_id: event, room_id: '!r:example.org' },
  recipients: users.map((user_id) => ({ user_id })),
});

const CAROL = aPart('$event0', ['@carol:example.org']);
const PART = aPart('$event1', ['@alice:example.org', '@bob:example.org']);

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/**
 * A holder of P that read Carol's request from the store and sent it: its
 * deletion is held (a slow store), so the deletions after it are batched
 * behind it.
 */
async function aHolderWithDeletionsBehindASlowOne() {
  const store = new InMemoryDeliveryStore();
  const plan = planIntake(CAROL, (userId) => [aStoredPusher(userId)].map(deliveryPusherOf), {
    notifyId: 'm0',
    partition: P,
    seq: 1,
    acceptedAt: Date.now(),
  });
  await store.acceptAll([], plan.deliveries);
  const slow = aSlowablePort(store);
  slow.hold('remove');
  const holder = aPartitionHolder(slow.port, P);
  closers.push(holder.close);
  await holder.take();
  await until(() => holder.sent.length === 1, 'Carol’s stored request sent');
  await sleep(20);
  return { store, slow, holder };
}

/**
 * That holder takes PART in and sends both its devices (their deletions
 * batched behind Carol's), then its lease runs out: PART, not secured, goes
 * back to the queue.
 */
async function aLapseAfterThePartWasSent() {
  const world = await aHolderWithDeletionsBehindASlowOne();
  const { holder } = world;
  const taken = holder.intake.accept(PART, 'm1', P);
  await until(() => holder.sent.length === 3, 'both devices sent');
  await sleep(20);
  await holder.lapse();
  await expect(taken).rejects.toBeInstanceOf(IntakeStoppedError);
  return world;
}

describe('a worker taking back its own lapsed partition, and a part of it again', () => {
  it('does not send again what it delivered before the lapse, whose deletion was still batched at the lapse', async () => {
    const { slow, holder } = await aLapseAfterThePartWasSent();

    slow.release('remove');
    // The batched deletions reach the store, and the marks with them.
    await sleep(150);
    await holder.take('mine');
    await holder.intake.accept(PART, 'm1', P);
    await sleep(50);

    expect([...holder.sent].sort()).toEqual([
      '@alice:example.org-phone $event1',
      '@bob:example.org-phone $event1',
      '@carol:example.org-phone $event0',
    ]);
  });

  it('does not send it again either when the part comes back before the batched deletions went out', async () => {
    const { slow, holder } = await aLapseAfterThePartWasSent();

    await holder.take('mine');
    const again = holder.intake.accept(PART, 'm1', P);
    await sleep(20);
    slow.release('remove');
    await again;
    await sleep(50);

    expect(holder.sent.filter((line) => line.endsWith('$event1')).sort()).toEqual([
      '@alice:example.org-phone $event1',
      '@bob:example.org-phone $event1',
    ]);
  });
});
