import { describe, expect, it } from 'vitest';
import type { Authenticator } from '../../src/gateway/authenticator.js';
import { CORS_HEADERS } from '../../src/gateway/gateway-server.js';
import { TokenFileAuthenticator } from '../../src/gateway/token-file-authenticator.js';
import {
  ALICE,
  auth,
  gateway,
  recordingApi,
  RULE_PATH,
  RULESET,
  TOKEN,
  useGatewayServers,
} from '../support/gateway-server-world.js';
import {
  expectCleanPrototype,
  forbiddenKeyMessage,
  POISONED_CASES,
  prototypeKeys,
} from '../support/poisoned-bodies.js';

// What the gateway answers when a request is refused, and under load, is in
// gateway-server-errors.test.ts and gateway-server-limits.test.ts.

useGatewayServers();

const ADDRESS = { scope: 'global', kind: 'room', ruleId: '!r:example.org' };

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
