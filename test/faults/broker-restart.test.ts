import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logLines, openFaultWorld, type FaultWorld } from './support/fault-world.js';
import { ruleWrites, tally } from './support/load.js';
import { services } from './support/services.js';

/**
 * Stop the RabbitMQ application under load and start it again. Workers
 * notice the closed connection, reconnect (at once, then between rounds a
 * backoff capped at 1 s: the default AMQP_RECONNECT_MAX_MS), declare their
 * topology again and consume. The time until they consume again is printed
 * (target 3 s) and held to a generous bound.
 * Callers that retry with the same messageId all succeed, and no write is
 * applied twice.
 */
const USERS = Array.from({ length: 4 }, (_, i) => `@broker${i}:example.org`);
/** The bound this test holds the workers to: serving again within this long after the broker is back. */
const SERVE_AGAIN_WITHIN_MS = 10_000;
let world: FaultWorld;

beforeAll(async () => {
  world = await openFaultWorld(2);
  for (const user of USERS) expect((await world.client.request({ op: 'get_pushrules', user_id: user })).ok).toBe(true);
});
afterAll(async () => {
  await services('start-rabbitmq');
  await world.close();
});

describe('RabbitMQ restarted under load', () => {
  it('workers reconnect and serve again; retrying callers all succeed, each write applied once', async () => {
    // An object, so that the closures' writes are visible to the narrowing.
    const state = { running: true };
    let firstOkAfterRestart: number | undefined;
    let restartedAt = Number.POSITIVE_INFINITY;
    const load = ruleWrites(world.client, USERS, 'b', () => state.running);
    const watcher = (async () => {
      while (state.running) {
        if (Date.now() > restartedAt && firstOkAfterRestart === undefined) {
          const reply = await world.client
            .request({ op: 'get_pushers', user_id: USERS[0] }, { timeoutMs: 1_000 })
            .catch(() => undefined);
          if (reply?.ok === true) firstOkAfterRestart = Date.now();
        }
        await sleep(50);
      }
    })();

    await sleep(1_500);
    const health = world.workers[0]?.healthUrl ?? '';
    const readiness = async () => {
      const response = await fetch(`${health}/readyz`);
      return { status: response.status, body: await response.json() };
    };
    expect(await readiness()).toEqual({ status: 200, body: { consuming: true, database: true, delivery: true } });
    await services('stop-rabbitmq');
    const stoppedAt = Date.now();
    await sleep(1_000);
    // Not ready while the broker is away; alive all along.
    expect(await readiness()).toEqual({ status: 503, body: { consuming: false, database: true, delivery: true } });
    expect((await fetch(`${health}/healthz`)).status).toBe(200);
    await sleep(2_000);
    // From the moment the broker is asked to start: the workers may be in
    // before the script has confirmed that it is up.
    restartedAt = Date.now();
    await services('start-rabbitmq');
    const deadline = restartedAt + SERVE_AGAIN_WITHIN_MS;
    while (logLines(world, 'reconnected to RabbitMQ').length < world.workers.length && Date.now() < deadline)
      await sleep(100);
    await sleep(2_000);
    state.running = false;
    const [outcomes] = await Promise.all([load, watcher]);

    expect(await readiness()).toEqual({ status: 200, body: { consuming: true, database: true, delivery: true } });
    const metrics = await (await fetch(`${health}/metrics`)).text();
    // Two sessions, each re-established once: the request path's and the delivery thread's.
    expect(metrics).toContain('push_worker_amqp_reconnects_total{session="requests"} 1');
    expect(metrics).toContain('push_worker_amqp_reconnects_total{session="delivery"} 1');
    expect(metrics).toMatch(/push_worker_requests_total\{op="set_pushrule",outcome="ok",queue="request"\} [1-9]/);
    // The connection that serves requests (a worker's delivery thread has its own, and its partitions' and router's).
    const reconnects = logLines(world, 'reconnected to RabbitMQ').filter(
      (l) => l['connection'] === 'matrix-push-worker' && l['thread'] !== 'delivery',
    );
    expect(reconnects.map((l) => l['worker']).sort()).toEqual([0, 1]);
    const reconnectMs = reconnects.map((l) => Date.parse(String(l['time'])) - restartedAt);
    expect(firstOkAfterRestart).toBeDefined();
    const serveAgainMs = (firstOkAfterRestart ?? Number.POSITIVE_INFINITY) - restartedAt;
    expect(serveAgainMs).toBeLessThan(SERVE_AGAIN_WITHIN_MS);

    expect(tally(outcomes.map((o) => o.outcome))).toEqual({ ok: outcomes.length });
    for (const user of USERS) {
      const acknowledged = outcomes.filter((o) => o.request.user === user);
      const stored = await world.stored(user);
      expect(stored.ruleIds).toHaveLength(acknowledged.length);
      expect(stored.version).toBe(1 + acknowledged.length);
    }
    const affected = outcomes.filter((o) => o.failedAttempts.length > 0);
    console.info(
      `[fault: broker restart] broker down ${restartedAt - stoppedAt} ms; workers reconnected ${reconnectMs.join(' and ')} ms after it was started; ` +
        `first reply ${serveAgainMs} ms after; ${outcomes.length} writes all ok, ${affected.length} needed retries ` +
        `(${JSON.stringify(tally(affected.flatMap((o) => o.failedAttempts)))}); every write stored once`,
    );
  });
});
