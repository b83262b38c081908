import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CORS_HEADERS } from '../../src/gateway/gateway-server.js';
import { HomeserverAuthenticator } from '../../src/gateway/homeserver-authenticator.js';
import { SEED } from '../support/seed-messages.js';
import { startGateway, type GatewayHarness } from './support/gateway-harness.js';
import { startHarness, type Harness } from './support/worker-harness.js';
import { aPusherSetAction } from '../support/builders.js';
import {
  expectCleanPrototype,
  forbiddenKeyMessage,
  POISONED_CASES,
  prototypeKeys,
} from '../support/poisoned-bodies.js';

/**
 * End to end: HTTP → gateway → RabbitMQ → worker → MongoDB wire protocol,
 * for every endpoint and error path of the gateway.
 */
const ALICE = '@gw-alice:example.org';
const BOB = '@gw-bob:example.org';
const TOKENS = {
  'alice-token': ALICE,
  'bob-token': BOB,
  'alice-phone-token': { user_id: ALICE, device_id: 'ALICEPHONE' },
  'alice-laptop-token': { user_id: ALICE, device_id: 'ALICELAPTOP' },
};

let h: Harness;
let gw: GatewayHarness;
beforeAll(async () => {
  h = await startHarness();
  gw = await startGateway({ amqpUrl: h.names.amqp.url, queue: h.names.queue, tokens: TOKENS });
});
afterAll(async () => {
  await gw.close();
  await h.close();
});

