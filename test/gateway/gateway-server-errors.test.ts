import { describe, expect, it } from 'vitest';
import { PushRulesError } from '../../src/client/push-rules-client.js';
import { AuthUnavailableError, type Authenticator } from '../../src/gateway/authenticator.js';
import { CORS_HEADERS } from '../../src/gateway/gateway-server.js';
import {
  auth,
  gateway,
  MAX_DEPTH,
  recordingApi,
  RULE_PATH,
  TOKEN,
  useGatewayServers,
} from '../support/gateway-server-world.js';

useGatewayServers();

/** `levels` arrays, one inside the other, as JSON text. */
const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);

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
    const server = gateway(api, undefined, { maxBodyBytes: 65_536, maxJsonDepth: 31 });
    const payload = `{"kind": "http", "app_id": "a", "pushkey": "k", "data": {"deep": ${nested(10_000)}}}`;
    const response = await server.inject({ method: 'POST', url: v3('pushers/set'), headers: auth, payload });
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
