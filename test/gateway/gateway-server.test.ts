import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { PushRulesError } from '../../src/client/push-rules-client.js';
import { AuthUnavailableError, type Authenticator } from '../../src/gateway/authenticator.js';
import { buildGatewayServer, CORS_HEADERS, type PushRulesApi } from '../../src/gateway/gateway-server.js';
import { TokenFileAuthenticator } from '../../src/gateway/token-file-authenticator.js';
import { createLogger } from '../../src/logging/logger.js';
import { expectCleanPrototype, forbiddenKeyMessage, POISONED_CASES, prototypeKeys } from '../support/poisoned-bodies.js';

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

function gateway(api: PushRulesApi, authenticator: Authenticator = new TokenFileAuthenticator({ [TOKEN]: ALICE })) {
  app = buildGatewayServer({ api, authenticator, logger: createLogger('silent'), maxBodyBytes: 4096, maxJsonDepth: MAX_DEPTH, requestTimeoutMs: 1234 });
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
    ['GET', RULE_PATH, '', undefined, 'getPushRule', [ALICE, ADDRESS, { timeoutMs: 1234 }], { rule_id: 'r', default: false, enabled: true, actions: [] }],
    ['PUT', RULE_PATH, '?before=a&after=b', { actions: [] }, 'setPushRule', [ALICE, ADDRESS, { actions: [] }, { timeoutMs: 1234, before: 'a', after: 'b' }], {}],
    ['PUT', RULE_PATH, '', { actions: ['notify'] }, 'setPushRule', [ALICE, ADDRESS, { actions: ['notify'] }, { timeoutMs: 1234 }], {}],
    ['DELETE', RULE_PATH, '', undefined, 'deletePushRule', [ALICE, ADDRESS, { timeoutMs: 1234 }], {}],
    ['GET', `${RULE_PATH}/actions`, '', undefined, 'getPushRuleActions', [ALICE, ADDRESS, { timeoutMs: 1234 }], { actions: ['notify'] }],
    ['PUT', `${RULE_PATH}/actions`, '', { actions: ['notify'] }, 'setPushRuleActions', [ALICE, ADDRESS, ['notify'], { timeoutMs: 1234 }], {}],
    ['GET', `${RULE_PATH}/enabled`, '', undefined, 'getPushRuleEnabled', [ALICE, ADDRESS, { timeoutMs: 1234 }], { enabled: true }],
    ['PUT', `${RULE_PATH}/enabled`, '', { enabled: false }, 'setPushRuleEnabled', [ALICE, ADDRESS, false, { timeoutMs: 1234 }], {}],
    ['GET', 'pushers', '', undefined, 'getPushers', [ALICE, { timeoutMs: 1234 }], { pushers: [] }],
    ['POST', 'pushers/set', '', { pushkey: 'k', app_id: 'a', kind: null }, 'setPusher', [ALICE, { pushkey: 'k', app_id: 'a', kind: null }, { timeoutMs: 1234 }], {}],
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
    ['nested one level deeper than http.maxJsonDepth', 'PUT', v3(RULE_PATH), `{"actions": ${nested(MAX_DEPTH)}}`, 400, 'M_BAD_JSON'],
    ['whose nesting is not JSON either', 'POST', v3('pushers/set'), `{"data": ${'['.repeat(MAX_DEPTH + 1)}`, 400, 'M_BAD_JSON'],
  ])('a body %s → %i %s, and no call', async (_name, method, url, payload, status, errcode) => {
    const { api, calls } = recordingApi();
    const response = await gateway(api).inject({ method: method as 'PUT', url, headers: { ...auth, 'content-type': 'application/json' }, payload });
    expect(response.statusCode).toBe(status);
    expect(response.json()).toMatchObject({ errcode, error: expect.any(String) as unknown });
    expect(calls).toEqual([]);
  });

  it('forwards a body nested exactly http.maxJsonDepth deep, and counts no brackets inside strings', async () => {
    const { api, calls } = recordingApi();
    const payload = `{"actions": ${nested(MAX_DEPTH - 1)}, "note": "${'['.repeat(100)}"}`;
    const response = await gateway(api).inject({ method: 'PUT', url: v3(`${RULE_PATH}/actions`), headers: auth, payload });
    expect(response.statusCode).toBe(200);
    expect(calls.map((c) => c.method)).toEqual(['setPushRuleActions']);
  });

  it('refuses a ~20 KB body nested 10,000 deep with 400 M_BAD_JSON naming the limit, before it reaches the client', async () => {
    const { api, calls } = recordingApi();
    app = buildGatewayServer({ api, authenticator: new TokenFileAuthenticator({ [TOKEN]: ALICE }), logger: createLogger('silent'), maxBodyBytes: 65_536, maxJsonDepth: 31, requestTimeoutMs: 1234 });
    const payload = `{"kind": "http", "app_id": "a", "pushkey": "k", "data": {"deep": ${nested(10_000)}}}`;
    const response = await app.inject({ method: 'POST', url: v3('pushers/set'), headers: auth, payload });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ errcode: 'M_BAD_JSON', error: 'Request body nests arrays and objects deeper than 31 levels.' });
    expect(calls).toEqual([]);
  });

  it.each([
    ['DELETE', v3(RULE_PATH), 200],
    ['DELETE', v3('pushers'), 405],
  ])('takes an empty body with a JSON content type as no body: %s %s → %i', async (method, url, status) => {
    const response = await gateway(recordingApi().api).inject({ method: method as 'DELETE', url, headers: { ...auth, 'content-type': 'application/json' }, payload: '' });
    expect(response.statusCode).toBe(status);
  });

  it.each(['%ZZ', '%E0%A4%A'])('answers a path that does not decode (%s) with a Matrix error and CORS', async (bad) => {
    const { api, calls } = recordingApi();
    const response = await gateway(api).inject({ method: 'GET', url: v3(`pushrules/global/room/${bad}`), headers: auth });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ errcode: 'M_UNRECOGNIZED', error: 'The request path is not valid percent-encoding.' });
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
    const response = await gateway(api).inject({ method: 'PUT', url: v3(`${RULE_PATH}/enabled`), headers: { ...auth, 'content-type': 'text/plain' }, payload: '{"enabled":true}' });
    expect(response.statusCode).toBe(200);
    expect(calls[0]?.args[2]).toBe(true);
  });

  it.each([
    ['no Authorization header', {}, 401, 'M_MISSING_TOKEN'],
    ['a scheme other than Bearer', { authorization: `Basic ${TOKEN}` }, 401, 'M_MISSING_TOKEN'],
    ['an unknown token', { authorization: 'Bearer nobody' }, 401, 'M_UNKNOWN_TOKEN'],
  ])('%s → %i %s, before the body is read, and no call', async (_name, headers, status, errcode) => {
    const { api, calls } = recordingApi();
    const response = await gateway(api).inject({ method: 'PUT', url: v3(RULE_PATH), headers: { ...headers, 'content-type': 'application/json' }, payload: 'not json' });
    expect(response.statusCode).toBe(status);
    expect(response.json()).toMatchObject({ errcode });
    expect(calls).toEqual([]);
  });

  it('answers an unknown token with soft_logout false', async () => {
    const response = await gateway(recordingApi().api).inject({ method: 'GET', url: v3('pushers'), headers: { authorization: 'Bearer nobody' } });
    expect(response.json()).toEqual({ errcode: 'M_UNKNOWN_TOKEN', error: 'Unknown access token.', soft_logout: false });
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
    ['a worker error', new PushRulesError({ kind: 'NotFound', errcode: 'M_NOT_FOUND', error: 'Push rule not found.', status: 404 }), 404, { errcode: 'M_NOT_FOUND', error: 'Push rule not found.' }],
    ['no worker in time', PushRulesError.fromTransport('timeout'), 503, { errcode: 'M_UNKNOWN', error: 'The push rules service did not answer in time; try again.' }],
    ['no worker at all', PushRulesError.fromTransport('unroutable'), 503, { errcode: 'M_UNKNOWN', error: 'No push rules worker is taking requests; try again.' }],
  ])('answers %s with its status and Matrix body', async (_name, error, status, body) => {
    const { api } = recordingApi({ getPushRule: async () => Promise.reject(error) });
    const response = await gateway(api).inject({ method: 'GET', url: v3(RULE_PATH), headers: auth });
    expect(response.statusCode).toBe(status);
    expect(response.json()).toEqual(body);
  });
});

describe('gateway: keys that reach a prototype', () => {
  const before = prototypeKeys();

  it.each(POISONED_CASES)('%s with a key %s → 400 M_BAD_JSON naming its path, and no call', async (_place, key, place) => {
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
  });
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