async function call(
  method: string,
  path: string,
  options: { token?: string | null; body?: unknown; raw?: string; version?: string } = {},
) {
  const token = options.token === undefined ? 'alice-token' : options.token;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  const body = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  const response = await fetch(`${gw.url}/_matrix/client/${options.version ?? 'v3'}/${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body }),
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: text === '' ? undefined : (JSON.parse(text) as unknown),
  };
}

const rule = (id: string) => `pushrules/global/override/${encodeURIComponent(id)}`;
const KEYWORD = { actions: ['notify'], conditions: [{ kind: 'event_match', key: 'content.body', pattern: 'cake' }] };

describe('gateway end to end', () => {
  it.each(['r0', 'v3'])('serves the whole ruleset under %s, with every kind present', async (version) => {
    const response = await call('GET', 'pushrules/', { version });
    expect(response.status).toBe(200);
    const { global } = response.body as { global: Record<string, unknown[]> };
    expect(Object.keys(global).sort()).toEqual(['content', 'override', 'room', 'sender', 'underride']);
    const globalOnly = await call('GET', 'pushrules/global/', { version });
    expect(globalOnly).toMatchObject({ status: 200, body: global });
  });

  it('creates, places, reads, changes and deletes a rule', async () => {
    expect(await call('PUT', rule('gw.second'), { body: KEYWORD })).toMatchObject({ status: 200, body: {} });
    expect(await call('PUT', `${rule('gw.first')}?before=gw.second`, { body: KEYWORD })).toMatchObject({
      status: 200,
      body: {},
    });
    expect(await call('PUT', `${rule('gw.third')}?after=gw.second`, { body: KEYWORD })).toMatchObject({
      status: 200,
      body: {},
    });
    const { body } = await call('GET', 'pushrules/');
    const own = (body as { global: { override: { rule_id: string; default: boolean }[] } }).global.override.filter(
      (r) => !r.default,
    );
    expect(own.map((r) => r.rule_id)).toEqual(['gw.first', 'gw.second', 'gw.third']);

    expect(await call('GET', rule('gw.first'))).toMatchObject({
      status: 200,
      body: { rule_id: 'gw.first', default: false, enabled: true, ...KEYWORD },
    });
    expect(await call('PUT', `${rule('gw.first')}/actions`, { body: { actions: [] } })).toMatchObject({
      status: 200,
      body: {},
    });
    expect(await call('GET', `${rule('gw.first')}/actions`)).toMatchObject({ status: 200, body: { actions: [] } });
    expect(await call('PUT', `${rule('gw.first')}/enabled`, { body: { enabled: false } })).toMatchObject({
      status: 200,
      body: {},
    });
    expect(await call('GET', `${rule('gw.first')}/enabled`)).toMatchObject({ status: 200, body: { enabled: false } });
    expect(await call('DELETE', rule('gw.first'))).toMatchObject({ status: 200, body: {} });
    expect(await call('GET', rule('gw.first'))).toMatchObject({
      status: 404,
      body: { errcode: 'M_NOT_FOUND', error: SEED.ruleNotFound },
    });
  });

  it('acts for the token user only: Bob sees none of Alice’s rules, and they are stored as Alice’s', async () => {
    await call('PUT', rule('gw.alice-only'), { body: KEYWORD });
    expect(await call('GET', rule('gw.alice-only'), { token: 'bob-token' })).toMatchObject({ status: 404 });
    const stored = await h.db
      .collection<{ _id: string; push_rules?: { content_json: string } }>('account_data')
      .findOne({ _id: ALICE });
    expect(stored?.push_rules?.content_json).toContain('gw.alice-only');
  });

  it.each([
    ['a scope other than global', 'PUT', 'pushrules/device/override/x', KEYWORD, 400, 'M_INVALID_PARAM', SEED.scope],
    ['a reserved rule ID', 'PUT', rule('.gw.dot'), KEYWORD, 400, 'M_INVALID_PARAM', SEED.dotReserved],
    [
      'an unknown before rule',
      'PUT',
      `${rule('gw.x')}?before=nope`,
      KEYWORD,
      404,
      'M_NOT_FOUND',
      SEED.placementNotFound,
    ],
    [
      'deleting a server-default rule',
      'DELETE',
      rule('.m.rule.master'),
      undefined,
      400,
      'M_INVALID_PARAM',
      SEED.deleteDefault,
    ],
    ['a rule without actions', 'PUT', rule('gw.bad'), { conditions: [] }, 400, 'M_BAD_JSON', undefined],
    [
      'enabled that is not a boolean',
      'PUT',
      `${rule('.m.rule.master')}/enabled`,
      { enabled: 'yes' },
      400,
      'M_BAD_JSON',
      undefined,
    ],
    [
      'a pusher without its fields',
      'POST',
      'pushers/set',
      { pushkey: 'k', app_id: 'a', kind: 'http' },
      400,
      'M_MISSING_PARAM',
      undefined,
    ],
  ])('answers %s with the worker error', async (_name, method, path, body, status, errcode, error) => {
    await call('GET', 'pushrules/');
    const response = await call(method, path, { body });
    expect(response.status).toBe(status);
    expect(response.body).toMatchObject({ errcode, ...(error === undefined ? {} : { error }) });
  });

  it('sets, lists and deletes a pusher', async () => {
    const pusher = aPusherSetAction({ pushkey: 'gw-key', app_id: 'org.example.gw' });
    expect(await call('POST', 'pushers/set', { body: pusher, token: 'bob-token' })).toMatchObject({
      status: 200,
      body: {},
    });
    expect(await call('GET', 'pushers', { token: 'bob-token' })).toMatchObject({
      status: 200,
      body: { pushers: [pusher] },
    });
    expect(await call('GET', 'pushers')).toMatchObject({ status: 200, body: { pushers: [] } });
    expect(
      await call('POST', 'pushers/set', {
        body: { pushkey: 'gw-key', app_id: 'org.example.gw', kind: null },
        token: 'bob-token',
      }),
    ).toMatchObject({ status: 200 });
    expect(await call('GET', 'pushers', { token: 'bob-token' })).toMatchObject({ body: { pushers: [] } });
  });

  it.each([
    ['no token', 'GET', 'pushers', { token: null }, 401, 'M_MISSING_TOKEN'],
    ['an unknown token', 'GET', 'pushers', { token: 'stolen' }, 401, 'M_UNKNOWN_TOKEN'],
    ['an unknown path', 'GET', 'pushrules/global/override/x/y/z', {}, 404, 'M_UNRECOGNIZED'],
    ['a wrong method', 'DELETE', 'pushers', {}, 405, 'M_UNRECOGNIZED'],
    ['a body that is not JSON', 'PUT', rule('gw.nj'), { raw: '{actions' }, 400, 'M_NOT_JSON'],
    ['a body over the limit', 'PUT', rule('gw.big'), { body: { actions: ['x'.repeat(20_000)] } }, 413, 'M_TOO_LARGE'],
  ])('answers %s itself', async (_name, method, path, options, status, errcode) => {
    const response = await call(method, path, options);
    expect(response.status).toBe(status);
    expect(response.body).toMatchObject({ errcode });
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('refuses a pusher nested 7,000 deep with 400 M_BAD_JSON, and serves the other callers meanwhile', async () => {
    // ~14 KB. Past ~4,100 levels the client's JSON.stringify overflowed,
    // which dropped the broker connection under every pending call.
    const deep = JSON.stringify(aPusherSetAction({ pushkey: 'gw-deep' })).replace(
      /}}$/,
      `, "deep": ${'['.repeat(7_000)}${']'.repeat(7_000)}}}`,
    );
    const others = Array.from({ length: 8 }, async (_, i) =>
      call('GET', 'pushers', { token: i % 2 === 0 ? 'alice-token' : 'bob-token' }),
    );
    const refused = await call('POST', 'pushers/set', { raw: deep });
    expect(refused).toMatchObject({
      status: 400,
      body: { errcode: 'M_BAD_JSON', error: 'Request body nests arrays and objects deeper than 31 levels.' },
    });
    for (const response of await Promise.all(others)) expect(response.status).toBe(200);
    expect(await call('GET', 'pushers')).toMatchObject({ status: 200, body: { pushers: [] } });
  });

  it.each(POISONED_CASES)(
    'refuses %s with a key %s: 400 M_BAD_JSON, nothing stored, no pollution',
    async (_place, key, place) => {
      const before = prototypeKeys();
      const response = await call(place.http.method, place.http.path, {
        raw: place.http.body(key),
        token: 'bob-token',
      });
      expect(response).toMatchObject({
        status: 400,
        body: { errcode: 'M_BAD_JSON', error: forbiddenKeyMessage(place.httpPath(key)) },
      });
      expect(await call('GET', 'pushrules/global/override/poison', { token: 'bob-token' })).toMatchObject({
        status: 404,
      });
      expect(await call('GET', 'pushers', { token: 'bob-token' })).toMatchObject({
        status: 200,
        body: { pushers: [] },
      });
      expectCleanPrototype(before);
    },
  );

  it('answers a CORS preflight', async () => {
    const response = await fetch(`${gw.url}/_matrix/client/v3/pushrules/global/room/x`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example.org', 'access-control-request-method': 'PUT' },
    });
    expect(response.status).toBe(200);
    for (const [name, value] of Object.entries(CORS_HEADERS)) expect(response.headers.get(name)).toBe(value);
  });
});

describe('gateway: the device of the access token', () => {
  const pusherPath = 'pushers/set';
  const listed = async (token: string) =>
    ((await call('GET', 'pushers', { token })).body as { pushers: Record<string, unknown>[] }).pushers;

  it('from the token file: recorded with a new pusher, kept on an update from another device, never taken from the body', async () => {
    const pusher = aPusherSetAction({ pushkey: 'gw-device-key', app_id: 'org.example.gw.device' });
    const forged = { ...pusher, device_id: 'FORGED', 'org.matrix.msc3881.device_id': 'FORGED' };
    expect(await call('POST', pusherPath, { body: forged, token: 'alice-phone-token' })).toMatchObject({
      status: 200,
      body: {},
    });
    expect((await listed('alice-token')).find((p) => p['pushkey'] === 'gw-device-key')).toEqual({
      ...pusher,
      enabled: true,
      'org.matrix.msc3881.enabled': true,
      device_id: 'ALICEPHONE',
      'org.matrix.msc3881.device_id': 'ALICEPHONE',
    });
    // The laptop switches the phone's pushes off, posting back what it listed.
    const [phones] = (await listed('alice-laptop-token')).filter((p) => p['pushkey'] === 'gw-device-key');
    expect(
      await call('POST', pusherPath, {
        body: { ...phones, 'org.matrix.msc3881.enabled': false },
        token: 'alice-laptop-token',
      }),
    ).toMatchObject({ status: 200 });
    expect((await listed('alice-token')).find((p) => p['pushkey'] === 'gw-device-key')).toMatchObject({
      enabled: false,
      device_id: 'ALICEPHONE',
    });
  });

  it('from the token file: a token without a device creates a pusher of an unknown device', async () => {
    const pusher = aPusherSetAction({ pushkey: 'gw-no-device', app_id: 'org.example.gw.device' });
    await call('POST', pusherPath, { body: pusher, token: 'alice-token' });
    const mine = (await listed('alice-token')).find((p) => p['pushkey'] === 'gw-no-device');
    expect(mine).toMatchObject({ enabled: true });
    expect(mine).not.toHaveProperty('device_id');
  });

  it("from the homeserver's whoami", async () => {
    const whoami = createServer((request, response) => {
      const token = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
      response.writeHead(token === 'hs-token' ? 200 : 401, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify(
          token === 'hs-token' ? { user_id: BOB, device_id: 'BOBTABLET' } : { errcode: 'M_UNKNOWN_TOKEN', error: 'no' },
        ),
      );
    });
    await new Promise<void>((resolve) => whoami.listen(0, '127.0.0.1', resolve));
    const homeserverUrl = `http://127.0.0.1:${(whoami.address() as AddressInfo).port}`;
    const authenticator = new HomeserverAuthenticator({
      homeserverUrl,
      cacheSeconds: 30,
      cacheMaxEntries: 10,
      timeoutMs: 2_000,
    });
    const hsGateway = await startGateway({ amqpUrl: h.names.amqp.url, queue: h.names.queue, authenticator });
    try {
      const pusher = aPusherSetAction({ pushkey: 'gw-hs-key', app_id: 'org.example.gw.hs' });
      const response = await fetch(`${hsGateway.url}/_matrix/client/v3/pushers/set`, {
        method: 'POST',
        headers: { authorization: 'Bearer hs-token', 'content-type': 'application/json' },
        body: JSON.stringify({ ...pusher, device_id: 'FORGED' }),
      });
      expect(response.status).toBe(200);
      const reply = await h.caller.call(h.names.queue, { op: 'get_pushers', user_id: BOB });
      expect(
        (reply.body as { pushers: Record<string, unknown>[] }).pushers.find((p) => p['pushkey'] === 'gw-hs-key'),
      ).toMatchObject({
        device_id: 'BOBTABLET',
        'org.matrix.msc3881.device_id': 'BOBTABLET',
      });
    } finally {
      await hsGateway.close();
      whoami.closeAllConnections();
      await new Promise((resolve) => whoami.close(resolve));
    }
  });
});

