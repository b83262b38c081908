import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseAddressAllowlist } from '../../src/delivery/address-allowlist.js';
import { DEFAULT_BREAKER_POLICY } from '../../src/delivery/circuit-breaker.js';
import { deviceQueueKey } from '../../src/delivery/delivery-key.js';
import { GatewayClient } from '../../src/delivery-http/gateway-client.js';
import { DeliveryScheduler } from '../../src/delivery-service/delivery-scheduler.js';
import { createLogger } from '../../src/logging/logger.js';
import type { PendingDelivery } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';

/**
 * A request waiting in the gateway client's lines (behind a busy address)
 * when its partition's lease comes into doubt or is handed over must never
 * go out afterwards: the next holder sends it (and newer ones), and a late
 * copy would reach the device after them (n, n+1, n).
 */

const USERS = ['@alice:example.org', '@bob:example.org'];

interface Arrival {
  readonly event: string;
  /** Whether the partition could still be sent for when it arrived. */
  readonly gateOpen: boolean;
}

const closing: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

/** A gateway on loopback that holds its first request `holdMs` before it answers 200, the others at once. */
async function aSlowGateway(holdMs: number, gate: { open: boolean }) {
  const arrivals: Arrival[] = [];
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let text = '';
    request.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    request.on('end', () => {
      const event = (JSON.parse(text) as { notification: { event_id: string } }).notification.event_id;
      arrivals.push({ event, gateOpen: gate.open });
      const answer = () => response.writeHead(200, { 'content-type': 'application/json' }).end('{"rejected":[]}');
      if (arrivals.length === 1) setTimeout(answer, holdMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closing.push(
    async () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  );
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${String(port)}/_matrix/push/v1/notify`, arrivals };
}

function aDelivery(n: number, userId: string, url: string): PendingDelivery {
  const devices = [{ appId: 'org.example.app', pushkey: `${userId}-phone` }];
  return {
    id: `notify-${String(n)}/${userId}`,
    partition: 0,
    key: deviceQueueKey(userId, url, undefined),
    seq: n,
    userId,
    url,
    body: JSON.stringify({
      notification: {
        event_id: `$${String(n)}`,
        devices: devices.map((d) => ({ app_id: d.appId, pushkey: d.pushkey, pushkey_ts: 0, data: {}, tweaks: {} })),
      },
    }),
    devices,
    acceptedAt: Date.now(),
  };
}

/** A real client (one request at a time to the gateway's address) under a scheduler whose gate the test closes. */
async function aWorld() {
  const gate = { open: true };
  const gateway = await aSlowGateway(400, gate);
  const client = new GatewayClient({ allowlist: parseAddressAllowlist('127.0.0.1/32'), maxInFlightPerAddress: 1 });
  const scheduler = new DeliveryScheduler({
    store: new InMemoryDeliveryStore(),
    gate: { sendable: () => gate.open },
    sender: client,
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
    random: () => 0.5,
  });
  closing.push(async () => client.close());
  closing.push(async () => scheduler.close());
  const plannedAt = Date.now();
  const deliveries = USERS.map((userId, index) => aDelivery(index + 1, userId, gateway.url));
  scheduler.hold(deliveries, plannedAt);
  /** Until the client holds and awaits nothing: whatever was to go out went. */
  const idle = async () =>
    vi.waitFor(
      () => {
        expect(client.keysHeld).toEqual({ users: 0, origins: 0, addresses: 0 });
      },
      { timeout: 5_000, interval: 20 },
    );
  /** Until the gateway holds the first request: the second waits in the client's address line. */
  const firstArrived = async () =>
    vi.waitFor(
      () => {
        expect(gateway.arrivals).toHaveLength(1);
      },
      { timeout: 5_000, interval: 5 },
    );
  return { gate, gateway, scheduler, idle, firstArrived };
}

describe('sends after the lease', () => {
  it('a send waiting for a slot when the partition is handed over never goes out', async () => {
    const world = await aWorld();
    await world.firstArrived();
    world.gate.open = false;
    await world.scheduler.releasePartition(0, 0);
    await world.idle();
    expect(world.gateway.arrivals).toEqual([{ event: '$1', gateOpen: true }]);
  });

  it('a send waiting for a slot when the lease comes into doubt goes out only once it holds again', async () => {
    const world = await aWorld();
    await world.firstArrived();
    world.gate.open = false;
    await world.idle();
    expect(world.gateway.arrivals).toEqual([{ event: '$1', gateOpen: true }]);
    // Renewed: the device queue that was held back moves on.
    world.gate.open = true;
    world.scheduler.resume();
    await vi.waitFor(() => {
      expect(world.gateway.arrivals.map((a) => a.event)).toEqual(['$1', '$2']);
    });
    expect(world.gateway.arrivals.every((arrival) => arrival.gateOpen)).toBe(true);
  });
});
