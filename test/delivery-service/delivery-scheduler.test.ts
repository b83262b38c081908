import { afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { DEFAULT_BREAKER_POLICY } from '../../src/delivery/circuit-breaker.js';
import { deviceQueueKey } from '../../src/delivery/delivery-key.js';
import type { GatewayExchange } from '../../src/delivery/response-outcome.js';
import type { DeliveryObserver, DeliveryOutcome } from '../../src/delivery-service/delivery-observer.js';
import { DeliveryScheduler, type DeliverySchedulerOptions } from '../../src/delivery-service/delivery-scheduler.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import type { RejectedRegistration } from '../../src/pushers/rejected-registration.js';
import type { PendingDelivery } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { bodyText } from '../../src/delivery/request-body.js';

const ALICE = '@alice:example.org';
const BOB = '@bob:example.org';
const APP = 'org.example.app';
const GATEWAY = 'https://push.example.org/_matrix/push/v1/notify';
const OTHER_GATEWAY = 'https://push.other.example/_matrix/push/v1/notify';
const START = Date.parse('2026-01-01T00:00:00Z');
const OK: GatewayExchange = { kind: 'response', status: 200, body: '{"rejected":[]}' };
const DOWN: GatewayExchange = { kind: 'connection-error', reason: 'ECONNREFUSED' };

let seq = 0;
/** A request for one device; `n` names its notification (the event ID in its body). */
function aDelivery(n: number, overrides: Partial<PendingDelivery> = {}): PendingDelivery {
  seq += 1;
  const userId = overrides.userId ?? ALICE;
  const url = overrides.url ?? GATEWAY;
  const devices = overrides.devices ?? [{ appId: APP, pushkey: `${userId}-phone` }];
  return {
    id: `notify-${n}/${userId}/${url}`,
    partition: 0,
    key: deviceQueueKey(userId, url, undefined),
    seq,
    userId,
    url,
    body: JSON.stringify({
      notification: {
        event_id: `$${n}`,
        devices: devices.map((d) => ({ app_id: d.appId, pushkey: d.pushkey, pushkey_ts: 0, data: {}, tweaks: {} })),
      },
    }),
    devices,
    acceptedAt: START,
    ...overrides,
  };
}

interface Sent {
  readonly url: string;
  readonly event: string;
  readonly pushkeys: readonly string[];
}

/** A gateway whose answer each test decides; records what was sent. */
function aGateway() {
  const sent: Sent[] = [];
  let answer: (request: Sent) => GatewayExchange | Promise<GatewayExchange> = () => OK;
  return {
    sent,
    answerWith(next: typeof answer) {
      answer = next;
    },
    sender: {
      send: async (url: string, body: string) => {
        const parsed = JSON.parse(body) as { notification: { event_id: string; devices: { pushkey: string }[] } };
        const request = {
          url,
          event: parsed.notification.event_id,
          pushkeys: parsed.notification.devices.map((d) => d.pushkey),
        };
        sent.push(request);
        return answer(request);
      },
    },
  };
}

function aCountingObserver() {
  const counts = new Map<string, number>();
  const observer: DeliveryObserver = {
    settled: (_url, outcome: DeliveryOutcome, devices) => {
      counts.set(outcome, (counts.get(outcome) ?? 0) + devices);
    },
    gatewayAnswered: () => undefined,
    deliveredAfter: () => undefined,
    heldByBreaker: () => {
      counts.set('held-by-breaker', (counts.get('held-by-breaker') ?? 0) + 1);
    },
  };
  return { observer, count: (outcome: string) => counts.get(outcome) ?? 0 };
}

function aPusher(userId: string, pushkey: string): StoredPusher {
  return {
    user_id: userId,
    kind: 'http',
    app_id: APP,
    pushkey,
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: GATEWAY },
    enabled: true,
  };
}

interface World {
  readonly store: InMemoryDeliveryStore;
  readonly gateway: ReturnType<typeof aGateway>;
  readonly observed: ReturnType<typeof aCountingObserver>;
  readonly removed: RejectedRegistration[];
  readonly pushers: Map<string, StoredPusher[]>;
  readonly scheduler: DeliveryScheduler;
  /** Whether the partitions' leases hold (the coordinator's gate). */
  leaseHolds: boolean;
  /** Stores the requests and hands them to the scheduler, as the intake does. */
  take(deliveries: readonly PendingDelivery[]): Promise<void>;
  /** What is pending in partition 0. */
  pending(): Promise<readonly PendingDelivery[]>;
}

const worlds: World[] = [];

function aWorld(overrides: Partial<DeliverySchedulerOptions> = {}): World {
  const store = new InMemoryDeliveryStore();
  const schedulerStore = overrides.store ?? store;
  const gateway = aGateway();
  const observed = aCountingObserver();
  const removed: RejectedRegistration[] = [];
  const pushers = new Map<string, StoredPusher[]>();
  const gate = { leaseHolds: true };
  const scheduler = new DeliveryScheduler({
    store: schedulerStore,
    gate: { sendable: () => gate.leaseHolds },
    sender: gateway.sender,
    pushers: {
      listPushers: async (userId) => Promise.resolve(pushers.get(userId) ?? []),
      listPushersOfUsers: async (userIds) => Promise.resolve(new Map(userIds.map((u) => [u, pushers.get(u) ?? []]))),
    },
    remover: {
      removeRejected: async (key) => {
        removed.push(key);
        return Promise.resolve();
      },
    },
    retry: { baseMs: 1000, maxMs: 3_600_000, giveUpAfterMs: 86_400_000 },
    backlog: { maxPending: 20 },
    age: { maxAgeMs: 86_400_000 },
    breaker: DEFAULT_BREAKER_POLICY,
    logger: createLogger('silent'),
    observer: observed.observer,
    // The middle of every jitter range: the schedule is the policy's.
    random: () => 0.5,
    ...overrides,
  });
  const world: World = {
    store,
    gateway,
    observed,
    removed,
    pushers,
    scheduler,
    get leaseHolds() {
      return gate.leaseHolds;
    },
    set leaseHolds(holds: boolean) {
      gate.leaseHolds = holds;
    },
    take: async (deliveries) => {
      const plannedAt = Date.now();
      await store.accept(
        { id: `intake-${String(seq)}`, recipients: 1, devices: deliveries.length, acceptedAt: plannedAt },
        deliveries,
      );
      scheduler.hold(deliveries, plannedAt);
    },
    pending: async () => store.listPartition(0),
  };
  worlds.push(world);
  return world;
}

/** The events sent to one device, in order. */
const eventsTo = (world: World, pushkey: string) =>
  world.gateway.sent.filter((request) => request.pushkeys.includes(pushkey)).map((request) => request.event);

beforeEach(() => {
  vi.useFakeTimers({ now: START });
});

afterEach(async () => {
  for (const world of worlds.splice(0)) await world.scheduler.close();
  vi.useRealTimers();
});

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
