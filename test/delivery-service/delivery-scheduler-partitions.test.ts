import { describe, expect, it, onTestFinished, vi } from 'vitest';
import type { GatewayExchange } from '../../src/delivery/response-outcome.js';
import type { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import {
  ALICE,
  BOB,
  DOWN,
  GATEWAY,
  OK,
  aDelivery,
  aPusher,
  aWorld,
  eventsTo,
  useSchedulerWorlds,
} from '../support/scheduler-world.js';

useSchedulerWorlds();

describe('the delivery scheduler, by partition: leases, hand-overs and close', () => {
  it('starts no send while its partition’s lease is in doubt, and carries on once it holds again', async () => {
    const world = aWorld();
    world.leaseHolds = false;
    await world.take([aDelivery(1)]);
    await vi.advanceTimersByTimeAsync(100);
    expect(world.gateway.sent).toEqual([]);
    world.leaseHolds = true;
    world.scheduler.resume();
    await vi.advanceTimersByTimeAsync(100);
    expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1']);
  });

  it('hands a partition over: its queues let go, its sends in flight awaited, what is done deleted; others carry on', async () => {
    const world = aWorld();
    let answer: (exchange: GatewayExchange) => void = () => undefined;
    world.gateway.answerWith(async (request) =>
      request.event === '$1'
        ? new Promise<GatewayExchange>((resolve) => {
            answer = resolve;
          })
        : OK,
    );
    await world.take([aDelivery(1), aDelivery(2)]);
    const other = aDelivery(3, { userId: BOB, partition: 1 });
    await world.take([other]);
    await vi.advanceTimersByTimeAsync(10);
    const releasing = world.scheduler.releasePartition(0, 5_000);
    await vi.advanceTimersByTimeAsync(10);
    answer(OK);
    await vi.advanceTimersByTimeAsync(100);
    await releasing;
    // $1 was in flight and delivered: deleted; $2 waits in the store for the next holder, unsent.
    expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1']);
    expect((await world.pending()).map((d) => d.id)).toEqual([`notify-2/${ALICE}/${GATEWAY}`]);
    expect(eventsTo(world, `${BOB}-phone`)).toEqual(['$3']);
    expect(world.scheduler.pending).toBe(0);
  });

  it('lets a partition whose lease it lost go at once, whatever deletions still wait for the store', async () => {
    const stored: { inner?: InMemoryDeliveryStore; slow: boolean } = { slow: true };
    const landings: (() => void)[] = [];
    onTestFinished(() => {
      stored.slow = false;
      for (const land of landings.splice(0)) land();
    });
    const world = aWorld({
      // A slow store: every deletion lands when the test says.
      store: {
        remove: async (ids) => {
          if (stored.slow) await new Promise<void>((resolve) => landings.push(resolve));
          await stored.inner?.remove(ids);
        },
        saveRetry: async (id, retry) => stored.inner?.saveRetry(id, retry),
      },
    });
    stored.inner = world.store;
    await world.take([aDelivery(1)]);
    await vi.advanceTimersByTimeAsync(100);
    expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1']);
    expect(landings).toHaveLength(1);
    const released = { lost: false, handedOver: false };
    // Lost (or run out): nobody is told; the deletion goes on by itself, and the partition is free to be claimed.
    void world.scheduler.releasePartition(0, 0, false).then(() => {
      released.lost = true;
    });
    await vi.advanceTimersByTimeAsync(10);
    expect(released.lost).toBe(true);
    // Handed over cleanly: the next holder reads the store right after, so what is done is deleted first.
    void world.scheduler.releasePartition(0, 0).then(() => {
      released.handedOver = true;
    });
    await vi.advanceTimersByTimeAsync(10);
    expect(released.handedOver).toBe(false);
    for (const land of landings.splice(0)) land();
    await vi.advanceTimersByTimeAsync(10);
    expect(released.handedOver).toBe(true);
    expect(await world.pending()).toEqual([]);
  });

  describe('takes back a partition it lost while a send of it was still out (a lease lost, not handed over)', () => {
    // The send of $1 outlives the lease; the partition comes back to this worker before it ends, and the
    // store still lists $1. The old send's answer decides for $1: nothing newer goes out meanwhile.
    it.each([
      { answer: OK, then: ['$1', '$2'], pending: 0 },
      { answer: DOWN, then: ['$1', '$1', '$2'], pending: 0 },
    ])('the old send answered $answer.kind: the device gets $then', async ({ answer, then, pending }) => {
      const world = aWorld();
      // What a partition takes over is checked against the pushers first: Alice's phone is still hers.
      world.pushers.set(ALICE, [aPusher(ALICE, `${ALICE}-phone`)]);
      let respond: (exchange: GatewayExchange) => void = () => undefined;
      let first = true;
      world.gateway.answerWith(async () => {
        if (!first) return OK;
        first = false;
        return new Promise<GatewayExchange>((resolve) => {
          respond = resolve;
        });
      });
      await world.take([aDelivery(1), aDelivery(2)]);
      await vi.advanceTimersByTimeAsync(10);
      // Lost: no grace, the send of $1 still out.
      const released = world.scheduler.releasePartition(0, 0);
      await vi.advanceTimersByTimeAsync(10);
      await released;
      world.scheduler.hold(await world.pending());
      await vi.advanceTimersByTimeAsync(10);
      expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1']);
      respond(answer);
      await vi.advanceTimersByTimeAsync(5_000);
      expect(eventsTo(world, `${ALICE}-phone`)).toEqual(then);
      expect(await world.pending()).toHaveLength(pending);
      expect(world.scheduler.pending).toBe(0);
    });

    it('keeps the old send as its front when the store lists more than the cap: nothing else goes out meanwhile, nothing twice', async () => {
      // The old queue held $1 in flight and the cap's 2 behind it: the store lists 3, one past the cap.
      const world = aWorld({ backlog: { maxPending: 2 } });
      world.pushers.set(ALICE, [aPusher(ALICE, `${ALICE}-phone`)]);
      let respond: (exchange: GatewayExchange) => void = () => undefined;
      onTestFinished(() => {
        respond(OK);
      });
      world.gateway.answerWith(async (request) =>
        request.event === '$1'
          ? new Promise<GatewayExchange>((resolve) => {
              respond = resolve;
            })
          : OK,
      );
      await world.take([aDelivery(1)]);
      await vi.advanceTimersByTimeAsync(10);
      await world.take([aDelivery(2), aDelivery(3)]);
      await world.scheduler.releasePartition(0, 0, false);
      world.scheduler.hold(await world.pending());
      await vi.advanceTimersByTimeAsync(10);
      expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1']);
      expect(world.scheduler.pending).toBe(3);
      respond(OK);
      await vi.advanceTimersByTimeAsync(10);
      // Read once more a grace later (a lapsed lease taken back): what the new queue holds is held once.
      world.scheduler.hold(await world.pending());
      await vi.advanceTimersByTimeAsync(5_000);
      expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1', '$2', '$3']);
      expect(await world.pending()).toHaveLength(0);
      expect(world.scheduler.pending).toBe(0);
    });

    it('leaves the new queue its own: the old send’s verdict unholds nothing the new queue holds', async () => {
      // $0 is older than $1 but reached this worker after $1 went out (a late write of the partition's last holder,
      // read a grace later): the old queue held it behind $1. Taken back, the new queue has $0 in front of $1.
      const world = aWorld();
      world.pushers.set(ALICE, [aPusher(ALICE, `${ALICE}-phone`)]);
      const respond = new Map<string, (exchange: GatewayExchange) => void>();
      onTestFinished(() => {
        for (const answer of respond.values()) answer(OK);
      });
      world.gateway.answerWith(
        async (request) =>
          new Promise<GatewayExchange>((resolve) => {
            respond.set(request.event, resolve);
          }),
      );
      const late = aDelivery(0);
      await world.take([aDelivery(1)]);
      await vi.advanceTimersByTimeAsync(10);
      await world.store.acceptAll([], [late]);
      world.scheduler.hold([late]);
      await world.scheduler.releasePartition(0, 0, false);
      world.scheduler.hold(await world.pending());
      await vi.advanceTimersByTimeAsync(10);
      expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1', '$0']);
      respond.get('$1')?.(OK);
      await vi.advanceTimersByTimeAsync(10);
      // The store is read once more (a lapsed lease taken back): $0, in flight from the new queue, is held already.
      world.scheduler.hold(await world.pending());
      await vi.advanceTimersByTimeAsync(10);
      respond.get('$0')?.(OK);
      await vi.advanceTimersByTimeAsync(10);
      respond.get('$1')?.(OK);
      await vi.advanceTimersByTimeAsync(5_000);
      // $1 may go twice (the new queue had it behind $0, not in front: a duplicate at worst); $0 goes once.
      expect(eventsTo(world, `${ALICE}-phone`).filter((event) => event === '$0')).toEqual(['$0']);
      expect(await world.pending()).toHaveLength(0);
      expect(world.scheduler.pending).toBe(0);
    });
  });

  it('aborts sends still in flight after the grace on close, and hands them over', async () => {
    let aborted = false;
    let answer: (exchange: GatewayExchange) => void = () => undefined;
    const world = aWorld({
      closeGraceMs: 1000,
      abortSends: async () => {
        aborted = true;
        answer({ kind: 'connection-error', reason: 'aborted' });
        return Promise.resolve();
      },
    });
    world.gateway.answerWith(
      async () =>
        new Promise<GatewayExchange>((resolve) => {
          answer = resolve;
        }),
    );
    await world.take([aDelivery(1)]);
    await vi.advanceTimersByTimeAsync(10);
    const closing = world.scheduler.close();
    await vi.advanceTimersByTimeAsync(1_500);
    await closing;
    expect(aborted).toBe(true);
    const claimed = await world.pending();
    expect(claimed.map((d) => d.id)).toEqual([`notify-1/${ALICE}/${GATEWAY}`]);
    // A send cut short by the shutdown says nothing about the gateway: no backoff recorded.
    expect(claimed[0]?.retry).toBeUndefined();
  });

  it('leaves on close what is not done in the store, its backoff with it, for the partition’s next holder', async () => {
    const world = aWorld();
    world.gateway.answerWith(() => DOWN);
    await world.take([aDelivery(1)]);
    await vi.advanceTimersByTimeAsync(10);
    await world.scheduler.close();
    const claimed = await world.pending();
    expect(claimed.map((d) => d.id)).toEqual([`notify-1/${ALICE}/${GATEWAY}`]);
    // Its backoff carries on where this worker left it.
    expect(claimed[0]?.retry?.failures).toBe(1);
  });
});
