import { afterEach, beforeEach, vi } from 'vitest';
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

export const ALICE = '@alice:example.org';
export const BOB = '@bob:example.org';
export const APP = 'org.example.app';
export const GATEWAY = 'https://push.example.org/_matrix/push/v1/notify';
export const OTHER_GATEWAY = 'https://push.other.example/_matrix/push/v1/notify';
export const START = Date.parse('2026-01-01T00:00:00Z');
export const OK: GatewayExchange = { kind: 'response', status: 200, body: '{"rejected":[]}' };
export const DOWN: GatewayExchange = { kind: 'connection-error', reason: 'ECONNREFUSED' };

let seq = 0;
/** A request for one device; `n` names its notification (the event ID in its body). */
export function aDelivery(n: number, overrides: Partial<PendingDelivery> = {}): PendingDelivery {
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

export interface Sent {
  readonly url: string;
  readonly event: string;
  readonly pushkeys: readonly string[];
}

/** A gateway whose answer each test decides; records what was sent. */
export function aGateway() {
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

export function aCountingObserver() {
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

export function aPusher(userId: string, pushkey: string): StoredPusher {
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

export interface World {
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

export function aWorld(overrides: Partial<DeliverySchedulerOptions> = {}): World {
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
export const eventsTo = (world: World, pushkey: string) =>
  world.gateway.sent.filter((request) => request.pushkeys.includes(pushkey)).map((request) => request.event);

/** Fake timers from START for each test, and every world's scheduler closed after it. */
export function useSchedulerWorlds(): void {
  beforeEach(() => {
    vi.useFakeTimers({ now: START });
  });

  afterEach(async () => {
    for (const world of worlds.splice(0)) await world.scheduler.close();
    vi.useRealTimers();
  });
}
