import { BroadcastChannel } from 'node:worker_threads';
import { MongoClient } from 'mongodb';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { PushRulesClient } from '../../src/client/push-rules-client.js';
import { WORKER_ROLES } from '../../src/config/worker-roles.js';
import { eventually } from '../support/eventually.js';
import { PushGatewayDouble } from '../support/push-gateway-double.js';
import { brokerUser, startDeliveringWorker, type DeliveringWorker } from './support/delivery-harness.js';
import { deleteTopology, uniqueNames, type Names } from './support/worker-harness.js';
import {
  startWorkerProcess,
  stopWorkerProcess,
  workerEnvironment,
  type WorkerProcess,
} from './support/worker-processes.js';

/**
 * Delivery on a thread of its own (docs/delivery.md#its-own-thread): a
 * worker of every role delivers through it, shows it in `/readyz` and
 * `/metrics`, writes its log lines, closes it at SIGTERM with its leases
 * released, and replaces it when it fails, losing no push.
 */
const ALICE = '@alice:example.org';
const WAIT_MS = 60_000;
const NOTIFICATION = {
  event_id: '$thread',
  room_id: '!room:example.org',
  type: 'm.room.message',
  sender: '@dave:example.org',
};
const pusherAt = (url: string) => ({
  kind: 'http' as const,
  app_id: 'org.example.app',
  pushkey: 'alice-phone',
  app_display_name: 'App',
  device_display_name: 'Phone',
  lang: 'en',
  data: { url },
});
const toAlice = [{ user_id: ALICE, actions: ['notify'], counts: { unread: 1 } }];

