import { request as httpRequest } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { PushRulesError } from '../../src/client/push-rules-client.js';
import { AuthUnavailableError, type Authenticator } from '../../src/gateway/authenticator.js';
import { GatewayMetrics } from '../../src/gateway/gateway-metrics.js';
import {
  buildGatewayServer,
  CORS_HEADERS,
  REFUSAL_LOG_INTERVAL_MS,
  type GatewayObserver,
  type GatewayServerOptions,
} from '../../src/gateway/gateway-server.js';
import type { PushRulesApi } from '../../src/gateway/gateway-routes.js';
import { TokenFileAuthenticator } from '../../src/gateway/token-file-authenticator.js';
import { createLogger } from '../../src/logging/logger.js';
import {
  expectCleanPrototype,
  forbiddenKeyMessage,
  POISONED_CASES,
  prototypeKeys,
} from '../support/poisoned-bodies.js';

const ALICE = '@alice:example.org';
const TOKEN = 'alice-token';
const RULESET = { override: [], content: [], room: [], sender: [], underride: [] };
const MAX_DEPTH = 8;
/** `levels` arrays, one inside the other, as JSON text. */
const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);

interface Recorded {
  readonly method: string;
  readonly args: unknown[];
}

/** An api that records its calls and answers `{}` (or what `answers` says). */
function recordingApi(answers: Partial<Record<keyof PushRulesApi, (...args: unknown[]) => Promise<unknown>>> = {}) {
  const calls: Recorded[] = [];
  const method =
    (name: keyof PushRulesApi, fallback: unknown = {}) =>
    async (...args: unknown[]): Promise<unknown> => {
      calls.push({ method: name, args });
      const answer = answers[name];
      if (answer === undefined) return Promise.resolve(fallback);
      return answer(...args);
    };
  const api = {
    getPushRules: method('getPushRules', { global: RULESET }),
    getPushRule: method('getPushRule', { rule_id: 'r', default: false, enabled: true, actions: [] }),
    setPushRule: method('setPushRule'),
    deletePushRule: method('deletePushRule'),
    getPushRuleActions: method('getPushRuleActions', { actions: ['notify'] }),
    setPushRuleActions: method('setPushRuleActions'),
    getPushRuleEnabled: method('getPushRuleEnabled', { enabled: true }),
    setPushRuleEnabled: method('setPushRuleEnabled'),
    getPushers: method('getPushers', { pushers: [] }),
    setPusher: method('setPusher'),
  } as unknown as PushRulesApi;
  return { api, calls };
}

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

function gateway(
  api: PushRulesApi,
  authenticator: Authenticator = new TokenFileAuthenticator({ [TOKEN]: ALICE }),
  more: Partial<Pick<GatewayServerOptions, 'writeRateLimit' | 'maxInFlight' | 'now' | 'observer' | 'logger'>> = {},
) {
  app = buildGatewayServer({
    api,
    authenticator,
    logger: createLogger('silent'),
    maxBodyBytes: 4096,
    maxJsonDepth: MAX_DEPTH,
    requestTimeoutMs: 1234,
    ...more,
  });
  return app;
}

const auth = { authorization: `Bearer ${TOKEN}` };
const ADDRESS = { scope: 'global', kind: 'room', ruleId: '!r:example.org' };
const RULE_PATH = 'pushrules/global/room/!r%3Aexample.org';

