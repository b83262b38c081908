import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthUnavailableError } from '../../src/gateway/authenticator.js';
import { buildGatewayServer } from '../../src/gateway/gateway-server.js';
import type { PushRulesApi } from '../../src/gateway/gateway-routes.js';
import { HomeserverAuthenticator, WHOAMI_PATH } from '../../src/gateway/homeserver-authenticator.js';
import { createLogger } from '../../src/logging/logger.js';

/** A homeserver that answers whoami as `answer` says, counting the calls. */
async function homeserver(answer: (token: string | undefined, response: ServerResponse) => void) {
  const seen: (string | undefined)[] = [];
  const server: Server = createServer((request: IncomingMessage, response) => {
    const token = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
    if (request.url !== WHOAMI_PATH) {
      response.writeHead(404).end();
      return;
    }
    seen.push(token);
    answer(token, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

const json = (response: ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};
const validTokens = (token: string | undefined, response: ServerResponse) => {
  if (token === 'alice-token') json(response, 200, { user_id: '@alice:example.org', device_id: 'D' });
  else json(response, 401, { errcode: 'M_UNKNOWN_TOKEN', error: 'Unknown token' });
};

function authenticator(
  url: string,
  overrides: { cacheSeconds?: number; timeoutMs?: number; now?: () => number; cacheMaxEntries?: number } = {},
) {
  return new HomeserverAuthenticator({
    homeserverUrl: url,
    cacheSeconds: 30,
    cacheMaxEntries: 100,
    timeoutMs: 500,
    ...overrides,
  });
}

describe('HomeserverAuthenticator', () => {
  it('asks whoami with the caller token and answers its user and device', async () => {
    const hs = await homeserver(validTokens);
    expect(await authenticator(hs.url).authenticate('alice-token')).toEqual({
      userId: '@alice:example.org',
      deviceId: 'D',
    });
    expect(hs.seen).toEqual(['alice-token']);
  });

  it('answers the device from the cache as well', async () => {
    const hs = await homeserver(validTokens);
    const auth = authenticator(hs.url);
    await auth.authenticate('alice-token');
    expect(await auth.authenticate('alice-token')).toEqual({ userId: '@alice:example.org', deviceId: 'D' });
    expect(hs.seen).toHaveLength(1);
  });

  it.each<[string, unknown]>([
    ['no device_id (a token without a device)', { user_id: '@alice:example.org' }],
    ['a device_id that is not a string', { user_id: '@alice:example.org', device_id: 7 }],
    ['an empty device_id', { user_id: '@alice:example.org', device_id: '' }],
    ['a null device_id', { user_id: '@alice:example.org', device_id: null }],
  ])('answers the user without a device for %s', async (_name, whoami) => {
    const hs = await homeserver((_token, response) => {
      json(response, 200, whoami);
    });
    expect(await authenticator(hs.url).authenticate('t')).toStrictEqual({ userId: '@alice:example.org' });
  });

  const UNKNOWN = { status: 401, errcode: 'M_UNKNOWN_TOKEN', error: 'Unknown access token.', softLogout: false };

  it.each<[string, number, string | undefined, unknown, unknown]>([
    [
      'an expired token (soft logout)',
      401,
      'application/json',
      { errcode: 'M_UNKNOWN_TOKEN', error: 'Access token has expired', soft_logout: true },
      { status: 401, errcode: 'M_UNKNOWN_TOKEN', error: 'Access token has expired', softLogout: true },
    ],
    [
      'a logged-out token',
      401,
      'application/json',
      { errcode: 'M_UNKNOWN_TOKEN', error: 'Invalid access token passed.', soft_logout: false },
      { status: 401, errcode: 'M_UNKNOWN_TOKEN', error: 'Invalid access token passed.', softLogout: false },
    ],
    [
      'no soft_logout at all',
      401,
      'application/json',
      { errcode: 'M_UNKNOWN_TOKEN', error: 'no' },
      { status: 401, errcode: 'M_UNKNOWN_TOKEN', error: 'no', softLogout: false },
    ],
    [
      'a soft_logout that is not true',
      401,
      'application/json',
      { errcode: 'M_UNKNOWN_TOKEN', error: 'no', soft_logout: 'true' },
      { status: 401, errcode: 'M_UNKNOWN_TOKEN', error: 'no', softLogout: false },
    ],
    [
      'a locked account',
      401,
      'application/json',
      { errcode: 'M_USER_LOCKED', error: 'This account has been locked', soft_logout: true },
      { status: 401, errcode: 'M_USER_LOCKED', error: 'This account has been locked', softLogout: true },
    ],
    [
      '403 with a Matrix error',
      403,
      'application/json',
      { errcode: 'M_FORBIDDEN', error: 'Not allowed.' },
      { status: 403, errcode: 'M_FORBIDDEN', error: 'Not allowed.', softLogout: false },
    ],
    ['403 with a JSON body that is not a Matrix error', 403, 'application/json', { message: 'denied' }, UNKNOWN],
    ['401 with an HTML page', 401, 'text/html', '<html>401</html>', UNKNOWN],
    ['401 with no body', 401, undefined, undefined, UNKNOWN],
    [
      'an errcode that is not a code',
      401,
      'application/json',
      { errcode: 'not a code!', error: 'x', soft_logout: true },
      UNKNOWN,
    ],
    ['an errcode that is not a string', 401, 'application/json', { errcode: 401, soft_logout: true }, UNKNOWN],
    [
      'no error text',
      401,
      'application/json',
      { errcode: 'M_UNKNOWN_TOKEN', soft_logout: true },
      { ...UNKNOWN, softLogout: true },
    ],
    [
      'an error text too long to show',
      401,
      'application/json',
      { errcode: 'M_UNKNOWN_TOKEN', error: 'x'.repeat(5000), soft_logout: true },
      { ...UNKNOWN, softLogout: true },
    ],
  ])('passes on the homeserver’s refusal: %s', async (_name, status, contentType, body, rejected) => {
    const hs = await homeserver((_token, response) => {
      response.writeHead(status, contentType === undefined ? {} : { 'content-type': contentType });
      response.end(body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body));
    });
    expect(await authenticator(hs.url).authenticate('bad')).toEqual({ rejected });
  });

  it('does not cache a soft logout: the token refreshed a moment later works at once', async () => {
    const refreshed = { yet: false };
    const hs = await homeserver((_token, response) => {
      if (refreshed.yet) json(response, 200, { user_id: '@alice:example.org' });
      else json(response, 401, { errcode: 'M_UNKNOWN_TOKEN', error: 'expired', soft_logout: true });
    });
    const auth = authenticator(hs.url);
    expect(await auth.authenticate('t')).toMatchObject({ rejected: { softLogout: true } });
    refreshed.yet = true;
    expect(await auth.authenticate('t')).toEqual({ userId: '@alice:example.org' });
    expect(hs.seen).toHaveLength(2);
  });

  it('caches an accepted token until cacheSeconds pass, then asks again', async () => {
    const hs = await homeserver(validTokens);
    const clock = { now: 1_000_000 };
    const auth = authenticator(hs.url, { cacheSeconds: 30, now: () => clock.now });
    await auth.authenticate('alice-token');
    clock.now += 29_000;
    await auth.authenticate('alice-token');
    expect(hs.seen).toHaveLength(1);
    clock.now += 2_000;
    await auth.authenticate('alice-token');
    expect(hs.seen).toHaveLength(2);
  });

  it('does not cache a rejected token: a token issued a moment later works at once', async () => {
    const issued = { yet: false };
    const hs = await homeserver((token, response) => {
      if (issued.yet && token === 'new-token') json(response, 200, { user_id: '@new:example.org' });
      else json(response, 401, { errcode: 'M_UNKNOWN_TOKEN', error: 'no' });
    });
    const auth = authenticator(hs.url);
    expect(await auth.authenticate('new-token')).toMatchObject({ rejected: { errcode: 'M_UNKNOWN_TOKEN' } });
    issued.yet = true;
    expect(await auth.authenticate('new-token')).toEqual({ userId: '@new:example.org' });
  });

  it('asks every time with cacheSeconds 0', async () => {
    const hs = await homeserver(validTokens);
    const auth = authenticator(hs.url, { cacheSeconds: 0 });
    await auth.authenticate('alice-token');
    await auth.authenticate('alice-token');
    expect(hs.seen).toHaveLength(2);
  });

  it('evicts the oldest entry beyond cacheMaxEntries', async () => {
    const hs = await homeserver((token, response) => {
      json(response, 200, { user_id: `@${token ?? 'x'}:example.org` });
    });
    const auth = authenticator(hs.url, { cacheMaxEntries: 2 });
    for (const token of ['a', 'b', 'c', 'c', 'b', 'a']) await auth.authenticate(token);
    // a, b, c asked; c and b cached; a was evicted and asked again.
    expect(hs.seen).toEqual(['a', 'b', 'c', 'a']);
  });

  it('shares one lookup between concurrent requests with the same token', async () => {
    const hs = await homeserver((token, response) => {
      setTimeout(() => {
        validTokens(token, response);
      }, 50);
    });
    const auth = authenticator(hs.url);
    const results = await Promise.all([1, 2, 3].map(async () => auth.authenticate('alice-token')));
    expect(results).toEqual([1, 2, 3].map(() => ({ userId: '@alice:example.org', deviceId: 'D' })));
    expect(hs.seen).toHaveLength(1);
  });

  it.each<[string, (token: string | undefined, response: ServerResponse) => void]>([
    [
      'answers 500',
      (_t, r) => {
        json(r, 500, { errcode: 'M_UNKNOWN' });
      },
    ],
    [
      'answers 429',
      (_t, r) => {
        json(r, 429, { errcode: 'M_LIMIT_EXCEEDED' });
      },
    ],
    [
      'answers 200 without a user_id',
      (_t, r) => {
        json(r, 200, { device_id: 'D' });
      },
    ],
    [
      'answers 200 with an invalid user_id',
      (_t, r) => {
        json(r, 200, { user_id: 'alice' });
      },
    ],
    [
      'answers 200 with a body that is not JSON',
      (_t, r) => {
        r.writeHead(200).end('<html>');
      },
    ],
    [
      'is slower than the timeout',
      (t, r) => {
        setTimeout(() => {
          validTokens(t, r);
        }, 1_500);
      },
    ],
  ])('is unavailable (never a user) when the homeserver %s', async (_name, answer) => {
    const hs = await homeserver(answer);
    await expect(authenticator(hs.url, { timeoutMs: 300 }).authenticate('alice-token')).rejects.toBeInstanceOf(
      AuthUnavailableError,
    );
  });

  it('is unavailable when nothing listens', async () => {
    const hs = await homeserver(validTokens);
    const server = servers.pop();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await expect(authenticator(hs.url).authenticate('alice-token')).rejects.toBeInstanceOf(AuthUnavailableError);
  });
});

describe('the gateway with the homeserver authenticator', () => {
  const api = {} as PushRulesApi;

  it.each<[string, number, unknown, number, unknown]>([
    [
      'an expired token keeps its soft logout, so the client keeps its keys',
      401,
      { errcode: 'M_UNKNOWN_TOKEN', error: 'Access token has expired', soft_logout: true },
      401,
      { errcode: 'M_UNKNOWN_TOKEN', error: 'Access token has expired', soft_logout: true },
    ],
    [
      'a logged-out token stays a hard logout',
      401,
      { errcode: 'M_UNKNOWN_TOKEN', error: 'Invalid access token passed.', soft_logout: false },
      401,
      { errcode: 'M_UNKNOWN_TOKEN', error: 'Invalid access token passed.', soft_logout: false },
    ],
    [
      'a refusal without soft_logout is a hard logout',
      401,
      { errcode: 'M_UNKNOWN_TOKEN', error: 'no' },
      401,
      { errcode: 'M_UNKNOWN_TOKEN', error: 'no', soft_logout: false },
    ],
    [
      '403 with a Matrix error keeps its status and code',
      403,
      { errcode: 'M_FORBIDDEN', error: 'Not allowed.' },
      403,
      { errcode: 'M_FORBIDDEN', error: 'Not allowed.', soft_logout: false },
    ],
    [
      'a refusal that is not a Matrix error',
      401,
      'Unauthorized',
      401,
      { errcode: 'M_UNKNOWN_TOKEN', error: 'Unknown access token.', soft_logout: false },
    ],
  ])('%s', async (_name, status, whoami, gatewayStatus, gatewayBody) => {
    const hs = await homeserver((_token, response) => {
      json(response, status, whoami);
    });
    const app = buildGatewayServer({
      api,
      authenticator: authenticator(hs.url),
      logger: createLogger('silent'),
      maxBodyBytes: 4096,
      maxJsonDepth: 31,
      requestTimeoutMs: 1000,
    });
    try {
      const response = await app.inject({
        method: 'GET',
        url: '/_matrix/client/v3/pushers',
        headers: { authorization: 'Bearer expired' },
      });
      expect(response.statusCode).toBe(gatewayStatus);
      expect(response.json()).toEqual(gatewayBody);
    } finally {
      await app.close();
    }
  });
});
