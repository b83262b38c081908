import { describe, expect, it, vi } from 'vitest';
import { DEFAULT_BREAKER_POLICY } from '../../src/delivery/circuit-breaker.js';
import type { GatewayExchange } from '../../src/delivery/response-outcome.js';
import type { DeliveryOutcome } from '../../src/delivery-service/delivery-observer.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import { bodyText } from '../../src/delivery/request-body.js';
import {
  ALICE,
  APP,
  BOB,
  DOWN,
  GATEWAY,
  OK,
  OTHER_GATEWAY,
  START,
  aDelivery,
  aPusher,
  aWorld,
  eventsTo,
  useSchedulerWorlds,
} from '../support/scheduler-world.js';

useSchedulerWorlds();

describe('the delivery scheduler', () => {
  it('sends each request once, removes it from the store, and counts its devices delivered', async () => {
    const world = aWorld();
    await world.take([aDelivery(1), aDelivery(2, { userId: BOB })]);
    await vi.advanceTimersByTimeAsync(100);
    expect(world.gateway.sent.map((s) => s.event).sort()).toEqual(['$1', '$2']);
    expect(await world.pending()).toEqual([]);
    expect(world.observed.count('delivered')).toBe(2);
    expect(world.scheduler.pending).toBe(0);
  });

  it("keeps one device's notifications in order behind a failing one, and holds no other device", async () => {
    const world = aWorld();
    // Alice's gateway fails twice, then recovers; Bob's (another host) always answers.
    let failures = 2;
    world.gateway.answerWith((request) => {
      if (request.url === GATEWAY && failures > 0) {
        failures -= 1;
        return { kind: 'response', status: 503 };
      }
      return OK;
    });
    await world.take([aDelivery(1), aDelivery(2), aDelivery(3), aDelivery(4, { userId: BOB, url: OTHER_GATEWAY })]);
    await vi.advanceTimersByTimeAsync(10);
    expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1']);
    expect(eventsTo(world, `${BOB}-phone`)).toEqual(['$4']);
    // Backoff: 1 s, then 2 s (the middle of the jitter range is the whole step... see retry-schedule).
    await vi.advanceTimersByTimeAsync(10_000);
    expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1', '$1', '$1', '$2', '$3']);
    expect(world.observed.count('retried')).toBe(2);
    expect(world.observed.count('delivered')).toBe(4);
  });

  it('keeps the newest 20 of a device while its gateway is down, and sends them in order once it is back', async () => {
    const world = aWorld();
    let up = false;
    world.gateway.answerWith(() => (up ? OK : DOWN));
    await world.take([aDelivery(0)]);
    await vi.advanceTimersByTimeAsync(10);
    // 25 more arrive while the first keeps failing (it is in flight or waiting: never dropped for newer ones).
    for (let n = 1; n <= 25; n += 1) await world.take([aDelivery(n)]);
    up = true;
    world.gateway.sent.length = 0;
    await vi.advanceTimersByTimeAsync(120_000);
    // The oldest waiting ones went as newer ones came, the failing first one too: it was not in flight.
    expect(eventsTo(world, `${ALICE}-phone`)).toEqual(Array.from({ length: 20 }, (_, i) => `$${String(i + 6)}`));
    expect(world.observed.count('dropped')).toBe(6);
    expect(await world.pending()).toEqual([]);
  });

  it('drops a front withdrawn unsent once the newest 20 wait behind it: it was spared only while it seemed on its way', async () => {
    const world = aWorld();
    const WITHDRAWN: GatewayExchange = { kind: 'not-sent', reason: 'withdrawn' };
    let leaveLine: (exchange: GatewayExchange) => void = () => undefined;
    let first = true;
    // $0 waits in the client's line for a slot: in flight for its device queue, not yet written.
    world.gateway.answerWith(async () => {
      if (!first) return OK;
      first = false;
      return new Promise<GatewayExchange>((resolve) => {
        leaveLine = resolve;
      });
    });
    await world.take([aDelivery(0)]);
    await vi.advanceTimersByTimeAsync(10);
    for (let n = 1; n <= 25; n += 1) await world.take([aDelivery(n)]);
    // Its partition's lease came into doubt while it waited: it leaves the line unsent.
    leaveLine(WITHDRAWN);
    world.gateway.sent.length = 0;
    await vi.advanceTimersByTimeAsync(120_000);
    expect(eventsTo(world, `${ALICE}-phone`)).toEqual(Array.from({ length: 20 }, (_, i) => `$${String(i + 6)}`));
    expect(world.observed.count('dropped')).toBe(6);
    expect(await world.pending()).toEqual([]);
    expect(world.scheduler.pending).toBe(0);
  });

  it('gives a notification up at the end of its window and moves the device on', async () => {
    const world = aWorld({ retry: { baseMs: 1000, maxMs: 4000, giveUpAfterMs: 20_000 } });
    world.gateway.answerWith((request) => (request.event === '$1' ? { kind: 'response', status: 500 } : OK));
    await world.take([aDelivery(1), aDelivery(2)]);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(world.observed.count('given_up')).toBe(1);
    expect(eventsTo(world, `${ALICE}-phone`).at(-1)).toBe('$2');
    expect(await world.pending()).toEqual([]);
  });

  it.each<[string, GatewayExchange, DeliveryOutcome]>([
    ['a 4xx', { kind: 'response', status: 400 }, 'failed'],
    ['a redirect', { kind: 'response', status: 302 }, 'failed'],
    ['a refused address', { kind: 'address-refused', rule: 'loopback', reason: 'loopback' }, 'refused'],
  ])(
    'fails %s for good: no retry, the next notification goes, the pusher is kept',
    async (_name, exchange, outcome) => {
      const world = aWorld();
      world.gateway.answerWith((request) => (request.event === '$1' ? exchange : OK));
      await world.take([aDelivery(1), aDelivery(2)]);
      await vi.advanceTimersByTimeAsync(60_000);
      expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1', '$2']);
      expect(world.observed.count(outcome)).toBe(1);
      expect(world.removed).toEqual([]);
    },
  );

  it('removes exactly the pusher of a rejected pushkey, as the request was sent to it, and counts the other devices delivered', async () => {
    const world = aWorld();
    world.gateway.answerWith(() => ({ kind: 'response', status: 200, body: '{"rejected":["tablet","unknown"]}' }));
    const devices = [
      { appId: APP, pushkey: 'phone' },
      { appId: 'other.app', pushkey: 'tablet' },
    ];
    const planned = aDelivery(1, { devices });
    // The tablet's pusher was set at 1,700,000,000.5 s when the request was planned.
    const body = JSON.parse(bodyText(planned.body)) as { notification: { devices: { pushkey_ts: number }[] } };
    body.notification.devices.forEach((device, i) => (device.pushkey_ts = i === 1 ? 1_700_000_000 : 5));
    await world.take([{ ...planned, body: JSON.stringify(body) }]);
    await vi.advanceTimersByTimeAsync(100);
    // Removed only while it is still that registration: at that URL, set no later than that second.
    expect(world.removed).toEqual([
      { userId: ALICE, appId: 'other.app', pushkey: 'tablet', url: GATEWAY, setAtMost: 1_700_000_000_999 },
    ]);
    expect(world.observed.count('rejected')).toBe(1);
    expect(world.observed.count('delivered')).toBe(1);
  });

  it('sends nothing to a device whose pusher was removed after the notification was planned', async () => {
    const world = aWorld();
    world.pushers.set(ALICE, [aPusher(ALICE, 'tablet')]);
    vi.setSystemTime(START + 1000);
    world.scheduler.pushersChanged(ALICE);
    await world.take([
      aDelivery(1, {
        devices: [
          { appId: APP, pushkey: 'phone' },
          { appId: APP, pushkey: 'tablet' },
        ],
      }),
      aDelivery(2, { userId: BOB }),
    ]);
    await vi.advanceTimersByTimeAsync(100);
    expect(world.gateway.sent).toEqual([
      { url: GATEWAY, event: '$2', pushkeys: [`${BOB}-phone`] },
      { url: GATEWAY, event: '$1', pushkeys: ['tablet'] },
    ]);
    expect(world.observed.count('pusher_removed')).toBe(1);
  });

  it('checks again a device whose pushers changed in the same millisecond as the read of them', async () => {
    const reads: ((pushers: StoredPusher[]) => void)[] = [];
    const world = aWorld({
      pushers: {
        listPushers: async () =>
          new Promise<StoredPusher[]>((resolve) => {
            reads.push(resolve);
          }),
        listPushersOfUsers: async () => Promise.resolve(new Map()),
      },
    });
    world.scheduler.pushersChanged(ALICE);
    await world.take([aDelivery(1)]);
    await vi.advanceTimersByTimeAsync(0);
    expect(reads).toHaveLength(1);
    // The device logs out while its pushers are read, and the clock has not moved: the read still lists it.
    world.scheduler.pushersChanged(ALICE);
    reads[0]?.([aPusher(ALICE, `${ALICE}-phone`)]);
    await vi.advanceTimersByTimeAsync(0);
    expect(world.gateway.sent).toEqual([]);
    reads[1]?.([]);
    await vi.advanceTimersByTimeAsync(100);
    expect(world.gateway.sent).toEqual([]);
    expect(world.observed.count('pusher_removed')).toBe(1);
  });

  it('sends only probes to a gateway that keeps failing, not one request per waiting device', async () => {
    const world = aWorld();
    world.gateway.answerWith(() => DOWN);
    const devices = Array.from({ length: 200 }, (_, i) => aDelivery(1, { userId: `@user${String(i)}:example.org` }));
    await world.take(devices);
    await vi.advanceTimersByTimeAsync(60_000);
    // 4 in flight at first, 5 failures open the breaker, then probes at 1, 2, 4, 8, 16, 32 s.
    expect(world.gateway.sent.length).toBeLessThan(20);
    expect(world.observed.count('held-by-breaker')).toBeGreaterThan(0);
    world.gateway.answerWith(() => OK);
    await vi.advanceTimersByTimeAsync(120_000);
    expect(new Set(world.gateway.sent.flatMap((s) => s.pushkeys)).size).toBe(200);
    expect(await world.pending()).toEqual([]);
  });

  it.each<[string, StoredPusher[], string[]]>([
    ['its pusher is still there: sent in order', [aPusher(ALICE, `${ALICE}-phone`)], ['$1', '$2']],
    ['its pusher is gone meanwhile: nothing sent', [], []],
  ])(
    'checks requests of a partition taken over against the pushers before they go (planned on another clock): %s',
    async (_case, pushers, sent) => {
      const world = aWorld();
      world.pushers.set(ALICE, pushers);
      // What another worker planned and stored: no change event of it reached this worker.
      world.scheduler.hold([aDelivery(1), aDelivery(2)]);
      await vi.advanceTimersByTimeAsync(100);
      expect(eventsTo(world, `${ALICE}-phone`)).toEqual(sent);
      expect(world.scheduler.pending).toBe(0);
    },
  );

  it('moves a device on when its front changed while its pushers were read (the cap dropped it): nothing sticks', async () => {
    let answerRead: () => void = () => undefined;
    const pushers = new Map<string, StoredPusher[]>([[ALICE, [aPusher(ALICE, `${ALICE}-phone`)]]]);
    let slow = true;
    const world = aWorld({
      backlog: { maxPending: 3 },
      pushers: {
        listPushers: async (userId) => {
          if (slow) {
            slow = false;
            await new Promise<void>((resolve) => {
              answerRead = resolve;
            });
          }
          return pushers.get(userId) ?? [];
        },
        listPushersOfUsers: async () => Promise.resolve(new Map()),
      },
    });
    // Alice's pushers changed after these were planned: the front is checked before it goes (a slow read).
    world.scheduler.pushersChanged(ALICE);
    world.scheduler.hold([aDelivery(1), aDelivery(2), aDelivery(3)], Date.now() - 1);
    await vi.advanceTimersByTimeAsync(1);
    // A fourth arrives during the read: the cap of 3 drops the front being checked.
    world.scheduler.hold([aDelivery(4)], Date.now() - 1);
    answerRead();
    await vi.advanceTimersByTimeAsync(100);
    expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$2', '$3', '$4']);
    expect(world.scheduler.pending).toBe(0);
  });

  it('lets the next waiting device send when the one woken first sends nothing (its pushers are gone)', async () => {
    const world = aWorld({ breaker: { ...DEFAULT_BREAKER_POLICY, initialInFlight: 1, maxInFlight: 1 } });
    let answerFirst: (exchange: GatewayExchange) => void = () => undefined;
    world.gateway.answerWith(async (request) =>
      request.event === '$1'
        ? new Promise<GatewayExchange>((resolve) => {
            answerFirst = resolve;
          })
        : OK,
    );
    // Sorts between Alice and Bob: the store hands requests over by key.
    const carol = '@amy:example.org';
    // Alice's is in flight; Amy's, then Bob's, wait for the gateway's one slot.
    await world.take([aDelivery(1), aDelivery(2, { userId: carol }), aDelivery(3, { userId: BOB })]);
    await vi.advanceTimersByTimeAsync(10);
    // Amy logs out: her request will find no pusher when its turn comes.
    world.scheduler.pushersChanged(carol);
    answerFirst(OK);
    await vi.advanceTimersByTimeAsync(100);
    expect(world.gateway.sent.map((s) => s.event)).toEqual(['$1', '$3']);
    expect(world.scheduler.pending).toBe(0);
  });

  it('drops a notification that waited past the maximum age instead of sending it, and counts it expired', async () => {
    const world = aWorld({ age: { maxAgeMs: 60_000 } });
    world.gateway.answerWith(() => DOWN);
    await world.take([aDelivery(1)]);
    await vi.advanceTimersByTimeAsync(10);
    // Planned two minutes ago: it waits behind the failing one, then is too old to go.
    await world.take([aDelivery(2, { acceptedAt: Date.now() - 120_000 })]);
    world.gateway.answerWith(() => OK);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1', '$1']);
    expect(world.observed.count('expired')).toBe(1);
    expect(await world.pending()).toEqual([]);
  });

  it('sends a device only the newest of its waiting badge updates', async () => {
    const world = aWorld();
    world.gateway.answerWith(() => DOWN);
    await world.take([aDelivery(1)]);
    await vi.advanceTimersByTimeAsync(10);
    await world.take([2, 3, 4].map((n) => aDelivery(n, { countsOnly: true })));
    world.gateway.answerWith(() => OK);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(eventsTo(world, `${ALICE}-phone`)).toEqual(['$1', '$1', '$4']);
    expect(world.observed.count('dropped')).toBe(2);
  });

  it('sends again after the longest backoff when a gateway asks for a day (Retry-After), not giving it up', async () => {
    const world = aWorld({ retry: { baseMs: 1000, maxMs: 60_000, giveUpAfterMs: 3_600_000 } });
    let first = true;
    world.gateway.answerWith(() => {
      if (!first) return OK;
      first = false;
      return { kind: 'response', status: 503, retryAfter: '86400' };
    });
    await world.take([aDelivery(1)]);
    await vi.advanceTimersByTimeAsync(10);
    expect(world.gateway.sent).toHaveLength(1);
    // The breaker's first probe comes within its own cap; the device's retry at the longest backoff.
    await vi.advanceTimersByTimeAsync(61_000);
    expect(world.observed.count('given_up')).toBe(0);
    expect(world.observed.count('delivered')).toBe(1);
  });
});
