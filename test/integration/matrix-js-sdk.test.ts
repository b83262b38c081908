import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  ConditionKind,
  createClient,
  HttpApiEvent,
  MatrixError,
  PUSHER_DEVICE_ID,
  PUSHER_ENABLED,
  PushRuleActionName,
  PushRuleKind,
  TweakName,
  type IPushRule,
  type MatrixClient,
} from 'matrix-js-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HomeserverAuthenticator, WHOAMI_PATH } from '../../src/gateway/homeserver-authenticator.js';
import { SEED } from '../support/seed-messages.js';
import { startFrontProxy } from './support/front-proxy.js';
import { startGateway, type GatewayHarness } from './support/gateway-harness.js';
import { startHarness, type Harness } from './support/worker-harness.js';
import { aPusherSetAction } from '../support/builders.js';

/**
 * A real Matrix client (matrix-js-sdk 36, the last line that runs on Node 20)
 * against a homeserver front that routes the push paths to the gateway, as
 * docs/gateway.md tells operators to: what it sees is what any client of the v3
 * API sees.
 */
const USER = '@sdk:example.org';
const TOKENS = {
  'sdk-token': USER,
  'sdk-phone-token': { user_id: USER, device_id: 'SDKPHONE' },
  'sdk-laptop-token': { user_id: USER, device_id: 'SDKLAPTOP' },
};
let h: Harness;
let gw: GatewayHarness;
let front: Awaited<ReturnType<typeof startFrontProxy>>;
let client: MatrixClient;

beforeAll(async () => {
  h = await startHarness();
  gw = await startGateway({ amqpUrl: h.names.amqp.url, queue: h.names.queue, tokens: TOKENS });
  front = await startFrontProxy(gw.url);
  client = createClient({ baseUrl: front.url, accessToken: 'sdk-token', userId: USER });
});
afterAll(async () => {
  client.stopClient();
  await front.close();
  await gw.close();
  await h.close();
});

const KEYWORD: Pick<IPushRule, 'actions' | 'conditions'> = {
  actions: [PushRuleActionName.Notify],
  conditions: [{ kind: ConditionKind.EventMatch, key: 'content.body', pattern: 'sdk' }],
};
const ownRules = async (kind: 'override' | 'room') =>
  (await client.getPushRules()).global[kind]?.filter((r) => !r.default).map((r) => r.rule_id) ?? [];

