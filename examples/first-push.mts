// A first push, end to end: a pusher for Alice, an event evaluated in her
// room, handed to `notify`, delivered to the local push gateway. Run it
// beside `npm run worker:local` and `npm run push-gateway:local`:
//
//   node --import tsx examples/first-push.mts
//
// Its last line is the event ID, which the local gateway prints too.
import { randomUUID } from 'node:crypto';
import { PushRulesClient } from 'matrix-push-worker/client';

// The workers' queue variables and the gateway's AMQP_PUBLISHER_USER_ID, when
// set, so that the example talks to the worker beside it; unset, what
// `npm run worker:local` uses.
const { AMQP_URL, AMQP_PUBLISHER_USER_ID, RPC_QUEUE, RPC_READ_QUEUE, EVALUATE_QUEUE, DELIVERY_QUEUE } = process.env;
const gatewayUrl = process.env['PUSH_GATEWAY_URL'] ?? 'http://127.0.0.1:8091/_matrix/push/v1/notify';

const pushRules = new PushRulesClient({
  url: AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  // `notify` is a homeserver op: the workers take it from a trusted publisher only.
  publisherUserId: AMQP_PUBLISHER_USER_ID ?? 'guest',
  ...(RPC_QUEUE === undefined ? {} : { queue: RPC_QUEUE }),
  ...(RPC_READ_QUEUE === undefined ? {} : { readQueue: RPC_READ_QUEUE }),
  ...(EVALUATE_QUEUE === undefined ? {} : { evaluateQueue: EVALUATE_QUEUE }),
  ...(DELIVERY_QUEUE === undefined ? {} : { deliverQueue: DELIVERY_QUEUE }),
});

const alice = '@alice:localhost';
const roomId = '!first-push:localhost';
try {
  // 1. Alice's phone registers a pusher (what POST /_matrix/client/v3/pushers/set carries).
  await pushRules.setPusher(
    alice,
    {
      kind: 'http',
      app_id: 'org.example.first-push',
      pushkey: 'alices-phone-token',
      app_display_name: 'First push',
      device_display_name: "Alice's phone",
      lang: 'en',
      data: { url: gatewayUrl },
    },
    { deviceId: 'ALICEPHONE' }, // the device of the access token, as the front authenticated it
  );
  console.log(`pusher set for ${alice}: ${gatewayUrl}`);

  // 2. Bob writes to Alice in their one-to-one room; the homeserver asks who is notified.
  const event = {
    event_id: `$first-push-${randomUUID()}`,
    type: 'm.room.message',
    room_id: roomId,
    sender: '@bob:localhost',
    content: { msgtype: 'm.text', body: 'Hello Alice!' },
  };
  const { notify } = await pushRules.evaluate(event, { member_count: 2 }, [{ user_id: alice, display_name: 'Alice' }]);
  const actions = notify[alice];
  if (actions === undefined) throw new Error(`${alice} is not notified of the event`);
  console.log(`evaluate: ${alice} is notified with ${JSON.stringify(actions)}`);

  // 3. The homeserver hands the notification to the workers, with its own unread count.
  const scheduled = await pushRules.notify(
    {
      event_id: event.event_id,
      room_id: event.room_id,
      type: event.type,
      sender: event.sender,
      sender_display_name: 'Bob',
      content: event.content,
    },
    [{ user_id: alice, actions, counts: { unread: 1 } }],
    { reply: true }, // resolve once a worker has stored the deliveries, not on the broker's confirm only
  );
  console.log(`notify: ${scheduled.devices} device(s) of ${scheduled.recipients} recipient(s) scheduled`);

  // 4. Wait until the gateway got it: the local gateway lists what it received at /recent.
  await waitForGateway(event.event_id);
  console.log(`delivered: the push gateway got the event`);
  console.log(event.event_id);
} finally {
  await pushRules.close();
}

async function waitForGateway(eventId: string): Promise<void> {
  const recent = new URL('/recent', gatewayUrl);
  const giveUpAt = Date.now() + 30_000;
  while (Date.now() < giveUpAt) {
    const response = await fetch(recent).catch(() => undefined);
    if (response?.ok === true) {
      const { notifications } = (await response.json()) as { notifications: { event_id?: string }[] };
      if (notifications.some((notification) => notification.event_id === eventId)) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`the push gateway at ${recent.origin} did not get ${eventId} within 30 s`);
}
