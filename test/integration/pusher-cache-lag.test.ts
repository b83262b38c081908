import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PushRulesClient, type NotifyNotification } from '../../src/client/push-rules-client.js';
import type { PusherSetAction } from '../../src/pushers/pusher.js';
import { PushGatewayDouble } from '../support/push-gateway-double.js';
import { brokerUser } from './support/delivery-harness.js';
import { backlogOfEvents, EVENT_BACKLOG } from './support/event-backlog.js';
import { deleteTopology, uniqueNames, type Names } from './support/worker-harness.js';
import {
  startWorkerProcess,
  stopWorkerProcess,
  workerEnvironment,
  type WorkerProcess,
} from './support/worker-processes.js';

/**
 * A worker process delivers on a thread of its own, which hears of pusher
 * writes only through the change events, even those its own main thread
 * served. A phone moves from Alice's account to Bob's while that thread is
 * far behind on its events: the next `notify` for Alice must not reach the
 * phone, though the thread kept Alice's list, with the phone, in its cache.
 */
const ALICE = '@alice:example.org';
const BOB = '@bob:example.org';
const WAIT_MS = 60_000;
/** The thread goes through its backlog in 3–22 s (a quiet machine; CI): what Alice's notify may wait for. */
const BACKLOG_WAIT_MS = 150_000;

const aMessage = (n: number): NotifyNotification => ({
  event_id: `$lag${String(n)}`,
  room_id: '!room:example.org',
  type: 'm.room.message',
  sender: '@dave:example.org',
});
const notified = (userId: string) => [{ user_id: userId, actions: ['notify'], counts: { unread: 1 } }];

describe('a pusher write answered while delivery is behind on change events', () => {
  let names: Names;
  let gateway: PushGatewayDouble;
  let worker: WorkerProcess;
  let client: PushRulesClient;

  beforeAll(async () => {
    names = uniqueNames();
    gateway = await PushGatewayDouble.start();
    worker = await startWorkerProcess(
      workerEnvironment(names, {
        TRUSTED_PUBLISHERS: brokerUser(),
        PUSH_GATEWAY_IP_ALLOWLIST: '127.0.0.1/32',
        ALLOW_INSECURE_PUSH_GATEWAYS: 'true',
        DELIVERY_LEASE_MS: '3000',
        // Long enough for the worker to be paused while a backlog of events is published.
        AMQP_HEARTBEAT_SECONDS: '120',
        // A `notify` is answered once its parts are taken in, however long the thread takes over its backlog.
        DELIVERY_REPLY_WAIT_MS: String(BACKLOG_WAIT_MS),
        LOG_LEVEL: 'info',
      }),
    );
    client = new PushRulesClient({
      url: names.amqp.url,
      queue: names.amqp.queue,
      readQueue: names.amqp.readQueue,
      deliverQueue: `${names.amqp.queue}.deliver`,
      publisherUserId: brokerUser(),
      timeoutMs: WAIT_MS,
    });
  });

  afterAll(async () => {
    await client.close();
    expect(await stopWorkerProcess(worker, 'SIGTERM')).toBe(0);
    await gateway.close();
    const mongo = await MongoClient.connect(inject('mongoUrl'));
    await mongo.db(names.database).dropDatabase();
    await mongo.close();
    await deleteTopology(names);
  });

  it("sends the first user's next notification to nobody: the phone is the second user's", async () => {
    const phone = {
      kind: 'http',
      app_id: 'org.example.app',
      pushkey: 'moved-phone',
      app_display_name: 'App',
      device_display_name: 'Phone',
      lang: 'en',
      data: { url: gateway.notifyUrl },
    } satisfies PusherSetAction;
    await client.setPusher(ALICE, phone);
    // Delivered once: the delivery thread now keeps Alice's list, with the phone.
    expect(await client.notify(aMessage(1), notified(ALICE), { reply: true, timeoutMs: WAIT_MS })).toEqual({
      recipients: 1,
      devices: 1,
    });
    await gateway.waitForRequests(1, WAIT_MS);
    gateway.clearRequests();

    // More than the read cache's test needs: a `notify` goes through more hops (the router, a
    // partition queue) before its pushers are looked up, each behind the thread's events.
    await backlogOfEvents(names, [worker], 'm.pushers', 3 * EVENT_BACKLOG);
    const backlogAt = performance.now();
    await client.setPusher(BOB, phone);
    expect(await client.notify(aMessage(2), notified(ALICE), { reply: true, timeoutMs: BACKLOG_WAIT_MS })).toEqual({
      recipients: 0,
      devices: 0,
    });
    console.log(
      `[pusher-cache-lag] Alice's notify answered ${String(Math.round(performance.now() - backlogAt))} ms after the backlog was published`,
    );
    // Bob's next notification is the phone's first since it moved.
    expect(await client.notify(aMessage(3), notified(BOB), { reply: true, timeoutMs: WAIT_MS })).toEqual({
      recipients: 1,
      devices: 1,
    });
    const [request] = await gateway.waitForRequests(1, WAIT_MS);
    expect((request?.body as { notification: { event_id: string } }).notification.event_id).toBe('$lag3');
    expect(gateway.requests).toHaveLength(1);
  }, 300_000);
});