/** The value of one sample of the exposition: `name{labels}` as written, or a bare name. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('a worker process of every role, SIGTERM at the end', () => {
  let names: Names;
  let gateway: PushGatewayDouble;
  let worker: WorkerProcess | undefined;
  let client: PushRulesClient | undefined;
  let mongo: MongoClient | undefined;

  afterEach(async () => {
    await client?.close();
    if (worker !== undefined) await stopWorkerProcess(worker, 'SIGKILL');
    await gateway.close();
    await mongo?.db(names.database).dropDatabase();
    await mongo?.close();
    await deleteTopology(names).catch(() => undefined);
  });

  it('delivers through its delivery thread, shows the thread in /readyz and /metrics, and stops with its leases released', async () => {
    names = uniqueNames();
    gateway = await PushGatewayDouble.start();
    const deliverQueue = `${names.amqp.queue}.deliver`;
    worker = await startWorkerProcess(
      workerEnvironment(names, {
        TRUSTED_PUBLISHERS: brokerUser(),
        PUSH_GATEWAY_IP_ALLOWLIST: '127.0.0.1/32',
        ALLOW_INSECURE_PUSH_GATEWAYS: 'true',
        DELIVERY_LEASE_MS: '3000',
      }),
    );
    const { healthUrl, lines } = worker;
    client = new PushRulesClient({
      url: names.amqp.url,
      queue: names.amqp.queue,
      readQueue: names.amqp.readQueue,
      deliverQueue,
      publisherUserId: brokerUser(),
      timeoutMs: 30_000,
    });
    await client.setPusher(ALICE, pusherAt(gateway.notifyUrl));
    expect(await client.notify(NOTIFICATION, toAlice, { reply: true, timeoutMs: WAIT_MS })).toEqual({
      recipients: 1,
      devices: 1,
    });
    expect((await gateway.waitForRequests(1, WAIT_MS))[0]?.pushkeys).toEqual(['alice-phone']);

    const ready = await fetch(`${healthUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ consuming: true, database: true, delivery: true });
    await eventually(async () => {
      const text = await (await fetch(`${healthUrl}/metrics`)).text();
      // The thread's: delivery's own, and the `notify` it served; the main thread's: the process, the writes.
      expect(text).toMatch(/^push_worker_delivery_devices_total\{host="127\.0\.0\.1:\d+",outcome="delivered"\} 1$/m);
      expect(sample(text, 'push_worker_delivery_partitions')).toBe(4);
      expect(sample(text, 'push_worker_queue_consuming{queue="deliver"}')).toBe(1);
      expect(sample(text, 'push_worker_queue_consuming{queue="request"}')).toBe(1);
      expect(text).toMatch(/^push_worker_requests_total\{op="notify",outcome="ok",queue="deliver"\} 1$/m);
      expect(text).toMatch(/^push_worker_requests_total\{op="set_pusher",outcome="ok",queue="request"\} 1$/m);
      expect(sample(text, 'process_start_time_seconds')).toBeGreaterThan(0);
    }, WAIT_MS);
    // Its log lines are the process's, on the same stdout, told apart by the thread.
    const delivering = lines.filter((line) => line['msg'] === 'delivering a partition');
    expect(delivering).toHaveLength(4);
    for (const line of delivering)
      expect(line).toMatchObject({ name: 'matrix-push-worker', thread: 'delivery', pid: worker.child.pid });

    expect(await stopWorkerProcess(worker, 'SIGTERM')).toBe(0);
    // Both broker sessions closed: the delivery thread's (its `notify` consumer) and the main thread's.
    expect(
      lines
        .filter((line) => line['msg'] === 'worker closed')
        .map((line) => line['thread'] ?? 'main')
        .sort(),
    ).toEqual(['delivery', 'main']);
    expect(lines.at(-1)).toMatchObject({ msg: 'stopped' });
    mongo = new MongoClient(inject('mongoUrl'));
    const db = mongo.db(names.database);
    const prefix = 'push_deliveries';
    expect(await db.collection(`${prefix}_partitions`).countDocuments({ owner: { $ne: null } })).toBe(0);
    expect(await db.collection(`${prefix}_workers`).countDocuments()).toBe(0);
  }, 120_000);
});

describe('a delivery thread that fails', () => {
  let h: DeliveringWorker | undefined;
  let gateway: PushGatewayDouble;
  const faults = new BroadcastChannel('delivery-thread-faults');

  afterEach(async () => {
    faults.close();
    await h?.close();
    await gateway.close();
  });

  it('is logged with its error and replaced, the requests served meanwhile, and the notify sent meanwhile delivered', async () => {
    gateway = await PushGatewayDouble.start();
    h = await startDeliveringWorker({
      roles: WORKER_ROLES,
      hooks: { deliveryThread: new URL('./support/crashable-delivery-thread.ts', import.meta.url) },
    });
    const healthUrl = h.first.healthUrl ?? '';
    await h.client.setPusher(ALICE, pusherAt(gateway.notifyUrl));
    await h.client.notify({ ...NOTIFICATION, event_id: '$before' }, toAlice, { reply: true, timeoutMs: WAIT_MS });
    await gateway.waitForRequests(1, WAIT_MS);

    faults.postMessage('crash');
    await eventually(() => {
      expect(h?.logs.map((line) => JSON.parse(line) as Record<string, unknown>)).toContainEqual(
        expect.objectContaining({
          level: 50,
          msg: 'the delivery thread stopped; starting another (its partitions are taken again once their leases lapse)',
          err: expect.objectContaining({ message: 'TEST-ONLY: the delivery thread crashes' }) as unknown,
        }),
      );
    }, WAIT_MS);
    // The request path never stopped.
    expect(await h.client.getPushers(ALICE)).toMatchObject({ pushers: [{ pushkey: 'alice-phone' }] });

    // Sent while the partitions wait for their leases to lapse: delivered by the thread that replaced it.
    expect(
      await h.client.notify({ ...NOTIFICATION, event_id: '$after' }, toAlice, { reply: true, timeoutMs: WAIT_MS }),
    ).toEqual({ recipients: 1, devices: 1 });
    const requests = await gateway.waitForRequests(2, WAIT_MS);
    expect(
      requests.map((request) => (request.body as { notification?: { event_id?: string } }).notification?.event_id),
    ).toEqual(['$before', '$after']);
    await eventually(async () => {
      const ready = await fetch(`${healthUrl}/readyz`);
      expect(await ready.json()).toEqual({ consuming: true, database: true, delivery: true });
    }, WAIT_MS);
  }, 120_000);
});
