import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NotifyNotification, NotifyRecipient } from '../../src/client/push-rules-client.js';
import { PushRulesError } from '../../src/client/push-rules-client.js';
import type { PusherSetAction } from '../../src/pushers/pusher.js';
import { eventually } from '../support/eventually.js';
import type { RecordedRequest } from '../support/gateway-double-records.js';
import { PushGatewayDouble } from '../support/push-gateway-double.js';
import {
  listenForChanges,
  startDeliveringWorker,
  takeDeadLetters,
  type DeliveringWorker,
} from './support/delivery-harness.js';

const ALICE = '@alice:example.org';
const BOB = '@bob:example.org';
const CAROL = '@carol:example.org';
const APP = 'org.example.app';
/** `pushkey_ts` is when the pusher was set: checked on its own below. */
const ANY_TIMESTAMP: unknown = expect.any(Number);

/** How long a test waits for the worker to get a request to the gateway: generous, for a busy machine. */
const WAIT_MS = 30_000;

function anHttpPusher(gateway: PushGatewayDouble, pushkey: string, overrides: Partial<PusherSetAction> = {}) {
  return {
    kind: 'http',
    app_id: APP,
    pushkey,
    app_display_name: 'App',
    device_display_name: pushkey,
    lang: 'en',
    data: { url: gateway.notifyUrl },
    ...overrides,
  } satisfies PusherSetAction;
}

function aMessage(n: number, overrides: Partial<NotifyNotification> = {}): NotifyNotification {
  return {
    event_id: `$event${String(n)}`,
    room_id: '!room:example.org',
    type: 'm.room.message',
    sender: '@dave:example.org',
    sender_display_name: 'Dave',
    room_name: 'Team',
    content: { msgtype: 'm.text', body: `message ${String(n)}` },
    ...overrides,
  };
}

const notified = (userId: string, overrides: Partial<NotifyRecipient> = {}): NotifyRecipient => ({
  user_id: userId,
  actions: ['notify', { set_tweak: 'sound', value: 'default' }],
  counts: { unread: 1 },
  ...overrides,
});

/** The event IDs a device received, in order, each once (a retried request counts once). */
function eventsOf(requests: readonly RecordedRequest[], pushkey: string): string[] {
  const events = requests
    .filter((request) => request.pushkeys.includes(pushkey) && request.answer === 200)
    .map((request) => (request.body as { notification: { event_id: string } }).notification.event_id);
  return events.filter((event, index) => events.indexOf(event) === index);
}

