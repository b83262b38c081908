import { request as httpRequest } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { Authenticator } from '../../src/gateway/authenticator.js';
import { GatewayMetrics } from '../../src/gateway/gateway-metrics.js';
import {
  CORS_HEADERS,
  REFUSAL_LOG_INTERVAL_MS,
  type GatewayObserver,
  type GatewayServerOptions,
} from '../../src/gateway/gateway-server.js';
import { TokenFileAuthenticator } from '../../src/gateway/token-file-authenticator.js';
import {
  ALICE,
  auth,
  gateway,
  recordingApi,
  RULE_PATH,
  TOKEN,
  useGatewayServers,
} from '../support/gateway-server-world.js';

// The write rate limit and the in-flight cap: how the gateway refuses what is
// too much, and serves again once it is not.

useGatewayServers();

describe('gateway write rate limit', () => {
  const BOB = '@bob:example.org';
  const tokens = new TokenFileAuthenticator({ [TOKEN]: ALICE, 'bob-token': BOB });
  const v3 = (path: string) => `/_matrix/client/v3/${path}`;
  const put = { method: 'PUT', url: v3(`${RULE_PATH}/enabled`), payload: { enabled: true } } as const;
  const WRITES = [
    put,
    { method: 'PUT', url: v3(RULE_PATH), payload: { actions: [] } },
    { method: 'PUT', url: v3(`${RULE_PATH}/actions`), payload: { actions: ['notify'] } },
    { method: 'DELETE', url: v3(RULE_PATH) },
    { method: 'POST', url: v3('pushers/set'), payload: { pushkey: 'k', app_id: 'a', kind: null } },
  ] as const;
  const READS = [
    'pushrules/',
    'pushrules/global/',
    RULE_PATH,
    `${RULE_PATH}/actions`,
    `${RULE_PATH}/enabled`,
    'pushers',
  ].map((path) => ({ method: 'GET', url: v3(path) }) as const);

  function limited(
    writeRateLimit: { perSecond: number; burst: number; maxUsers?: number },
    more: Partial<GatewayServerOptions> = {},
  ) {
    const clock = { now: 5_000 };
    const recorded = recordingApi();
    const server = gateway(recorded.api, tokens, {
      writeRateLimit: { maxUsers: 100, ...writeRateLimit },
      now: () => clock.now,
      ...more,
    });
    const as = (token: string) => ({ authorization: `Bearer ${token}` });
    return { server, clock, calls: recorded.calls, as };
  }

  it.each([
    [1, 1, 1000],
    [2, 3, 500],
    [3, 5, 334],
    [10, 50, 100],
  ])(
    '%i writes/s, burst %i: the write after the burst gets 429 M_LIMIT_EXCEEDED, retry_after_ms %i and Retry-After, and no call',
    async (perSecond, burst, retryAfterMs) => {
      const { server, calls, as } = limited({ perSecond, burst });
      for (let i = 0; i < burst; i += 1) {
        const write = WRITES[i % WRITES.length] ?? put;
        expect((await server.inject({ ...write, headers: as(TOKEN) })).statusCode).toBe(200);
      }
      const refused = await server.inject({ ...put, headers: as(TOKEN) });
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toEqual({
        errcode: 'M_LIMIT_EXCEEDED',
        error: 'Too many changes to push rules and pushers; try again later.',
        retry_after_ms: retryAfterMs,
      });
      expect(refused.headers['retry-after']).toBe(String(Math.ceil(retryAfterMs / 1000)));
      expect(refused.headers['access-control-expose-headers']).toBe('Retry-After');
      expect(refused.headers).toMatchObject(CORS_HEADERS);
      expect(calls).toHaveLength(burst);
    },
  );

  it.each(WRITES.map((w) => [w.method, w.url, w] as const))('limits %s %s', async (_method, _url, write) => {
    const { server, calls, as } = limited({ perSecond: 1, burst: 1 });
    expect((await server.inject({ ...write, headers: as(TOKEN) })).statusCode).toBe(200);
    expect((await server.inject({ ...write, headers: as(TOKEN) })).statusCode).toBe(429);
    expect(calls).toHaveLength(1);
  });

  it('limits each user on their own: Bob writes while Alice waits', async () => {
    const { server, as } = limited({ perSecond: 1, burst: 2 });
    const statuses = [];
    for (const token of [TOKEN, TOKEN, TOKEN, 'bob-token', 'bob-token', 'bob-token'])
      statuses.push((await server.inject({ ...put, headers: as(token) })).statusCode);
    expect(statuses).toEqual([200, 200, 429, 200, 200, 429]);
  });

  it('does not limit reads, nor count them', async () => {
    const { server, calls, as } = limited({ perSecond: 1, burst: 1 });
    expect((await server.inject({ ...put, headers: as(TOKEN) })).statusCode).toBe(200);
    expect((await server.inject({ ...put, headers: as(TOKEN) })).statusCode).toBe(429);
    for (const read of [...READS, ...READS])
      expect((await server.inject({ ...read, headers: as(TOKEN) })).statusCode).toBe(200);
    expect(calls).toHaveLength(1 + 2 * READS.length);
  });

  it('does not count what never reaches the workers (no token, wrong method, no body)', async () => {
    const { server, as } = limited({ perSecond: 1, burst: 1 });
    expect((await server.inject({ ...put, headers: as('stolen') })).statusCode).toBe(401);
    expect((await server.inject({ method: 'DELETE', url: v3('pushers'), headers: as(TOKEN) })).statusCode).toBe(405);
    expect((await server.inject({ method: 'POST', url: v3('pushers/set'), headers: as(TOKEN) })).statusCode).toBe(400);
    expect((await server.inject({ ...put, headers: as(TOKEN) })).statusCode).toBe(200);
  });

  it('lets the write through once retry_after_ms has passed, and not a millisecond sooner', async () => {
    const { server, clock, calls, as } = limited({ perSecond: 3, burst: 2 });
    await server.inject({ ...put, headers: as(TOKEN) });
    await server.inject({ ...put, headers: as(TOKEN) });
    const refused = await server.inject({ ...put, headers: as(TOKEN) });
    const retryAfterMs = refused.json<{ retry_after_ms: number }>().retry_after_ms;
    expect(retryAfterMs).toBe(334);
    clock.now += retryAfterMs - 1;
    expect(await server.inject({ ...put, headers: as(TOKEN) })).toMatchObject({ statusCode: 429 });
    clock.now += 1;
    expect(await server.inject({ ...put, headers: as(TOKEN) })).toMatchObject({ statusCode: 200 });
    expect(calls).toHaveLength(3);
  });

  it('never limits with writesPerSecond 0', async () => {
    const { server, calls, as } = limited({ perSecond: 0, burst: 1 });
    for (let i = 0; i < 200; i += 1) expect((await server.inject({ ...put, headers: as(TOKEN) })).statusCode).toBe(200);
    expect(calls).toHaveLength(200);
  });

  it('never limits without a writeRateLimit', async () => {
    const { api, calls } = recordingApi();
    const server = gateway(api);
    for (let i = 0; i < 200; i += 1) expect((await server.inject({ ...put, headers: auth })).statusCode).toBe(200);
    expect(calls).toHaveLength(200);
  });

  it('counts refusals in push_gateway_rate_limited_total', async () => {
    const metrics = new GatewayMetrics({ processMetrics: false });
    const { server, as } = limited({ perSecond: 1, burst: 1 }, { observer: metrics });
    for (let i = 0; i < 4; i += 1) await server.inject({ ...put, headers: as(TOKEN) });
    const text = await metrics.registry.metrics();
    expect(text).toContain('push_gateway_rate_limited_total 3');
    expect(text).toMatch(/push_gateway_http_requests_total\{route="[^"]+\/enabled",method="PUT",status="429"\} 3/);
  });

  it(`logs refusals at info, at most one line per ${REFUSAL_LOG_INTERVAL_MS} ms, with how many it held back`, async () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    const { server, clock, as } = limited({ perSecond: 1, burst: 1 }, { logger: pino({ level: 'info' }, sink) });
    const refusals = () => lines.filter((l) => l['msg'] === 'write rate limit reached: answering 429');
    await server.inject({ ...put, headers: as(TOKEN) });
    for (let i = 0; i < 5; i += 1) await server.inject({ ...put, headers: as(TOKEN) });
    expect(refusals()).toEqual([
      expect.objectContaining({ level: 30, userId: ALICE, retryAfterMs: 1000, heldBack: 0 }),
    ]);
    clock.now += REFUSAL_LOG_INTERVAL_MS;
    await server.inject({ ...put, headers: as(TOKEN) });
    await server.inject({ ...put, headers: as(TOKEN) });
    expect(refusals()).toHaveLength(2);
    expect(refusals()[1]).toMatchObject({ heldBack: 4, retryAfterMs: 1000 });
  });
});

