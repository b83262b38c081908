import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import {
  isExported,
  metricNames,
  panelQueries,
  parseExposition,
  readDashboard,
  readRules,
  ruleQueries,
  variableQueries,
  type Exported,
} from '../../scripts/monitoring-queries.js';
import { RpcCaller } from './support/rpc-caller.js';
import { deleteTopology, uniqueNames, type Names } from './support/worker-harness.js';
import {
  startServiceProcess,
  startWorkerProcess,
  stopWorkerProcess,
  workerEnvironment,
  type WorkerProcess,
} from './support/worker-processes.js';

/**
 * The dashboard (ops/grafana/matrix-push-worker.json) and the alert rules
 * (ops/prometheus/alerts.yml) name only metrics that a live worker or a live
 * gateway exports: a renamed or removed metric fails here, not on an
 * operator's blank panel or silent alert.
 */

/** Series Prometheus makes itself for every target. */
const PROMETHEUS_OWN = new Set(['up']);

let names: Names;
let worker: WorkerProcess | undefined;
let gateway: WorkerProcess | undefined;
let gatewayUrl: string;
let caller: RpcCaller | undefined;
const pages: { worker?: Exported; gateway?: Exported; workerText?: string; gatewayText?: string } = {};

beforeAll(async () => {
  names = uniqueNames();
  worker = await startWorkerProcess(workerEnvironment(names));
  const tokens = join(mkdtempSync(join(tmpdir(), 'monitoring-')), 'tokens.json');
  writeFileSync(tokens, JSON.stringify({ 'monitoring-token': '@monitoring:example.org' }));
  gateway = await startServiceProcess(
    'src/gateway-main.ts',
    {
      ...process.env,
      AMQP_URL: names.amqp.url,
      RPC_QUEUE: names.amqp.queue,
      RPC_READ_QUEUE: names.amqp.readQueue,
      AUTH_KIND: 'token-file',
      AUTH_TOKEN_FILE: tokens,
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: '0',
      HEALTH_HOST: '127.0.0.1',
      HEALTH_PORT: '0',
      LOG_LEVEL: 'info',
    },
    'gateway listening',
  );
  gatewayUrl = `http://127.0.0.1:${String(gateway.lines.find((l) => l['msg'] === 'gateway listening')?.['port'])}`;
  caller = await RpcCaller.open(names.amqp.url);
});

afterAll(async () => {
  // Whatever beforeAll got to start.
  await caller?.close();
  await Promise.all([gateway && stopWorkerProcess(gateway, 'SIGKILL'), worker && stopWorkerProcess(worker, 'SIGTERM')]);
  await deleteTopology(names);
  const mongo = new MongoClient(inject('mongoUrl'));
  await mongo.db(names.database).dropDatabase();
  await mongo.close();
});

async function gatewayCall(method: string, path: string, body?: unknown): Promise<number> {
  const response = await fetch(`${gatewayUrl}/_matrix/client/v3${path}`, {
    method,
    headers: {
      authorization: 'Bearer monitoring-token',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  await response.arrayBuffer();
  return response.status;
}

describe('the monitoring files and the metrics the processes export', () => {
  it('every metric the dashboard and the alert rules name is exported by the worker or the gateway', async () => {
    // Traffic, so that labelled counters and histograms have series: reads,
    // a write, a client error, an evaluation.
    expect(await gatewayCall('GET', '/pushrules/')).toBe(200);
    expect(await gatewayCall('PUT', '/pushrules/global/content/pizza', { pattern: 'pizza', actions: ['notify'] })).toBe(
      200,
    );
    expect(await gatewayCall('GET', '/pushrules/global/content/pizza')).toBe(200);
    expect(await gatewayCall('GET', '/pushrules/global/content/nope')).toBe(404);
    const evaluation = await caller?.call(`${names.amqp.queue}.evaluate`, {
      op: 'evaluate',
      event: {
        event_id: '$e',
        type: 'm.room.message',
        room_id: '!room:example.org',
        sender: '@s:example.org',
        content: { msgtype: 'm.text', body: 'pizza?' },
      },
      room: { member_count: 3 },
      recipients: [{ user_id: '@monitoring:example.org' }, { user_id: '@other:example.org' }],
    });
    expect(evaluation?.ok).toBe(true);

    pages.workerText = await (await fetch(`${worker?.healthUrl ?? ''}/metrics`)).text();
    pages.gatewayText = await (await fetch(`${gateway?.healthUrl ?? ''}/metrics`)).text();
    pages.worker = parseExposition(pages.workerText);
    pages.gateway = parseExposition(pages.gatewayText);
    const exported = [pages.worker, pages.gateway];

    const dashboard = readDashboard();
    const queries = [...panelQueries(dashboard), ...variableQueries(dashboard), ...ruleQueries(readRules())];
    expect(queries.length).toBeGreaterThan(40);
    const missing = queries.flatMap((query) =>
      [...metricNames(query.expr)]
        .filter((name) => !PROMETHEUS_OWN.has(name) && !isExported(name, exported))
        .map((name) => `${query.source}: ${name}`),
    );
    expect(missing).toEqual([]);
  });

  it('the worker counts where it evaluated: a request of two recipients on the event loop, its users in its cache', () => {
    const { workerText = '' } = pages;
    expect(workerText).toContain('push_worker_evaluations_total{on="event_loop"} 1');
    expect(workerText).not.toContain('push_worker_evaluations_total{on="thread"}');
    expect(workerText).toMatch(/^push_worker_evaluate_cache_entries 2$/m);
  });

  it('the worker counts its read cache: the read after the write read the store, the one after it did not', () => {
    const { workerText = '' } = pages;
    // get_pushrules (a miss; storing the defaults drops the user), the write (drops them), the rule (a miss), the missing rule (a hit).
    expect(workerText).toMatch(/^push_worker_read_cache_misses_total 2$/m);
    expect(workerText).toMatch(/^push_worker_read_cache_hits_total 1$/m);
    expect(workerText).toMatch(/^push_worker_read_cache_entries 1$/m);
  });

  it('the worker counts its queues on the broker, and both processes export memory and event-loop lag', () => {
    const { worker: workerPage, gateway: gatewayPage, workerText = '' } = pages;
    expect(workerPage).toBeDefined();
    for (const queue of ['request', 'read', 'evaluate', 'deliver', 'dead-letter']) {
      expect(workerText).toMatch(new RegExp(`^push_worker_queue_messages_ready\\{queue="${queue}"\\} \\d+$`, 'm'));
    }
    // This worker consumes its request, read, evaluate and deliver queues.
    for (const queue of ['request', 'read', 'evaluate', 'deliver'])
      expect(workerText).toContain(`push_worker_queue_consumers{queue="${queue}"} 1`);
    for (const page of [workerPage, gatewayPage]) {
      for (const name of [
        'process_resident_memory_bytes',
        'nodejs_eventloop_lag_p99_seconds',
        'nodejs_heap_size_used_bytes',
      ]) {
        expect(page?.samples.has(name), name).toBe(true);
      }
    }
  });
});