describe.each(['r0', 'v3'])('gateway endpoints under /_matrix/client/%s', (version) => {
  const url = (path: string) => `/_matrix/client/${version}/${path}`;

  it.each<[string, string, string, unknown, string, unknown[], unknown]>([
    ['GET', 'pushrules/', '', undefined, 'getPushRules', [ALICE, { timeoutMs: 1234 }], { global: RULESET }],
    ['GET', 'pushrules', '', undefined, 'getPushRules', [ALICE, { timeoutMs: 1234 }], { global: RULESET }],
    ['GET', 'pushrules/global/', '', undefined, 'getPushRules', [ALICE, { timeoutMs: 1234 }], RULESET],
    [
      'GET',
      RULE_PATH,
      '',
      undefined,
      'getPushRule',
      [ALICE, ADDRESS, { timeoutMs: 1234 }],
      { rule_id: 'r', default: false, enabled: true, actions: [] },
    ],
    [
      'PUT',
      RULE_PATH,
      '?before=a&after=b',
      { actions: [] },
      'setPushRule',
      [ALICE, ADDRESS, { actions: [] }, { timeoutMs: 1234, before: 'a', after: 'b' }],
      {},
    ],
    [
      'PUT',
      RULE_PATH,
      '',
      { actions: ['notify'] },
      'setPushRule',
      [ALICE, ADDRESS, { actions: ['notify'] }, { timeoutMs: 1234 }],
      {},
    ],
    ['DELETE', RULE_PATH, '', undefined, 'deletePushRule', [ALICE, ADDRESS, { timeoutMs: 1234 }], {}],
    [
      'GET',
      `${RULE_PATH}/actions`,
      '',
      undefined,
      'getPushRuleActions',
      [ALICE, ADDRESS, { timeoutMs: 1234 }],
      { actions: ['notify'] },
    ],
    [
      'PUT',
      `${RULE_PATH}/actions`,
      '',
      { actions: ['notify'] },
      'setPushRuleActions',
      [ALICE, ADDRESS, ['notify'], { timeoutMs: 1234 }],
      {},
    ],
    [
      'GET',
      `${RULE_PATH}/enabled`,
      '',
      undefined,
      'getPushRuleEnabled',
      [ALICE, ADDRESS, { timeoutMs: 1234 }],
      { enabled: true },
    ],
    [
      'PUT',
      `${RULE_PATH}/enabled`,
      '',
      { enabled: false },
      'setPushRuleEnabled',
      [ALICE, ADDRESS, false, { timeoutMs: 1234 }],
      {},
    ],
    ['GET', 'pushers', '', undefined, 'getPushers', [ALICE, { timeoutMs: 1234 }], { pushers: [] }],
    [
      'POST',
      'pushers/set',
      '',
      { pushkey: 'k', app_id: 'a', kind: null },
      'setPusher',
      [ALICE, { pushkey: 'k', app_id: 'a', kind: null }, { timeoutMs: 1234 }],
      {},
    ],
  ])('%s %s%s calls %s for the authenticated user', async (method, path, query, payload, called, args, body) => {
    const { api, calls } = recordingApi();
    const response = await gateway(api).inject({
      method: method as 'GET',
      url: `${url(path)}${query}`,
      headers: auth,
      ...(payload === undefined ? {} : { payload: payload as object }),
    });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual(body);
    expect(calls).toEqual([{ method: called, args }]);
  });
});

describe('the device of the access token', () => {
  const PHONE_TOKEN = 'phone-token';
  const tokens = new TokenFileAuthenticator({ [TOKEN]: ALICE, [PHONE_TOKEN]: { user_id: ALICE, device_id: 'PHONE' } });
  const set = (token: string, payload: object) =>
    ({
      method: 'POST',
      url: '/_matrix/client/v3/pushers/set',
      headers: { authorization: `Bearer ${token}` },
      payload,
    }) as const;

  it('goes to setPusher with the set action as the client sent it', async () => {
    const { api, calls } = recordingApi();
    const action = {
      pushkey: 'k',
      app_id: 'a',
      kind: 'http',
      device_id: 'CLIENT-SAYS',
      'org.matrix.msc3881.device_id': 'CLIENT-SAYS',
    };
    expect((await gateway(api, tokens).inject(set(PHONE_TOKEN, action))).statusCode).toBe(200);
    expect(calls).toEqual([{ method: 'setPusher', args: [ALICE, action, { timeoutMs: 1234, deviceId: 'PHONE' }] }]);
  });

  it('is left out for a token without a device', async () => {
    const { api, calls } = recordingApi();
    await gateway(api, tokens).inject(set(TOKEN, { pushkey: 'k', app_id: 'a', kind: null }));
    expect(calls[0]?.args[2]).toStrictEqual({ timeoutMs: 1234 });
  });

  it('comes from the authenticator, whatever the body says', async () => {
    const { api, calls } = recordingApi();
    const whoami: Authenticator = {
      authenticate: async () => Promise.resolve({ userId: ALICE, deviceId: 'FROM-WHOAMI' }),
    };
    await gateway(api, whoami).inject(
      set('any', { pushkey: 'k', app_id: 'a', kind: 'http', device_id: 'CLIENT-SAYS' }),
    );
    expect(calls[0]?.args[2]).toEqual({ timeoutMs: 1234, deviceId: 'FROM-WHOAMI' });
  });
});

