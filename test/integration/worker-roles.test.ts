import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EvaluationRecipient } from '../../src/client/push-rules-client.js';
import type { WorkerRole } from '../../src/config/worker-roles.js';
import { eventually } from '../support/eventually.js';
import { PushGatewayDouble } from '../support/push-gateway-double.js';
import { startDeliveringWorker, type DeliveringWorker, type StartedWorker } from './support/delivery-harness.js';

/**
 * A pool of one worker per role (docs/operations.md#running-by-role), on
 * the same queues and database: each consumes, answers, measures and
 * takes partitions for its own role only.
 */
const ALICE = '@alice:example.org';
const WAIT_MS = 60_000;
const EVENT = {
  event_id: '$roles',
  type: 'm.room.message',
  room_id: '!room:example.org',
  sender: '@dave:example.org',
  content: { msgtype: 'm.text', body: 'hello' },
};
const ROOM = { member_count: 2, sender_power_level: 0, notification_power_levels: { room: 50 } };
const RECIPIENTS: EvaluationRecipient[] = [{ user_id: ALICE }];

/** The queue each role consumes, as `push_worker_queue_consuming` labels it. */
const QUEUE_OF: Readonly<Record<WorkerRole, string>> = {
  rpc: 'request',
  read: 'read',
  evaluate: 'evaluate',
  deliver: 'deliver',
};

async function metricsOf(worker: StartedWorker): Promise<string> {
  return (await fetch(`${worker.healthUrl ?? ''}/metrics`)).text();
}

/** The labels and values of one metric's samples: `{ 'queue="request"': 1, … }`. */
function samples(text: string, name: string): Record<string, number> {
  const found: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`).exec(line);
    if (match !== null) found[match[1] as string] = Number(match[2]);
  }
  return found;
}

/** Requests the worker settled, by op and queue (`op=…,queue=…`), whatever their outcome. */
function settled(text: string): Record<string, number> {
  const byOpAndQueue: Record<string, number> = {};
  for (const [labels, value] of Object.entries(samples(text, 'push_worker_requests_total'))) {
    const op = /op="([^"]*)"/.exec(labels)?.[1];
    const queue = /queue="([^"]*)"/.exec(labels)?.[1];
    const key = `${op ?? ''}@${queue ?? ''}`;
    byOpAndQueue[key] = (byOpAndQueue[key] ?? 0) + value;
  }
  return byOpAndQueue;
}

describe('workers by role: each serves only the queues of its roles', () => {
  let gateway: PushGatewayDouble;
  let h: DeliveringWorker;
  const workers = new Map<WorkerRole, StartedWorker>();

  beforeAll(async () => {
    gateway = await PushGatewayDouble.start();
    // The deliver-only worker first: nothing else declares the request queue yet.
    h = await startDeliveringWorker({ roles: ['deliver'] });
    workers.set('deliver', h.first);
  });

  afterAll(async () => {
    await h.close();
    await gateway.close();
  });

  it('a deliver-only worker never answers get_pushrules: it does not even declare the request queue', async () => {
    await expect(h.client.getPushRules(ALICE, { timeoutMs: 5_000 })).rejects.toMatchObject({ reason: 'unroutable' });
  });

  it('starts one worker of each other role, each ready on its own queues', async () => {
    for (const role of ['rpc', 'read', 'evaluate'] as const) workers.set(role, await h.startAnother([role]));
    for (const [role, worker] of workers) {
      await eventually(async () => {
        expect((await fetch(`${worker.healthUrl ?? ''}/readyz`)).status).toBe(200);
        const text = await metricsOf(worker);
        expect(samples(text, 'push_worker_queue_consuming')).toEqual({ [`queue="${QUEUE_OF[role]}"`]: 1 });
      }, WAIT_MS);
      const text = await metricsOf(worker);
      expect(samples(text, 'push_worker_role')).toEqual({
        'role="rpc"': role === 'rpc' ? 1 : 0,
        'role="read"': role === 'read' ? 1 : 0,
        'role="evaluate"': role === 'evaluate' ? 1 : 0,
        'role="deliver"': role === 'deliver' ? 1 : 0,
      });
      // Delivery's metrics are the deliver worker's alone.
      expect(text.includes('push_worker_delivery_'), role).toBe(role === 'deliver');
    }
  });

  it('serves each kind of request on the worker of its role, and delivers on the deliver worker alone', async () => {
    await h.client.setPusher(ALICE, {
      kind: 'http',
      app_id: 'org.example.app',
      pushkey: 'alice-phone',
      app_display_name: 'App',
      device_display_name: 'Phone',
      lang: 'en',
      data: { url: gateway.notifyUrl },
    });
    // Answered: by the evaluate worker, the metrics below say.
    await h.client.evaluate(EVENT, ROOM, RECIPIENTS);
    // Reads go to the read queue once the client has seen its consumer.
    await eventually(async () => {
      await h.client.getPushRules(ALICE);
      expect(settled(await metricsOf(workers.get('read') as StartedWorker))['get_pushrules@read']).toBeGreaterThan(0);
    }, WAIT_MS);
    const reply = await h.client.notify(
      { event_id: '$roles', room_id: '!room:example.org', type: 'm.room.message', sender: '@dave:example.org' },
      [{ user_id: ALICE, actions: ['notify'], counts: { unread: 1 } }],
      { reply: true },
    );
    expect(reply).toEqual({ recipients: 1, devices: 1 });
    const [pushed] = await gateway.waitForRequests(1, WAIT_MS);
    expect(pushed?.pushkeys).toEqual(['alice-phone']);

    // Each worker settled requests of its own queue only (a read sent before the client saw the read
    // queue's consumer goes to the request queue, the rpc worker's).
    const expected: Readonly<Record<WorkerRole, string>> = {
      rpc: 'set_pusher@request',
      read: 'get_pushrules@read',
      evaluate: 'evaluate@evaluate',
      deliver: 'notify@deliver',
    };
    for (const [role, worker] of workers) {
      const ops = Object.keys(settled(await metricsOf(worker)));
      expect(ops, role).toContain(expected[role]);
      expect(
        ops.filter((op) => !op.endsWith(`@${QUEUE_OF[role]}`)),
        role,
      ).toEqual([]);
    }
  });

  it('shares the partitions out among the deliver workers only: no other worker beats a heartbeat', async () => {
    const beating = await h.db.collection(`${h.config.delivery.pendingCollection}_workers`).find({}).toArray();
    expect(beating).toHaveLength(1);
    await eventually(async () => {
      const held = /^push_worker_delivery_partitions (\d+)$/m.exec(await metricsOf(h.first))?.[1];
      expect(held).toBe(String(h.config.delivery.partitions));
    }, WAIT_MS);
  });
});
