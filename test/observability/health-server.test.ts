import { afterEach, describe, expect, it } from 'vitest';
import { HealthServer, type ReadinessProbes } from '../../src/observability/health-server.js';
import { WorkerMetrics } from '../../src/observability/metrics.js';

let server: HealthServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function serve(probes: ReadinessProbes = {}, metrics = new WorkerMetrics(() => 3, { processMetrics: false })) {
  server = new HealthServer({
    host: '127.0.0.1',
    port: 0,
    probes: { consuming: () => true, database: async () => Promise.resolve(true), ...probes },
    metrics: async () => ({ contentType: metrics.registry.contentType, body: await metrics.registry.metrics() }),
  });
  const port = await server.listen();
  return async (path: string, method = 'GET') => fetch(`http://127.0.0.1:${port}${path}`, { method });
}

describe('health server', () => {
  it('/healthz answers 200 whatever the dependencies say', async () => {
    const get = await serve({ consuming: () => false, database: async () => Promise.resolve(false) });
    expect((await get('/healthz')).status).toBe(200);
  });

  it.each([
    [true, true, 200],
    [false, true, 503],
    [true, false, 503],
    [false, false, 503],
  ])(
    '/readyz with consuming=%s and database=%s answers %i and says what is missing',
    async (consuming, database, status) => {
      const get = await serve({ consuming: () => consuming, database: async () => Promise.resolve(database) });
      const response = await get('/readyz');
      expect(response.status).toBe(status);
      expect(await response.json()).toEqual({ consuming, database });
    },
  );

  it('/metrics answers Prometheus text; unknown paths 404; writes 405', async () => {
    const get = await serve();
    const metrics = await get('/metrics');
    expect(metrics.headers.get('content-type')).toContain('text/plain');
    expect(await metrics.text()).toContain('push_worker_requests_in_flight 3');
    expect((await get('/nope')).status).toBe(404);
    expect((await get('/healthz', 'POST')).status).toBe(405);
  });

  it('close() stops listening, and closing again is the same close', async () => {
    const get = await serve();
    expect((await get('/healthz')).status).toBe(200);
    const closing = server;
    await Promise.all([closing?.close(), closing?.close()]);
    await closing?.close();
    await expect(get('/healthz')).rejects.toThrow(/fetch failed/);
  });
});

describe('worker metrics', () => {
  it('counts requests by op and outcome, conflicts, retries, redeliveries, replays, unchanged writes, deadlines passed and reconnects', async () => {
    const metrics = new WorkerMetrics(() => 0, { processMetrics: false });
    const base = {
      queue: 'request',
      seconds: 0.002,
      conflicts: 0,
      redelivered: false,
      replayed: false,
      unchanged: false,
      deadlinePassed: false,
    };
    metrics.requestSettled({ ...base, op: 'set_pushrule', outcome: 'ok', conflicts: 2 });
    metrics.requestSettled({ ...base, op: 'set_pushrule', outcome: 'ok', redelivered: true, replayed: true });
    metrics.requestSettled({ ...base, op: 'set_pushrule', outcome: 'Unavailable', conflicts: 12 });
    metrics.requestSettled({ ...base, op: 'unknown', outcome: 'dead-lettered' });
    metrics.requestSettled({ ...base, op: 'set_pushrule_enabled', outcome: 'ok', unchanged: true });
    metrics.requestSettled({ ...base, op: 'get_pushrule_enabled', outcome: 'ok', queue: 'read' });
    metrics.requestSettled({ ...base, op: 'set_pushrule', outcome: 'Unavailable', deadlinePassed: true });
    metrics.reconnected();
    const text = await metrics.registry.metrics();
    expect(text).toContain('push_worker_requests_total{op="set_pushrule",outcome="ok",queue="request"} 2');
    expect(text).toContain('push_worker_requests_total{op="set_pushrule",outcome="Unavailable",queue="request"} 2');
    expect(text).toContain('push_worker_deadline_passed_total{op="set_pushrule",queue="request"} 1');
    expect(text).toContain('push_worker_requests_total{op="unknown",outcome="dead-lettered",queue="request"} 1');
    expect(text).toContain('push_worker_requests_total{op="get_pushrule_enabled",outcome="ok",queue="read"} 1');
    expect(text).toContain('push_worker_cas_conflicts_total 14');
    // The spent budget's last conflict was not retried.
    expect(text).toContain('push_worker_cas_retries_total 13');
    expect(text).toContain('push_worker_redeliveries_total 1');
    expect(text).toContain('push_worker_replayed_writes_total 1');
    expect(text).toContain('push_worker_unchanged_writes_total 1');
    expect(text).toContain('push_worker_amqp_reconnects_total{session="requests"} 1');
    expect(text).toContain('push_worker_request_duration_seconds_count{op="set_pushrule"} 4');
  });

  it('counts store operations not started or given up, by operation and reason', async () => {
    const metrics = new WorkerMetrics(() => 0, { processMetrics: false });
    metrics.storeOperationAbandoned('loadPushRules', 'not-started');
    metrics.storeOperationAbandoned('loadPushRules', 'not-started');
    metrics.storeOperationAbandoned('savePushRules', 'deadline');
    metrics.storeOperationAbandoned('listPushers', 'timeout');
    const text = await metrics.registry.metrics();
    expect(text).toContain(
      'push_worker_store_operations_abandoned_total{operation="loadPushRules",reason="not-started"} 2',
    );
    expect(text).toContain(
      'push_worker_store_operations_abandoned_total{operation="savePushRules",reason="deadline"} 1',
    );
    expect(text).toContain('push_worker_store_operations_abandoned_total{operation="listPushers",reason="timeout"} 1');
  });
});