describe('gateway in-flight cap', () => {
  const v3 = (path: string) => `/_matrix/client/v3/${path}`;

  /** An api whose getPushers calls stay open until `releaseAll`. */
  function heldApi() {
    const held: (() => void)[] = [];
    const recorded = recordingApi({
      getPushers: async () =>
        new Promise((resolve) => {
          held.push(() => {
            resolve({ pushers: [] });
          });
        }),
    });
    const releaseAll = () => {
      for (const release of held.splice(0)) release();
    };
    const untilHeld = async (count: number) => {
      while (held.length < count) await new Promise((resolve) => setImmediate(resolve));
    };
    return { ...recorded, held, releaseAll, untilHeld };
  }

  it('answers 503 M_UNKNOWN with Retry-After past maxInFlight, without calling anything, and serves again once requests finish', async () => {
    const { api, calls, releaseAll, untilHeld } = heldApi();
    const metrics = new GatewayMetrics({ processMetrics: false });
    const authCalls: string[] = [];
    const authenticator: Authenticator = {
      authenticate: async (token) => {
        authCalls.push(token);
        return Promise.resolve({ userId: ALICE });
      },
    };
    const server = gateway(api, authenticator, { maxInFlight: 3, observer: metrics });
    const pending = [1, 2, 3].map(async () => server.inject({ method: 'GET', url: v3('pushers'), headers: auth }));
    await untilHeld(3);
    expect(await metrics.registry.metrics()).toContain('push_gateway_http_requests_in_flight 3');

    for (const refused of [
      await server.inject({ method: 'GET', url: v3('pushrules/'), headers: auth }),
      await server.inject({
        method: 'PUT',
        url: v3(`${RULE_PATH}/enabled`),
        headers: auth,
        payload: { enabled: true },
      }),
      await server.inject({ method: 'OPTIONS', url: v3('pushers') }),
    ]) {
      expect(refused.statusCode).toBe(503);
      expect(refused.json()).toEqual({ errcode: 'M_UNKNOWN', error: 'The server is busy; try again.' });
      expect(refused.headers['retry-after']).toBe('1');
      expect(refused.headers).toMatchObject(CORS_HEADERS);
    }
    expect(calls).toHaveLength(3);
    expect(authCalls).toHaveLength(3);

    releaseAll();
    expect((await Promise.all(pending)).map((r) => r.statusCode)).toEqual([200, 200, 200]);
    expect((await server.inject({ method: 'GET', url: v3('pushrules/'), headers: auth })).statusCode).toBe(200);
    const text = await metrics.registry.metrics();
    expect(text).toContain('push_gateway_overloaded_total 3');
    expect(text).toContain('push_gateway_http_requests_in_flight 0');
    expect(text).toMatch(
      /push_gateway_http_requests_total\{route="\/_matrix\/client\/v3\/pushrules\/",method="GET",status="503"\} 1/,
    );
  });

  it('has no cap without maxInFlight', async () => {
    const { api, releaseAll, untilHeld } = heldApi();
    const server = gateway(api);
    const pending = Array.from({ length: 600 }, async () =>
      server.inject({ method: 'GET', url: v3('pushers'), headers: auth }),
    );
    await untilHeld(600);
    releaseAll();
    expect(new Set((await Promise.all(pending)).map((r) => r.statusCode))).toEqual(new Set([200]));
  });

  const turn = async () => new Promise((resolve) => setImmediate(resolve));
  /** Lets what a released call set off finish (a few turns of the event loop, no timing). */
  const settle = async () => {
    for (let i = 0; i < 10; i += 1) await turn();
  };

  /**
   * Sends a request over a real connection and hangs up once `ready()`;
   * resolves when the server has seen the connection close (after the
   * response's own 'close', which Node emits first).
   */
  async function abandonRequest(server: FastifyInstance, path: string, ready: () => boolean) {
    await server.listen({ host: '127.0.0.1', port: 0 });
    const serverSawClose = new Promise<void>((resolve) => {
      server.server.once('connection', (socket: Socket) => {
        socket.once('close', () => {
          resolve();
        });
      });
    });
    const { port } = server.server.address() as AddressInfo;
    const request = httpRequest({ host: '127.0.0.1', port, path, headers: auth });
    request.on('error', () => undefined);
    request.end();
    while (!ready()) await turn();
    request.destroy();
    await serverSawClose;
  }

  it('keeps a slot while the workers still have the request of a client that went away, and frees it after', async () => {
    const { api, calls, held, releaseAll } = heldApi();
    const metrics = new GatewayMetrics({ processMetrics: false });
    const server = gateway(api, undefined, { maxInFlight: 1, observer: metrics });
    await abandonRequest(server, v3('pushers'), () => held.length === 1);
    // The client is gone, the workers are not done: the slot is still taken.
    expect((await server.inject({ method: 'GET', url: v3('pushrules/'), headers: auth })).statusCode).toBe(503);
    expect(await metrics.registry.metrics()).toContain('push_gateway_http_requests_in_flight 1');

    releaseAll();
    await settle();
    expect(await metrics.registry.metrics()).toContain('push_gateway_http_requests_in_flight 0');
    expect((await server.inject({ method: 'GET', url: v3('pushrules/'), headers: auth })).statusCode).toBe(200);
    expect(calls.map((c) => c.method)).toEqual(['getPushers', 'getPushRules']);
  });

  it('brings the in-flight gauge back to 0 when a client goes away during its call (fastify runs no onResponse then)', async () => {
    const { api, held, releaseAll } = heldApi();
    const metrics = new GatewayMetrics({ processMetrics: false });
    const server = gateway(api, undefined, { observer: metrics });
    await abandonRequest(server, v3('pushers'), () => held.length === 1);
    expect(await metrics.registry.metrics()).toContain('push_gateway_http_requests_in_flight 1');
    releaseAll();
    await settle();
    expect(await metrics.registry.metrics()).toContain('push_gateway_http_requests_in_flight 0');
  });

  it('frees the slot of a client that went away before its request reached the workers, and counts the call it still makes', async () => {
    const counts: number[] = [];
    const observer: GatewayObserver = {
      inFlightChanged: (count) => counts.push(count),
      requestDone: () => undefined,
      rateLimited: () => undefined,
      overloaded: () => undefined,
    };
    const slowAuth: { release?: () => void } = {};
    const authenticator: Authenticator = {
      authenticate: async () =>
        new Promise((resolve) => {
          slowAuth.release = () => {
            resolve({ userId: ALICE });
          };
        }),
    };
    const { api, calls } = recordingApi();
    const server = gateway(api, authenticator, { maxInFlight: 1, observer });
    await abandonRequest(server, v3('pushers'), () => slowAuth.release !== undefined);
    expect(counts).toEqual([1, 0]);
    slowAuth.release?.();
    await settle();
    // Taken again for the call to the workers, freed after it.
    expect(counts).toEqual([1, 0, 1, 0]);
    expect(calls.map((c) => c.method)).toEqual(['getPushers']);
  });
});
