import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthUnavailableError } from '../../src/gateway/authenticator.js';
import { HomeserverAuthenticator, WHOAMI_PATH } from '../../src/gateway/homeserver-authenticator.js';

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

function authenticator(url: string, overrides: { cacheSeconds?: number; timeoutMs?: number; now?: () => number; cacheMaxEntries?: number } = {}) {
  return new HomeserverAuthenticator({ homeserverUrl: url, cacheSeconds: 30, cacheMaxEntries: 100, timeoutMs: 500, ...overrides });
}

describe('HomeserverAuthenticator', () => {
  it('asks whoami with the caller token and answers its user', async () => {
    const hs = await homeserver(validTokens);
    expect(await authenticator(hs.url).authenticate('alice-token')).toEqual({ userId: '@alice:example.org' });
    expect(hs.seen).toEqual(['alice-token']);
  });

  it.each([401, 403])('answers an unknown token when the homeserver says %i', async (status) => {
    const hs = await homeserver((_token, response) => {
      json(response, status, { errcode: 'M_UNKNOWN_TOKEN', error: 'no' });
    });
    expect(await authenticator(hs.url).authenticate('bad')).toEqual({ unknownToken: true });
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
    expect(await auth.authenticate('new-token')).toEqual({ unknownToken: true });
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
    expect(results).toEqual([1, 2, 3].map(() => ({ userId: '@alice:example.org' })));
    expect(hs.seen).toHaveLength(1);
  });

  it.each<[string, (token: string | undefined, response: ServerResponse) => void]>([
    ['answers 500', (_t, r) => { json(r, 500, { errcode: 'M_UNKNOWN' }); }],
    ['answers 429', (_t, r) => { json(r, 429, { errcode: 'M_LIMIT_EXCEEDED' }); }],
    ['answers 200 without a user_id', (_t, r) => { json(r, 200, { device_id: 'D' }); }],
    ['answers 200 with an invalid user_id', (_t, r) => { json(r, 200, { user_id: 'alice' }); }],
    ['answers 200 with a body that is not JSON', (_t, r) => { r.writeHead(200).end('<html>'); }],
    ['is slower than the timeout', (t, r) => { setTimeout(() => { validTokens(t, r); }, 1_500); }],
  ])('is unavailable (never a user) when the homeserver %s', async (_name, answer) => {
    const hs = await homeserver(answer);
    await expect(authenticator(hs.url, { timeoutMs: 300 }).authenticate('alice-token')).rejects.toBeInstanceOf(AuthUnavailableError);
  });

  it('is unavailable when nothing listens', async () => {
    const hs = await homeserver(validTokens);
    const server = servers.pop();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await expect(authenticator(hs.url).authenticate('alice-token')).rejects.toBeInstanceOf(AuthUnavailableError);
  });
});
