import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Db } from 'mongodb';
import { PushRulesClient } from '../../../src/client/push-rules-client.js';
import { MongoPushStore } from '../../../src/store/mongo-push-store.js';
import type { PusherDocument } from '../../../src/store/mongo-pusher-lists.js';
import { makeThrowawayCa, type ThrowawayCa } from '../../support/throwaway-ca.js';
import type { RecordedRequest } from '../../support/gateway-double-records.js';
import { PushGatewayDouble } from '../../support/push-gateway-double.js';
import { openFaultWorld, type FaultWorld } from './fault-world.js';

export const APP = 'org.example.app';

/**
 * Worker processes that deliver to an HTTPS push gateway double on
 * 127.0.0.1, trusted the standard way (NODE_EXTRA_CA_CERTS with a throwaway
 * CA) and allowed by PUSH_GATEWAY_IP_ALLOWLIST: the production path, TLS
 * and the address check included. Short leases, so that a dead worker's
 * deliveries are taken over within seconds.
 */
export interface DeliveryWorld {
  readonly world: FaultWorld;
  readonly gateway: PushGatewayDouble;
  readonly client: PushRulesClient;
  /** Stores one HTTP pusher per user (pushkey `<user>-phone`), straight into the database. */
  seedPushers(users: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

export async function openDeliveryWorld(workers: number, env: Record<string, string> = {}): Promise<DeliveryWorld> {
  const ca: ThrowawayCa = await makeThrowawayCa();
  const gateway = await PushGatewayDouble.start({ tls: { key: ca.serverKey, cert: ca.serverCert } });
  const world = await openFaultWorld(workers, {
    TRUSTED_PUBLISHERS: 'guest',
    PUSH_GATEWAY_IP_ALLOWLIST: '127.0.0.1/32',
    NODE_EXTRA_CA_CERTS: ca.caCertFile,
    DELIVERY_LEASE_MS: '3000',
    DELIVERY_PARTITIONS: '8',
    // A `notify` with a reply is answered once secured: while a gateway fails, after this.
    DELIVERY_PERSIST_AFTER_MS: '250',
    DELIVERY_RETRY_BASE_MS: '200',
    DELIVERY_RETRY_MAX_MS: '2000',
    ...env,
  });
  const client = new PushRulesClient({
    url: world.names.amqp.url,
    queue: world.names.queue,
    deliverQueue: `${world.names.queue}.deliver`,
    publisherUserId: 'guest',
    timeoutMs: 30_000,
  });
  return {
    world,
    gateway,
    client,
    seedPushers: async (users) => seed(world.db, gateway, users),
    close: async () => {
      await client.close();
      await world.close();
      await gateway.close();
      await ca.remove();
    },
  };
}

async function seed(db: Db, gateway: PushGatewayDouble, users: readonly string[]): Promise<void> {
  const now = Date.now();
  const docs: PusherDocument[] = users.map((user) => ({
    user_id: user,
    app_id: APP,
    pushkey: `${user}-phone`,
    kind: 'http',
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data_json: JSON.stringify({ url: gateway.notifyUrl }),
    enabled: true,
    ts: now,
  }));
  for (let i = 0; i < docs.length; i += 1000)
    await db.collection<PusherDocument>('pushers').insertMany(docs.slice(i, i + 1000));
  // Into the users' lists, as a worker's start-up moves pushers of this (old) layout.
  await new MongoPushStore(db, { accountDataCollection: 'account_data', pushersCollection: 'pushers' }).ensureIndexes();
}

/** Per device (pushkey), the event IDs it was sent with a 200 answer, in the order they arrived. */
export function deliveredByDevice(requests: readonly RecordedRequest[]): Map<string, string[]> {
  const byDevice = new Map<string, string[]>();
  for (const request of requests) {
    if (request.answer !== 200) continue;
    const event = (request.body as { notification: { event_id?: string } }).notification.event_id ?? '';
    for (const pushkey of request.pushkeys) {
      const list = byDevice.get(pushkey);
      if (list === undefined) byDevice.set(pushkey, [event]);
      else list.push(event);
    }
  }
  return byDevice;
}

/** Each device's events with repeats removed (a duplicate after a crash is allowed), and how many repeats there were. */
export function withoutRepeats(byDevice: Map<string, string[]>): { events: Map<string, string[]>; duplicates: number } {
  let duplicates = 0;
  const events = new Map<string, string[]>();
  for (const [device, list] of byDevice) {
    const unique = list.filter((event, index) => list.indexOf(event) === index);
    duplicates += list.length - unique.length;
    events.set(device, unique);
  }
  return { events, duplicates };
}

/**
 * Writes every worker's log lines and the gateway's requests into a new
 * directory under the system's temporary one (`<prefix>…`), to find out
 * after a run where a delivery went; returns its path.
 */
export async function saveDeliveryLogs(d: DeliveryWorld, prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  for (const [i, worker] of d.world.workers.entries())
    await writeFile(join(dir, `worker-${String(i)}.jsonl`), worker.lines.map((l) => JSON.stringify(l)).join('\n'));
  const requests = d.gateway.requests.map((r) => ({
    at: r.at,
    answer: r.answer,
    pushkeys: r.pushkeys,
    event: (r.body as { notification?: { event_id?: string } } | undefined)?.notification?.event_id,
  }));
  await writeFile(join(dir, 'gateway.jsonl'), requests.map((r) => JSON.stringify(r)).join('\n'));
  return dir;
}
