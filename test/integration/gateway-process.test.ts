import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './support/worker-harness.js';
import { startServiceProcess, stopWorkerProcess, type WorkerProcess } from './support/worker-processes.js';

/**
 * `npm run gateway` as a process: configuration from the environment, the
 * token file, health and metrics on their own listener, a request served
 * through the workers, and a clean exit on SIGTERM.
 */
let h: Harness;
let gateway: WorkerProcess;
let url: string;

beforeAll(async () => {
  h = await startHarness();
  const tokens = join(mkdtempSync(join(tmpdir(), 'gateway-')), 'tokens.json');
  writeFileSync(tokens, JSON.stringify({ 'process-token': '@process:example.org' }));
  gateway = await startServiceProcess(
    'src/gateway-main.ts',
    {
      ...process.env,
      AMQP_URL: h.names.amqp.url,
      RPC_QUEUE: h.names.queue,
      RPC_READ_QUEUE: h.names.amqp.readQueue,
      AUTH_KIND: 'token-file',
      AUTH_TOKEN_FILE: tokens,
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: '0',
      HEALTH_HOST: '127.0.0.1',
      HEALTH_PORT: '0',
      LOG_LEVEL: 'debug',
      GATEWAY_RATE_LIMIT_WRITES_PER_SECOND: '1',
      GATEWAY_RATE_LIMIT_BURST: '2',
    },
    'gateway listening',
  );
  const listening = gateway.lines.find((l) => l['msg'] === 'gateway listening');
  url = `http://127.0.0.1:${String(listening?.['port'])}`;
});
afterAll(async () => {
  await stopWorkerProcess(gateway, 'SIGKILL');
  await h.close();
});

describe('the gateway process', () => {
  it('serves through the workers, reports health and metrics, and exits 0 on SIGTERM', async () => {
    const response = await fetch(`${url}/_matrix/client/v3/pushrules/`, {
      headers: { authorization: 'Bearer process-token' },
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ global: { override: expect.any(Array) as unknown } });

    // The rate limit from the environment: two writes at once, not three.
    const writes = [];
    for (let i = 0; i < 3; i += 1) {
      const write = await fetch(`${url}/_matrix/client/v3/pushrules/global/override/.m.rule.master/enabled`, {
        method: 'PUT',
        headers: { authorization: 'Bearer process-token', 'content-type': 'application/json' },
        body: JSON.stringify({ enabled: i % 2 === 0 }),
      });
      writes.push({ status: write.status, retryAfter: write.headers.get('retry-after') });
    }
    expect(writes).toEqual([
      { status: 200, retryAfter: null },
      { status: 200, retryAfter: null },
      { status: 429, retryAfter: '1' },
    ]);

    expect((await fetch(`${gateway.healthUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${gateway.healthUrl}/readyz`);
    expect({ status: ready.status, body: await ready.json() }).toEqual({ status: 200, body: { listening: true } });
    const metrics = await (await fetch(`${gateway.healthUrl}/metrics`)).text();
    expect(metrics).toMatch(
      /push_gateway_http_requests_total\{route="\/_matrix\/client\/v3\/pushrules\/",method="GET",status="200"\} 1/,
    );
    expect(metrics).toContain('push_gateway_http_requests_in_flight 0');
    expect(metrics).toContain('push_gateway_rate_limited_total 1');
    expect(metrics).toContain('push_gateway_overloaded_total 0');

    expect(await stopWorkerProcess(gateway, 'SIGTERM')).toBe(0);
    expect(gateway.lines.map((l) => l['msg'])).toContain('stopped');
  });
});
