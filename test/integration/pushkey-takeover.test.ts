import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NotifyNotification, NotifyRecipient } from '../../src/client/push-rules-client.js';
import type { PusherSetAction } from '../../src/pushers/pusher.js';
import { eventually } from '../support/eventually.js';
import { PushGatewayDouble } from '../support/push-gateway-double.js';
import { listenForChanges, startDeliveringWorker, type DeliveringWorker } from './support/delivery-harness.js';

const ALICE = '@alice:example.org';
const BOB = '@bob:example.org';
const PHONE = 'shared-phone-token';
/** How long a test waits for the worker to get a request to the gateway: generous, for a busy machine. */
const WAIT_MS = 30_000;

const aMessage = (n: number): NotifyNotification => ({
  event_id: `$event${String(n)}`,
  room_id: '!room:example.org',
  type: 'm.room.message',
  sender: '@dave:example.org',
  content: { msgtype: 'm.text', body: `message ${String(n)}` },
});
const notified = (userId: string): NotifyRecipient => ({ user_id: userId, actions: ['notify'], counts: { unread: 1 } });

/**
 * A phone signed out of Alice's account and into Bob's: Bob's client
 * registers the phone's token, which (append absent) takes it from Alice.
 * Alice's notifications must stop reaching the phone at once, though the
 * worker had her list, with the token, in its delivery pusher cache.
 */
describe('a pushkey taken over by another user', () => {
  let gateway: PushGatewayDouble;
  let h: DeliveringWorker;

  beforeAll(async () => {
    gateway = await PushGatewayDouble.start();
  });

  afterAll(async () => {
    await gateway.close();
  });

  afterEach(async () => {
    await h.close();
    gateway.clearRequests();
  });

  it("no longer receives the first user's pushes: the first user is announced and the worker plans nothing for them", async () => {
    h = await startDeliveringWorker();
    const changes = await listenForChanges(h.names, 'm.pushers');
    const phone = {
      kind: 'http',
      app_id: 'org.example.app',
      pushkey: PHONE,
      app_display_name: 'App',
      device_display_name: 'Phone',
      lang: 'en',
      data: { url: gateway.notifyUrl },
    } satisfies PusherSetAction;
    try {
      await h.client.setPusher(ALICE, phone);
      // Delivered once: the worker now keeps Alice's pushers in its cache.
      expect(await h.client.notify(aMessage(1), [notified(ALICE)], { reply: true })).toEqual({
        recipients: 1,
        devices: 1,
      });
      await gateway.waitForRequests(1, WAIT_MS);
      changes.events.length = 0;

      await h.client.setPusher(BOB, phone);

      // Alice has no device any more: nothing is planned for her (her cached list was dropped
      // by her change event before Bob's write was answered).
      expect(await h.client.notify(aMessage(2), [notified(ALICE)], { reply: true })).toEqual({
        recipients: 0,
        devices: 0,
      });
      expect((await h.client.getPushers(ALICE)).pushers).toEqual([]);
      // Every worker hears of it: an event for each user the write touched.
      await eventually(() => {
        expect(changes.events.map((e) => (e as { user_id: string }).user_id).sort()).toEqual([ALICE, BOB].sort());
      });
      // Bob's notification reaches the phone, and it is the only one after the takeover.
      gateway.clearRequests();
      expect(await h.client.notify(aMessage(3), [notified(BOB)], { reply: true })).toEqual({
        recipients: 1,
        devices: 1,
      });
      const [request] = await gateway.waitForRequests(1, WAIT_MS);
      expect((request?.body as { notification: { event_id: string } }).notification.event_id).toBe('$event3');
    } finally {
      await changes.close();
    }
  });
});