describe('matrix-js-sdk through the gateway', () => {
  it('getPushRules: the server defaults, all five kinds', async () => {
    const rules = await client.getPushRules();
    expect(Object.keys(rules.global).sort()).toEqual(['content', 'override', 'room', 'sender', 'underride']);
    expect(rules.global.override?.[0]).toMatchObject({ rule_id: '.m.rule.master', default: true, enabled: false });
  });

  it('addPushRule then getPushRules: the rule is there', async () => {
    expect(await client.addPushRule('global', PushRuleKind.Override, 'sdk.keyword', KEYWORD)).toEqual({});
    expect(
      await client.addPushRule('global', PushRuleKind.RoomSpecific, '!room:example.org', {
        actions: [PushRuleActionName.DontNotify],
      }),
    ).toEqual({});
    expect(await ownRules('override')).toEqual(['sdk.keyword']);
    expect(await ownRules('room')).toEqual(['!room:example.org']);
  });

  it('setPushRuleEnabled and setPushRuleActions change the rule', async () => {
    await client.setPushRuleEnabled('global', PushRuleKind.Override, 'sdk.keyword', false);
    await client.setPushRuleActions('global', PushRuleKind.Override, 'sdk.keyword', [
      PushRuleActionName.Notify,
      { set_tweak: TweakName.Sound, value: 'default' },
    ]);
    const rule = (await client.getPushRules()).global.override?.find((r) => r.rule_id === 'sdk.keyword');
    expect(rule).toMatchObject({ enabled: false, actions: ['notify', { set_tweak: 'sound', value: 'default' }] });
  });

  it('setPushRuleEnabled on a server-default rule', async () => {
    await client.setPushRuleEnabled('global', PushRuleKind.Override, '.m.rule.master', true);
    expect((await client.getPushRules()).global.override?.[0]).toMatchObject({
      rule_id: '.m.rule.master',
      enabled: true,
    });
  });

  it('deletePushRule removes the rule', async () => {
    expect(await client.deletePushRule('global', PushRuleKind.Override, 'sdk.keyword')).toEqual({});
    expect(await ownRules('override')).toEqual([]);
  });

  it('sees the seed errors as MatrixError with errcode and status', async () => {
    const error = await client.deletePushRule('global', PushRuleKind.Override, 'sdk.missing').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MatrixError);
    expect(error).toMatchObject({ errcode: 'M_NOT_FOUND', httpStatus: 404, data: { error: SEED.ruleNotFound } });
    const reserved = await client
      .addPushRule('global', PushRuleKind.Override, '.sdk.dot', KEYWORD)
      .catch((e: unknown) => e);
    expect(reserved).toMatchObject({ errcode: 'M_INVALID_PARAM', httpStatus: 400, data: { error: SEED.dotReserved } });
  });

  it('setPusher, getPushers and removePusher', async () => {
    const pusher = aPusherSetAction({ pushkey: 'sdk-pushkey', app_id: 'org.example.sdk' });
    expect(await client.setPusher(pusher)).toEqual({});
    // The SDK marks pushers `enabled` itself when the server predates MSC3881.
    expect(await client.getPushers()).toMatchObject({ pushers: [pusher] });
    expect(await client.removePusher('sdk-pushkey', 'org.example.sdk')).toEqual({});
    expect(await client.getPushers()).toEqual({ pushers: [] });
  });

  it("switches another session's pushes off and on as Element does (MSC3881), the pusher staying that session's", async () => {
    const phone = createClient({
      baseUrl: front.url,
      accessToken: 'sdk-phone-token',
      userId: USER,
      deviceId: 'SDKPHONE',
    });
    const laptop = createClient({
      baseUrl: front.url,
      accessToken: 'sdk-laptop-token',
      userId: USER,
      deviceId: 'SDKLAPTOP',
    });
    try {
      await phone.setPusher(aPusherSetAction({ pushkey: 'sdk-phone-key', app_id: 'org.example.sdk' }));
      // Element's useOwnDevices: find the session's pusher by device, post it back with the flag set.
      const toggle = async (enabled: boolean) => {
        const { pushers } = await laptop.getPushers();
        const pusher = pushers.find((p) => p[PUSHER_DEVICE_ID.name] === 'SDKPHONE');
        if (pusher === undefined) throw new Error('the phone has no pusher listed under its device');
        await laptop.setPusher({ ...pusher, [PUSHER_ENABLED.name]: enabled });
      };
      await toggle(false);
      expect((await phone.getPushers()).pushers).toMatchObject([
        {
          pushkey: 'sdk-phone-key',
          enabled: false,
          [PUSHER_ENABLED.name]: false,
          device_id: 'SDKPHONE',
          [PUSHER_DEVICE_ID.name]: 'SDKPHONE',
        },
      ]);
      await toggle(true);
      expect((await phone.getPushers()).pushers).toMatchObject([
        { enabled: true, [PUSHER_ENABLED.name]: true, device_id: 'SDKPHONE' },
      ]);
      await phone.removePusher('sdk-phone-key', 'org.example.sdk');
    } finally {
      phone.stopClient();
      laptop.stopClient();
    }
  });

  it('is told when its token is not valid', async () => {
    const stranger = createClient({ baseUrl: front.url, accessToken: 'forged', userId: '@mallory:example.org' });
    const error = await stranger.getPushers().catch((e: unknown) => e);
    expect(error).toMatchObject({ errcode: 'M_UNKNOWN_TOKEN', httpStatus: 401 });
    stranger.stopClient();
  });
});