describe('gateway errors', () => {
  const v3 = (path: string) => `/_matrix/client/v3/${path}`;

  it.each([
    ['an unknown path', 'GET', '/_matrix/client/v3/pushrules/global/room/x/nonsense', 404, 'M_UNRECOGNIZED'],
    ['a path of another API', 'GET', '/_matrix/client/v3/sync', 404, 'M_UNRECOGNIZED'],
    ['another version', 'GET', '/_matrix/client/v1/pushers', 404, 'M_UNRECOGNIZED'],
    ['a wrong method on a known path', 'POST', v3('pushers'), 405, 'M_UNRECOGNIZED'],
    ['DELETE on actions', 'DELETE', v3(`${RULE_PATH}/actions`), 405, 'M_UNRECOGNIZED'],
    ['GET on pushers/set', 'GET', v3('pushers/set'), 405, 'M_UNRECOGNIZED'],
  ])('%s: %s %s → %i %s, and no call', async (_name, method, url, status, errcode) => {
    const { api, calls } = recordingApi();
    const response = await gateway(api).inject({ method: method as 'GET', url, headers: auth });
    expect(response.statusCode).toBe(status);
    expect(response.json()).toMatchObject({ errcode });
    expect(calls).toEqual([]);
  });

  it.each([
    ['not JSON', 'PUT', v3(RULE_PATH), '{"actions": [', 400, 'M_NOT_JSON'],
    ['an empty body', 'POST', v3('pushers/set'), '', 400, 'M_NOT_JSON'],
    ['over the body limit', 'PUT', v3(RULE_PATH), JSON.stringify({ actions: ['x'.repeat(5000)] }), 413, 'M_TOO_LARGE'],
    [
      'nested one level deeper than http.maxJsonDepth',
      'PUT',
      v3(RULE_PATH),
      `{"actions": ${nested(MAX_DEPTH)}}`,
      400,
      'M_BAD_JSON',
    ],
    [
      'whose nesting is not JSON either',
      'POST',
      v3('pushers/set'),
      `{"data": ${'['.repeat(MAX_DEPTH + 1)}`,
      400,
      'M_BAD_JSON',
    ],
  ])('a body %s → %i %s, and no call', async (_name, method, url, payload, status, errcode) => {
    const { api, calls } = recordingApi();
    const response = await gateway(api).inject({
      method: method as 'PUT',
      url,
      headers: { ...auth, 'content-type': 'application/json' },
      payload,
    });
    expect(response.statusCode).toBe(status);
    expect(response.json()).toMatchObject({ errcode, error: expect.any(String) as unknown });
    expect(calls).toEqual([]);
  });

  it('forwards a body nested exactly http.maxJsonDepth deep, and counts no brackets inside strings', async () => {
    const { api, calls } = recordingApi();
    const payload = `{"actions": ${nested(MAX_DEPTH - 1)}, "note": "${'['.repeat(100)}"}`;
    const response = await gateway(api).inject({
      method: 'PUT',
      url: v3(`${RULE_PATH}/actions`),
      headers: auth,
      payload,
    });
    expect(response.statusCode).toBe(200);
    expect(calls.map((c) => c.method)).toEqual(['setPushRuleActions']);
  });

  it('refuses a ~20 KB body nested 10,000 deep with 400 M_BAD_JSON naming the limit, before it reaches the client', async () => {
    const { api, calls } = recordingApi();
    app = buildGatewayServer({
      api,
      authenticator: new TokenFileAuthenticator({ [TOKEN]: ALICE }),
      logger: createLogger('silent'),
      maxBodyBytes: 65_536,
      maxJsonDepth: 31,
      requestTimeoutMs: 1234,
    });
    const payload = `{"kind": "http", "app_id": "a", "pushkey": "k", "data": {"deep": ${nested(10_000)}}}`;
    const response = await app.inject({ method: 'POST', url: v3('pushers/set'), headers: auth, payload });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      errcode: 'M_BAD_JSON',
      error: 'Request body nests arrays and objects deeper than 31 levels.',
    });
    expect(calls).toEqual([]);
  });

  it.each([
    ['DELETE', v3(RULE_PATH), 200],
    ['DELETE', v3('pushers'), 405],
  ])('takes an empty body with a JSON content type as no body: %s %s → %i', async (method, url, status) => {
    const response = await gateway(recordingApi().api).inject({
      method: method as 'DELETE',
      url,
      headers: { ...auth, 'content-type': 'application/json' },
      payload: '',
    });
    expect(response.statusCode).toBe(status);
  });

  it.each(['%ZZ', '%E0%A4%A'])('answers a path that does not decode (%s) with a Matrix error and CORS', async (bad) => {
    const { api, calls } = recordingApi();
    const response = await gateway(api).inject({
      method: 'GET',
      url: v3(`pushrules/global/room/${bad}`),
      headers: auth,
    });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      errcode: 'M_UNRECOGNIZED',
      error: 'The request path is not valid percent-encoding.',
    });
    expect(response.headers).toMatchObject(CORS_HEADERS);
    expect(calls).toEqual([]);
  });

  it('answers any other client error of the HTTP layer with its status and M_UNKNOWN', async () => {
    const { api, calls } = recordingApi();
    const response = await gateway(api).inject({
      method: 'PUT',
      url: v3(`${RULE_PATH}/enabled`),
      headers: { ...auth, 'content-length': '100' },
      payload: '{"enabled":true}',
    });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ errcode: 'M_UNKNOWN', error: 'Request body size did not match Content-Length' });
    expect(calls).toEqual([]);
  });

  it('answers an unexpected failure with 500 M_UNKNOWN and nothing of the failure', async () => {
    const { api } = recordingApi({ getPushers: async () => Promise.reject(new Error('secret detail')) });
    const response = await gateway(api).inject({ method: 'GET', url: v3('pushers'), headers: auth });
    expect(response.statusCode).toBe(500);
    expect(response.json()).toEqual({ errcode: 'M_UNKNOWN', error: 'Internal server error.' });
  });

  it('reads a JSON body sent without a JSON content type', async () => {
    const { api, calls } = recordingApi();
    const response = await gateway(api).inject({
      method: 'PUT',
      url: v3(`${RULE_PATH}/enabled`),
      headers: { ...auth, 'content-type': 'text/plain' },
      payload: '{"enabled":true}',
    });
    expect(response.statusCode).toBe(200);
    expect(calls[0]?.args[2]).toBe(true);
  });

  it.each([
    ['no Authorization header', {}, 401, 'M_MISSING_TOKEN'],
    ['a scheme other than Bearer', { authorization: `Basic ${TOKEN}` }, 401, 'M_MISSING_TOKEN'],
    ['an unknown token', { authorization: 'Bearer nobody' }, 401, 'M_UNKNOWN_TOKEN'],
  ])('%s → %i %s, before the body is read, and no call', async (_name, headers, status, errcode) => {
    const { api, calls } = recordingApi();
    const response = await gateway(api).inject({
      method: 'PUT',
      url: v3(RULE_PATH),
      headers: { ...headers, 'content-type': 'application/json' },
      payload: 'not json',
    });
    expect(response.statusCode).toBe(status);
    expect(response.json()).toMatchObject({ errcode });
    expect(calls).toEqual([]);
  });

  it('answers an unknown token with soft_logout false', async () => {
    const response = await gateway(recordingApi().api).inject({
      method: 'GET',
      url: v3('pushers'),
      headers: { authorization: 'Bearer nobody' },
    });
    expect(response.json()).toEqual({ errcode: 'M_UNKNOWN_TOKEN', error: 'Unknown access token.', soft_logout: false });
  });

  it.each([
    [
      'an expired token (soft logout)',
      { status: 401, errcode: 'M_UNKNOWN_TOKEN', error: 'Access token has expired', softLogout: true } as const,
    ],
    [
      'a hard logout',
      { status: 401, errcode: 'M_UNKNOWN_TOKEN', error: 'Invalid access token passed.', softLogout: false } as const,
    ],
    [
      'a locked account',
      { status: 401, errcode: 'M_USER_LOCKED', error: 'This account has been locked', softLogout: true } as const,
    ],
    ['a 403 refusal', { status: 403, errcode: 'M_FORBIDDEN', error: 'Not allowed.', softLogout: false } as const],
  ])('answers a refused token as the authenticator says: %s, and no call', async (_name, rejected) => {
    const { api, calls } = recordingApi();
    const refusing: Authenticator = { authenticate: async () => Promise.resolve({ rejected }) };
    const response = await gateway(api, refusing).inject({
      method: 'PUT',
      url: v3(RULE_PATH),
      headers: { ...auth, 'content-type': 'application/json' },
      payload: '{"actions":[]}',
    });
    expect(response.statusCode).toBe(rejected.status);
    expect(response.json()).toEqual({
      errcode: rejected.errcode,
      error: rejected.error,
      soft_logout: rejected.softLogout,
    });
    expect(response.headers).toMatchObject(CORS_HEADERS);
    expect(calls).toEqual([]);
  });

  it('answers 503 when the token cannot be checked, and serves nobody', async () => {
    const { api, calls } = recordingApi();
    const down: Authenticator = { authenticate: async () => Promise.reject(new AuthUnavailableError('down')) };
    const response = await gateway(api, down).inject({ method: 'GET', url: v3('pushers'), headers: auth });
    expect(response.statusCode).toBe(503);
    expect(response.json()).toMatchObject({ errcode: 'M_UNKNOWN' });
    expect(calls).toEqual([]);
  });

  it.each([
    [
      'a worker error',
      new PushRulesError({ kind: 'NotFound', errcode: 'M_NOT_FOUND', error: 'Push rule not found.', status: 404 }),
      404,
      { errcode: 'M_NOT_FOUND', error: 'Push rule not found.' },
    ],
    [
      'no worker in time',
      PushRulesError.fromTransport('timeout'),
      503,
      { errcode: 'M_UNKNOWN', error: 'The push rules service did not answer in time; try again.' },
    ],
    [
      'no worker at all',
      PushRulesError.fromTransport('unroutable'),
      503,
      { errcode: 'M_UNKNOWN', error: 'No push rules worker is taking requests; try again.' },
    ],
  ])('answers %s with its status and Matrix body', async (_name, error, status, body) => {
    const { api } = recordingApi({ getPushRule: async () => Promise.reject(error) });
    const response = await gateway(api).inject({ method: 'GET', url: v3(RULE_PATH), headers: auth });
    expect(response.statusCode).toBe(status);
    expect(response.json()).toEqual(body);
  });
});

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