describe('push delivery through the worker pool', () => {
  let gateway: PushGatewayDouble;
  let other: PushGatewayDouble;
  let h: DeliveringWorker;

  beforeAll(async () => {
    gateway = await PushGatewayDouble.start();
    other = await PushGatewayDouble.start();
  });

  afterAll(async () => {
    await gateway.close();
    await other.close();
  });

  afterEach(async () => {
    await h.close();
    gateway.restore();
    gateway.clearRequests();
    other.restore();
    other.clearRequests();
  });

  it('delivers a fan-out exactly as specified: one request per user and gateway, formats, counts, tweaks', async () => {
    h = await startDeliveringWorker();
    await h.client.setPusher(
      ALICE,
      anHttpPusher(gateway, 'alice-phone', { data: { url: gateway.notifyUrl, custom: 1 } }),
    );
    await h.client.setPusher(
      ALICE,
      anHttpPusher(gateway, 'alice-tablet', { data: { url: gateway.notifyUrl, custom: 1 } }),
    );
    await h.client.setPusher(
      BOB,
      anHttpPusher(other, 'bob-phone', { data: { url: other.notifyUrl, format: 'event_id_only' } }),
    );
    await h.client.setPusher(BOB, {
      kind: 'email',
      app_id: 'm.email',
      pushkey: 'bob@example.org',
      app_display_name: 'Mail',
      device_display_name: 'Mail',
      lang: 'en',
      data: {},
    });
    const reply = await h.client.notify(
      aMessage(1),
      [
        notified(ALICE, { counts: { unread: 0, missed_calls: 0 }, user_is_target: true }),
        notified(BOB, { actions: ['notify', { set_tweak: 'highlight' }] }),
        notified(CAROL),
      ],
      { reply: true },
    );
    expect(reply).toEqual({ recipients: 2, devices: 3 });
    const [aliceRequest] = await gateway.waitForRequests(1, WAIT_MS);
    const [bobRequest] = await other.waitForRequests(1, WAIT_MS);
    const alice = (aliceRequest?.body as { notification: Record<string, unknown> }).notification;
    expect(alice).toEqual({
      event_id: '$event1',
      room_id: '!room:example.org',
      type: 'm.room.message',
      sender: '@dave:example.org',
      sender_display_name: 'Dave',
      room_name: 'Team',
      user_is_target: true,
      prio: 'high',
      content: { msgtype: 'm.text', body: 'message 1' },
      counts: { unread: 0, missed_calls: 0 },
      devices: [
        {
          app_id: APP,
          pushkey: 'alice-phone',
          pushkey_ts: ANY_TIMESTAMP,
          data: { custom: 1 },
          tweaks: { sound: 'default' },
        },
        {
          app_id: APP,
          pushkey: 'alice-tablet',
          pushkey_ts: ANY_TIMESTAMP,
          data: { custom: 1 },
          tweaks: { sound: 'default' },
        },
      ],
    });
    const pushkeyTs = (alice['devices'] as { pushkey_ts: number }[])[0]?.pushkey_ts ?? 0;
    expect(Math.abs(pushkeyTs - Date.now() / 1000)).toBeLessThan(120);
    expect((bobRequest?.body as { notification: unknown }).notification).toEqual({
      event_id: '$event1',
      room_id: '!room:example.org',
      counts: { unread: 1 },
      prio: 'high',
      devices: [
        {
          app_id: APP,
          pushkey: 'bob-phone',
          pushkey_ts: ANY_TIMESTAMP,
          data: { format: 'event_id_only' },
          tweaks: { highlight: true },
        },
      ],
    });
    await sleep(300);
    expect(gateway.requests).toHaveLength(1);
    expect(other.requests).toHaveLength(1);
  });

  it('removes exactly the pusher of a rejected pushkey, announces it, and delivers to the other device', async () => {
    h = await startDeliveringWorker();
    const changes = await listenForChanges(h.names, 'm.pushers');
    try {
      await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-phone'));
      await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-old-phone'));
      // Alice has the same pushkey under another app, and so has Bob (set_pusher would take the same app's
      // pushkey from another user): neither is what the gateway rejected.
      await h.client.setPusher(
        ALICE,
        anHttpPusher(other, 'alice-old-phone', { app_id: 'other.app', data: { url: other.notifyUrl } }),
      );
      await h.client.setPusher(BOB, anHttpPusher(gateway, 'alice-old-phone', { app_id: 'bob.app' }));
      gateway.reject('alice-old-phone');
      changes.events.length = 0;
      await h.client.notify(aMessage(1), [notified(ALICE)]);
      await eventually(async () => {
        const { pushers } = await h.client.getPushers(ALICE);
        expect(pushers.map((p) => `${p.app_id}/${p.pushkey}`)).toEqual([
          `${APP}/alice-phone`,
          'other.app/alice-old-phone',
        ]);
      });
      expect((await h.client.getPushers(BOB)).pushers.map((p) => p.pushkey)).toEqual(['alice-old-phone']);
      await eventually(() => {
        expect(changes.events, JSON.stringify(changes.events)).toContainEqual(
          expect.objectContaining({ user_id: ALICE, type: 'm.pushers' }),
        );
      });
      // The next notification goes to the phone alone on that gateway.
      gateway.clearRequests();
      await h.client.notify(aMessage(2), [notified(ALICE)]);
      const requests = await gateway.waitForRequests(1, WAIT_MS);
      expect(requests[0]?.pushkeys).toEqual(['alice-phone']);
    } finally {
      await changes.close();
    }
  });

  it("keeps one device's notifications in publish order while its gateway fails and recovers", async () => {
    h = await startDeliveringWorker();
    await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-phone'));
    await h.client.setPusher(BOB, anHttpPusher(other, 'bob-phone', { data: { url: other.notifyUrl } }));
    gateway.behave({ kind: 'status', status: 503 }, { times: 3 });
    for (let n = 1; n <= 6; n += 1) await h.client.notify(aMessage(n), [notified(ALICE), notified(BOB)]);
    // Bob's gateway is not held by Alice's.
    await eventually(() => {
      expect(eventsOf(other.requests, 'bob-phone')).toHaveLength(6);
    });
    await eventually(() => {
      expect(eventsOf(gateway.requests, 'alice-phone')).toEqual([1, 2, 3, 4, 5, 6].map((n) => `$event${String(n)}`));
    });
    expect(gateway.requests.filter((r) => r.answer === 503)).toHaveLength(3);
  });

  it('gives a device at most the newest N notifications after an outage', async () => {
    h = await startDeliveringWorker({ delivery: { maxPendingPerDevice: 3 } });
    await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-phone'));
    gateway.behave({ kind: 'status', status: 503 });
    for (let n = 1; n <= 12; n += 1) await h.client.notify(aMessage(n), [notified(ALICE)], { reply: true });
    await sleep(500);
    gateway.restore();
    await eventually(() => {
      expect(eventsOf(gateway.requests, 'alice-phone').slice(-3)).toEqual(['$event10', '$event11', '$event12']);
    });
    const delivered = eventsOf(gateway.requests, 'alice-phone');
    // The newest 3, and at most the one that was being sent when they arrived.
    expect(delivered.length).toBeLessThanOrEqual(4);
    expect(delivered).toEqual([...delivered].sort((a, b) => Number(a.slice(6)) - Number(b.slice(6))));
  });

  it('gives a notification up at the end of a short window and moves on', async () => {
    h = await startDeliveringWorker({ delivery: { giveUpAfterMs: 1000, retryBaseMs: 100, retryMaxMs: 200 } });
    await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-phone'));
    // Five failures of the first open the gateway's breaker; its window ends before the first probe, a
    // second later, and the probe is the second notification, which the gateway then takes.
    gateway.behave({ kind: 'status', status: 500 }, { times: 5 });
    await h.client.notify(aMessage(1), [notified(ALICE)], { reply: true });
    await h.client.notify(aMessage(2), [notified(ALICE)], { reply: true });
    await eventually(() => {
      expect(eventsOf(gateway.requests, 'alice-phone')).toEqual(['$event2']);
    });
    expect(gateway.requests.map((r) => r.answer)).toEqual([500, 500, 500, 500, 500, 200]);
  });

  it('never follows a redirect: the request fails for good and the next one goes', async () => {
    h = await startDeliveringWorker();
    const target = await PushGatewayDouble.start();
    try {
      await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-phone'));
      gateway.behave({ kind: 'redirect', location: target.notifyUrl }, { times: 1 });
      await h.client.notify(aMessage(1), [notified(ALICE)]);
      await h.client.notify(aMessage(2), [notified(ALICE)]);
      await eventually(() => {
        expect(eventsOf(gateway.requests, 'alice-phone')).toEqual(['$event2']);
      });
      expect(gateway.requests.map((r) => r.answer)).toEqual([302, 200]);
      expect(target.connections).toBe(0);
    } finally {
      await target.close();
    }
  });

  it('sends nothing to a pusher removed while its notification waited behind a failing one', async () => {
    h = await startDeliveringWorker();
    await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-phone'));
    gateway.behave({ kind: 'status', status: 503 });
    await h.client.notify(aMessage(1), [notified(ALICE)], { reply: true });
    await gateway.waitForRequests(1, WAIT_MS);
    await h.client.setPusher(ALICE, { kind: null, app_id: APP, pushkey: 'alice-phone' });
    gateway.restore();
    await sleep(1500);
    expect(gateway.requests.every((r) => r.answer === 503)).toBe(true);
  });

  it('schedules a republished message (same messageId) once', async () => {
    h = await startDeliveringWorker();
    await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-phone'));
    const first = await h.client.notify(aMessage(1), [notified(ALICE)], { reply: true, messageId: 'notify-1' });
    const again = await h.client.notify(aMessage(1), [notified(ALICE)], { reply: true, messageId: 'notify-1' });
    expect(again).toEqual(first);
    await gateway.waitForRequests(1, WAIT_MS);
    await sleep(500);
    expect(gateway.requests).toHaveLength(1);
  });

  it.each<[string, () => Promise<unknown>, string]>([
    [
      'a recipient that is not a user ID',
      async () => h.client.notify(aMessage(1), [notified('alice')], { reply: true }),
      'recipients.0.user_id is not a valid Matrix user ID.',
    ],
    [
      'counts that are not counts',
      async () =>
        h.client.notify(aMessage(1), [{ user_id: ALICE, counts: { unread: -1 } }] as NotifyRecipient[], {
          reply: true,
        }),
      '',
    ],
  ])('refuses %s with BadJson, sends nothing and dead-letters it', async (_name, send, message) => {
    h = await startDeliveringWorker();
    await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-phone'));
    const error = await send().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PushRulesError);
    expect((error as PushRulesError).errcode).toBe('M_BAD_JSON');
    if (message !== '') expect((error as PushRulesError).message).toContain(message);
    await eventually(async () => {
      expect((await takeDeadLetters(h.names)).map((m) => m['op'])).toEqual(['notify']);
    });
    expect(gateway.requests).toEqual([]);
  });

  it('refuses a notify from an untrusted publisher: Forbidden, nothing sent, dead-lettered', async () => {
    h = await startDeliveringWorker({ trustedPublishers: ['the-homeserver'] });
    const error = await h.client.notify(aMessage(1), [notified(ALICE)], { reply: true }).catch((e: unknown) => e);
    expect((error as PushRulesError).errcode).toBe('M_FORBIDDEN');
    await eventually(async () => {
      expect(await takeDeadLetters(h.names)).toHaveLength(1);
    });
    expect(gateway.requests).toEqual([]);
  });

  it('resolves a notify without reply on the broker confirm, and still delivers it', async () => {
    h = await startDeliveringWorker();
    await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-phone'));
    await expect(h.client.notify(aMessage(1), [notified(ALICE)])).resolves.toBeUndefined();
    await gateway.waitForRequests(1, WAIT_MS);
  });

  it('refuses a gateway address outside the allowlist: nothing connects, the next notification still goes', async () => {
    // No PUSH_GATEWAY_IP_ALLOWLIST: 127.0.0.1 is loopback, which deliveries never reach by default.
    h = await startDeliveringWorker({ delivery: { gatewayIpAllowlist: [] } });
    await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-phone'));
    const connectionsBefore = gateway.connections;
    await h.client.notify(aMessage(1), [notified(ALICE)], { reply: true });
    await h.client.notify(aMessage(2), [notified(ALICE)], { reply: true });
    await eventually(() => {
      expect(h.logs.filter((line) => line.includes('gateway address is not allowed'))).toHaveLength(1);
    });
    await sleep(300);
    expect(gateway.connections).toBe(connectionsBefore);
    expect(gateway.requests).toEqual([]);
    // Logged once per pusher, though both notifications were refused.
    expect(h.logs.filter((line) => line.includes('gateway address is not allowed'))).toHaveLength(1);
  });

  it('never writes a pushkey to the log in full: delivered, rejected, failed, retried, refused', async () => {
    h = await startDeliveringWorker();
    const secret = (name: string) => `${name}-token-4f1c2e9a7b3d5e6f8a9b0c1d2e3f4a5b`;
    await h.client.setPusher(ALICE, anHttpPusher(gateway, secret('phone')));
    await h.client.setPusher(ALICE, anHttpPusher(gateway, secret('old'), { app_id: 'other.app' }));
    await h.client.setPusher(BOB, anHttpPusher(other, secret('bob'), { data: { url: other.notifyUrl } }));
    gateway.reject(secret('old'));
    other.behave({ kind: 'status', status: 503 }, { times: 1 });
    await h.client.notify(aMessage(1), [notified(ALICE), notified(BOB)], { reply: true });
    await eventually(() => {
      expect(other.requests.map((r) => r.answer)).toEqual([503, 200]);
    });
    other.behave({ kind: 'status', status: 404 }, { times: 1 });
    await h.client.notify(aMessage(2), [notified(BOB)], { reply: true });
    await eventually(() => {
      expect(other.requests.map((r) => r.answer)).toEqual([503, 200, 404]);
    });
    await eventually(() => {
      expect(h.logs.some((line) => line.includes('the gateway rejected a pushkey'))).toBe(true);
    });
    await eventually(() => {
      expect(h.logs.some((line) => line.includes('refused a notification for good'))).toBe(true);
    });
    for (const name of ['phone', 'old', 'bob']) expect(h.logs.join('\n')).not.toContain(secret(name));
  });

  it("hands a stopped worker's undelivered notifications to the next one", async () => {
    h = await startDeliveringWorker();
    await h.client.setPusher(ALICE, anHttpPusher(gateway, 'alice-phone'));
    gateway.behave({ kind: 'status', status: 503 });
    await h.client.notify(aMessage(1), [notified(ALICE)], { reply: true });
    await gateway.waitForRequests(1, WAIT_MS);
    await h.stop();
    gateway.restore();
    await h.startAnother();
    await eventually(() => {
      expect(eventsOf(gateway.requests, 'alice-phone')).toEqual(['$event1']);
    });
  });
});