describe('matrix-js-sdk and a refused token, through the homeserver authenticator', () => {
  /** A homeserver whose whoami refuses every token as `refusal` says. */
  async function refusingHomeserver(refusal: Record<string, unknown>) {
    const server = createServer((request, response) => {
      const status = request.url === WHOAMI_PATH ? 401 : 404;
      response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(refusal));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: async () => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      },
    };
  }

  it.each([
    [
      'an expired token: soft logout, the client may keep its keys',
      { errcode: 'M_UNKNOWN_TOKEN', error: 'Access token has expired', soft_logout: true },
      true,
    ],
    [
      'a logged-out token: hard logout',
      { errcode: 'M_UNKNOWN_TOKEN', error: 'Invalid access token passed.', soft_logout: false },
      false,
    ],
  ])('%s', async (_name, refusal, softLogout) => {
    const hs = await refusingHomeserver(refusal);
    const refusing = await startGateway({
      amqpUrl: h.names.amqp.url,
      queue: h.names.queue,
      authenticator: new HomeserverAuthenticator({
        homeserverUrl: hs.url,
        cacheSeconds: 30,
        cacheMaxEntries: 10,
        timeoutMs: 2_000,
      }),
    });
    const proxy = await startFrontProxy(refusing.url);
    const expired = createClient({ baseUrl: proxy.url, accessToken: 'expired-token', userId: USER });
    try {
      // What a client such as Element acts on: the session-logged-out event and its error's soft_logout.
      const loggedOut = new Promise<MatrixError>((resolve) => expired.once(HttpApiEvent.SessionLoggedOut, resolve));
      const error = await expired.getPushers().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(MatrixError);
      expect(error).toMatchObject({
        errcode: 'M_UNKNOWN_TOKEN',
        httpStatus: 401,
        data: { error: refusal.error, soft_logout: softLogout },
      });
      expect((await loggedOut).data['soft_logout']).toBe(softLogout);
    } finally {
      expired.stopClient();
      await proxy.close();
      await refusing.close();
      await hs.close();
    }
  });
});

describe('matrix-js-sdk and the write rate limit', () => {
  it('sees a rate-limit error with the wait from Retry-After, and reads still pass', async () => {
    const limited = await startGateway({
      amqpUrl: h.names.amqp.url,
      queue: h.names.queue,
      tokens: { 'limited-token': '@sdk-limited:example.org' },
      writeRateLimit: { perSecond: 1, burst: 2, maxUsers: 10 },
    });
    const proxy = await startFrontProxy(limited.url);
    const sdk = createClient({ baseUrl: proxy.url, accessToken: 'limited-token', userId: '@sdk-limited:example.org' });
    try {
      // The first read stores the user's rules (the seed answers writes before it with 404).
      await sdk.getPushRules();
      await sdk.setPushRuleEnabled('global', PushRuleKind.Override, '.m.rule.master', true);
      await sdk.setPushRuleEnabled('global', PushRuleKind.Override, '.m.rule.master', false);
      const error = await sdk
        .setPushRuleEnabled('global', PushRuleKind.Override, '.m.rule.master', true)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(MatrixError);
      const matrixError = error as MatrixError;
      expect({
        errcode: matrixError.errcode,
        httpStatus: matrixError.httpStatus,
        rateLimit: matrixError.isRateLimitError(),
      }).toEqual({
        errcode: 'M_LIMIT_EXCEEDED',
        httpStatus: 429,
        rateLimit: true,
      });
      // The header (whole seconds) wins over retry_after_ms in the SDK.
      expect(matrixError.getRetryAfterMs()).toBe(1000);
      expect(matrixError.data['retry_after_ms']).toBeGreaterThan(0);
      expect((await sdk.getPushRules()).global.override?.[0]).toMatchObject({
        rule_id: '.m.rule.master',
        enabled: false,
      });
    } finally {
      sdk.stopClient();
      await proxy.close();
      await limited.close();
    }
  });
});