describe('gateway: keys that reach a prototype', () => {
  const before = prototypeKeys();

  it.each(POISONED_CASES)(
    '%s with a key %s → 400 M_BAD_JSON naming its path, and no call',
    async (_place, key, place) => {
      const { api, calls } = recordingApi();
      const response = await gateway(api).inject({
        method: place.http.method,
        url: `/_matrix/client/v3/${place.http.path}`,
        headers: { ...auth, 'content-type': 'application/json' },
        payload: place.http.body(key),
      });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ errcode: 'M_BAD_JSON', error: forbiddenKeyMessage(place.httpPath(key)) });
      expect(calls).toEqual([]);
      expectCleanPrototype(before);
    },
  );
});

describe('gateway CORS', () => {
  it.each([
    ['a preflight on a known path', 'OPTIONS', '/_matrix/client/v3/pushrules/', {}, 200],
    ['a preflight on any path', 'OPTIONS', '/_matrix/client/v3/anything/at/all', {}, 200],
    ['an answered request', 'GET', '/_matrix/client/v3/pushers', auth, 200],
    ['an error', 'GET', '/_matrix/client/v3/pushers', {}, 401],
    ['an unknown path', 'GET', '/nowhere', {}, 404],
  ])('%s carries the CORS headers', async (_name, method, url, headers, status) => {
    const response = await gateway(recordingApi().api).inject({ method: method as 'GET', url, headers });
    expect(response.statusCode).toBe(status);
    expect(response.headers).toMatchObject(CORS_HEADERS);
  });

  it('answers a preflight without a token', async () => {
    const { api, calls } = recordingApi();
    const response = await gateway(api).inject({ method: 'OPTIONS', url: '/_matrix/client/r0/pushers/set' });
    expect(response.statusCode).toBe(200);
    expect(calls).toEqual([]);
  });
});

describe('gateway construction', () => {
  it('uses no option fastify has deprecated (each would print a FastifyDeprecation warning)', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      await gateway(recordingApi().api).ready();
      // process.emitWarning delivers on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.map((w) => `${w.name} ${(w as Error & { code?: string }).code ?? ''}`)).toEqual([]);
  });
});