describe('gateway when the workers do not answer', () => {
  it('answers 503 at the deadline when no worker takes the request', async () => {
    const queue = `idle.${randomUUID()}`;
    await h.caller.channel.assertQueue(queue, { autoDelete: true });
    const slow = await startGateway({ amqpUrl: h.names.amqp.url, queue, tokens: TOKENS, requestTimeoutMs: 400 });
    try {
      const started = Date.now();
      const response = await fetch(`${slow.url}/_matrix/client/v3/pushers`, {
        headers: { authorization: 'Bearer alice-token' },
      });
      const elapsed = Date.now() - started;
      expect(response.status).toBe(503);
      expect(await response.json()).toMatchObject({ errcode: 'M_UNKNOWN' });
      expect(elapsed).toBeGreaterThanOrEqual(400);
      expect(elapsed).toBeLessThan(5_000);
    } finally {
      await slow.close();
      await h.caller.channel.deleteQueue(queue);
    }
  });

  it('answers 503 at once when no queue exists for the workers', async () => {
    const none = await startGateway({
      amqpUrl: h.names.amqp.url,
      queue: `missing.${randomUUID()}`,
      tokens: TOKENS,
      requestTimeoutMs: 10_000,
    });
    try {
      const started = Date.now();
      const response = await fetch(`${none.url}/_matrix/client/v3/pushrules/`, {
        headers: { authorization: 'Bearer alice-token' },
      });
      expect(response.status).toBe(503);
      // Answered by the missing queue, not by the 10 s deadline.
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await none.close();
    }
  });
});
