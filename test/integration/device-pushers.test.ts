import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PushRulesClient, PushRulesError } from '../../src/client/push-rules-client.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import type { Command } from '../../src/service/command.js';
import { MongoPushStore } from '../../src/store/mongo-push-store.js';
import type { PushStore } from '../../src/store/push-store.js';
import { PushService } from '../../src/service/push-service.js';
import { CONTRACT_KINDS, type ContractKind } from '../support/expect-result.js';
import { aPusherSetAction } from '../support/builders.js';
import { allInterleavings } from '../support/pusher-interleavings.js';
import type { ContractReply } from './support/rpc-caller.js';
import { startHarness, TEST_LIMITS, type Harness } from './support/worker-harness.js';

/**
 * Pushers follow devices and accounts (issue 15), end to end on RabbitMQ
 * and the MongoDB wire protocol: the device a pusher was created by, its
 * enabled flag, and the homeserver ops a homeserver calls on logout, device
 * deletion, password change and deactivation. The worker trusts the broker
 * user `guest`, as a production pool trusts its homeserver and gateway.
 */
const PUBLISHER = 'guest';
let h: Harness;
let client: PushRulesClient;
let n = 0;
const aUser = () => `@dev${(n += 1)}x${Date.now()}:example.org`;

beforeAll(async () => {
  h = await startHarness({ trustedPublishers: [PUBLISHER] });
  client = new PushRulesClient({
    url: h.names.amqp.url,
    queue: h.names.queue,
    timeoutMs: 5_000,
    publisherUserId: PUBLISHER,
  });
});
afterAll(async () => {
  await client.close();
  await h.close();
});

/** A request from the trusted publisher, with a messageId when given. */
async function send(
  op: string,
  user: string,
  fields: Record<string, unknown> = {},
  messageId?: string,
): Promise<ContractReply> {
  return h.caller.call(
    h.names.queue,
    { op, user_id: user, ...fields },
    { userId: PUBLISHER, ...(messageId === undefined ? {} : { messageId }) },
  );
}

function expectFailure(reply: ContractReply, kind: ContractKind, message: string): void {
  expect(reply).toEqual({ ok: false, error: { kind, ...CONTRACT_KINDS[kind], error: message } });
}

const action = (pushkey: string, overrides: Record<string, unknown> = {}) => ({
  ...aPusherSetAction({ pushkey }),
  ...overrides,
});
const email = (address: string) => ({
  kind: 'email',
  app_id: 'm.email',
  pushkey: address,
  app_display_name: 'E-mail',
  device_display_name: address,
  lang: 'en',
  data: {},
});

async function pushers(user: string): Promise<Record<string, unknown>[]> {
  const reply = await send('get_pushers', user);
  return (reply.body as { pushers: Record<string, unknown>[] }).pushers;
}
const pushkeys = async (user: string) => (await pushers(user)).map((p) => p['pushkey']).sort();
const documentOf = async (user: string) => h.db.collection('account_data').findOne({ _id: user as never });

/** Change events published while `work` runs, read from a queue bound to the events exchange. */
async function eventsDuring(work: () => Promise<unknown>, expected: number): Promise<unknown[]> {
  const { queue } = await h.caller.channel.assertQueue('', { exclusive: true, autoDelete: true });
  await h.caller.channel.bindQueue(queue, h.names.amqp.eventsExchange, '#');
  await work();
  const events: unknown[] = [];
  // A little longer than needed for `expected`, so that an extra event shows.
  for (let i = 0; i < 30; i += 1) {
    const message = await h.caller.channel.get(queue, { noAck: true });
    if (message === false) {
      if (events.length >= expected && i > 5) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    } else {
      events.push(JSON.parse(message.content.toString()) as unknown);
    }
  }
  await h.caller.channel.deleteQueue(queue);
  return events;
}

describe('set_pusher records the device of the token', () => {
  it('lists it under both names, with enabled; a device_id the client sends is ignored', async () => {
    const user = aUser();
    const sent = aPusherSetAction({ pushkey: 'k' });
    const forged = { ...sent, device_id: 'FORGED', 'org.matrix.msc3881.device_id': 'FORGED' };
    expect(await send('set_pusher', user, { device_id: 'PHONE', action: forged })).toEqual({ ok: true, body: {} });
    expect(await pushers(user)).toEqual([
      {
        ...sent,
        enabled: true,
        'org.matrix.msc3881.enabled': true,
        device_id: 'PHONE',
        'org.matrix.msc3881.device_id': 'PHONE',
      },
    ]);
  });

  it('keeps the device of a pusher updated from another device', async () => {
    const user = aUser();
    await send('set_pusher', user, { device_id: 'PHONE', action: action('k') });
    await send('set_pusher', user, { device_id: 'LAPTOP', action: action('k', { lang: 'de' }) });
    expect(await pushers(user)).toMatchObject([
      { lang: 'de', device_id: 'PHONE', 'org.matrix.msc3881.device_id': 'PHONE' },
    ]);
  });

  it.each([['enabled'], ['org.matrix.msc3881.enabled']])('enabled: false round-trips under %s', async (name) => {
    const user = aUser();
    await send('set_pusher', user, { device_id: 'PHONE', action: action('k', { [name]: false }) });
    expect(await pushers(user)).toMatchObject([{ enabled: false, 'org.matrix.msc3881.enabled': false }]);
  });

  it('takes back a pusher object from get_pushers with one name changed, as Element toggles a session', async () => {
    const user = aUser();
    await send('set_pusher', user, { device_id: 'PHONE', action: action('k') });
    const [listed] = await pushers(user);
    expect(
      await send('set_pusher', user, {
        device_id: 'LAPTOP',
        action: { ...listed, 'org.matrix.msc3881.enabled': false },
      }),
    ).toEqual({ ok: true, body: {} });
    expect(await pushers(user)).toMatchObject([
      { enabled: false, 'org.matrix.msc3881.enabled': false, device_id: 'PHONE' },
    ]);
  });

  it('reads a pusher stored before devices were recorded as enabled, of an unknown device, until an update gives it one', async () => {
    const user = aUser();
    await h.db.collection('pushers').insertOne({
      user_id: user,
      app_id: 'org.example.app',
      pushkey: 'old',
      kind: 'http',
      app_display_name: 'App',
      device_display_name: 'Phone',
      lang: 'en',
      data_json: '{"url":"https://push.example.org/_matrix/push/v1/notify"}',
    });
    // Moved into the user's list as a worker's start-up does.
    await new MongoPushStore(h.db, {
      accountDataCollection: 'account_data',
      pushersCollection: 'pushers',
    }).ensureIndexes();
    const [legacy] = await pushers(user);
    expect(legacy).toMatchObject({ pushkey: 'old', enabled: true, 'org.matrix.msc3881.enabled': true });
    expect(legacy).not.toHaveProperty('device_id');
    expect(await send('delete_pushers', user, { device_ids: ['PHONE'] })).toEqual({ ok: true, body: { deleted: 0 } });
    await send('set_pusher', user, { device_id: 'PHONE', action: action('old', { app_id: 'org.example.app' }) });
    expect(await pushers(user)).toMatchObject([{ pushkey: 'old', device_id: 'PHONE' }]);
    expect(await send('delete_pushers', user, { device_ids: ['PHONE'] })).toEqual({ ok: true, body: { deleted: 1 } });
  });
});

describe('delete_pushers', () => {
  async function seeded(): Promise<{ user: string; other: string }> {
    const user = aUser();
    const other = aUser();
    await send('set_pusher', user, { device_id: 'PHONE', action: action('phone') });
    await send('set_pusher', user, { device_id: 'LAPTOP', action: action('laptop') });
    await send('set_pusher', user, { device_id: 'PHONE', action: email('a@example.org') });
    await send('set_pusher', other, { device_id: 'PHONE', action: action('others') });
    return { user, other };
  }

  it.each<[string, Record<string, unknown>, number, string[]]>([
    ['logout: the device’s pushers', { device_ids: ['PHONE'] }, 1, ['a@example.org', 'laptop']],
    ['device deletion: several devices', { device_ids: ['PHONE', 'LAPTOP', 'GONE'] }, 2, ['a@example.org']],
    ['password change: all but the device', { except_device_id: 'LAPTOP' }, 1, ['a@example.org', 'laptop']],
    ['logout everywhere: all, e-mail kept', { all: true }, 2, ['a@example.org']],
    ['logout everywhere, include_email false', { all: true, include_email: false }, 2, ['a@example.org']],
    ['deactivation: all with e-mail', { all: true, include_email: true }, 3, []],
    [
      'a device with include_email: the e-mail pusher has no device',
      { device_ids: ['PHONE'], include_email: true },
      1,
      ['a@example.org', 'laptop'],
    ],
    ['all but a device, with e-mail', { except_device_id: 'LAPTOP', include_email: true }, 2, ['laptop']],
  ])('%s → {deleted: n}, one change event, other users untouched', async (_case, fields, deleted, left) => {
    const { user, other } = await seeded();
    const events = await eventsDuring(async () => {
      expect(await send('delete_pushers', user, fields)).toEqual({ ok: true, body: { deleted } });
    }, 1);
    expect(events).toEqual([{ user_id: user, type: 'm.pushers', version: 4 }]);
    expect(await pushkeys(user)).toEqual(left);
    expect(await pushkeys(other)).toEqual(['others']);
  });

  it('deleting nothing announces nothing', async () => {
    const { user } = await seeded();
    const events = await eventsDuring(async () => {
      expect(await send('delete_pushers', user, { device_ids: ['GONE'] })).toEqual({ ok: true, body: { deleted: 0 } });
    }, 0);
    expect(events).toEqual([]);
  });

  it('a retry with the same messageId replies the same, deletes nothing more, and announces the pushers again', async () => {
    const { user } = await seeded();
    const first = await send('delete_pushers', user, { device_ids: ['PHONE'] }, 'logout-1');
    await send('set_pusher', user, { device_id: 'PHONE', action: action('phone') });
    const version = (await documentOf(user))?.['pushers_version'] as number;
    const events = await eventsDuring(async () => {
      expect(await send('delete_pushers', user, { device_ids: ['PHONE'] }, 'logout-1')).toEqual(first);
    }, 1);
    expect(first).toEqual({ ok: true, body: { deleted: 1 } });
    // The first delivery's event may have been the one lost: announced again, at the version now.
    expect(events).toEqual([{ user_id: user, type: 'm.pushers', version }]);
    expect(await pushkeys(user)).toContain('phone');
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['an invalid user_id', { user_id: 'alice', device_ids: ['PHONE'] }, 'user_id is not a valid Matrix user ID.'],
    ['no user_id', { user_id: undefined, all: true }, "request must have required property 'user_id'."],
    ['device_ids that is not an array', { device_ids: 'PHONE' }, 'device_ids must be array.'],
    ['device_ids with a number', { device_ids: ['PHONE', 7] }, 'device_ids.1 must be string.'],
    [
      'both all and device_ids',
      { all: true, device_ids: ['PHONE'] },
      'delete_pushers takes only one of device_ids, except_device_id and all.',
    ],
    ['no selector', { include_email: true }, 'delete_pushers needs one of device_ids, except_device_id or all.'],
    ['all: false', { all: false }, 'all must be true when given.'],
  ])('refuses %s with BadJson and changes nothing', async (_case, fields, message) => {
    const { user } = await seeded();
    const before = await documentOf(user);
    expectFailure(await send('delete_pushers', user, fields, randomUUID()), 'BadJson', message);
    expect(await pushkeys(user)).toEqual(['a@example.org', 'laptop', 'phone']);
    expect(await documentOf(user)).toEqual(before);
  });

  it('refuses a publisher that is not trusted with Forbidden, and changes nothing', async () => {
    const { user } = await seeded();
    const reply = await h.caller.call(h.names.queue, {
      op: 'delete_pushers',
      user_id: user,
      all: true,
      include_email: true,
    });
    expectFailure(reply, 'Forbidden', 'The publisher of this request is not trusted.');
    const dataReply = await h.caller.call(h.names.queue, { op: 'delete_user_data', user_id: user });
    expectFailure(dataReply, 'Forbidden', 'The publisher of this request is not trusted.');
    expect(await pushkeys(user)).toEqual(['a@example.org', 'laptop', 'phone']);
  });
});

describe('delete_user_data', () => {
  async function withData(): Promise<string> {
    const user = aUser();
    await send('get_pushrules', user);
    await send('set_pushrule', user, {
      scope: 'global',
      kind: 'room',
      rule_id: '!r:example.org',
      rule: { actions: [] },
    });
    await send('set_pusher', user, { device_id: 'PHONE', action: action('phone') });
    await send('set_pusher', user, { device_id: 'PHONE', action: email('a@example.org') });
    return user;
  }

  it('erases push rules and pushers, announces both types with versions past the old ones; the user reads as new', async () => {
    const user = await withData();
    const events = await eventsDuring(async () => {
      expect(await send('delete_user_data', user, {}, 'deactivate')).toEqual({ ok: true, body: {} });
    }, 2);
    expect(events).toEqual([
      { user_id: user, type: 'm.push_rules', version: 3 },
      { user_id: user, type: 'm.pushers', version: 3 },
    ]);
    expect(await pushers(user)).toEqual([]);
    const gone = await send('get_pushrule', user, { scope: 'global', kind: 'room', rule_id: '!r:example.org' });
    expectFailure(gone, 'NotFound', 'PushRules event not found.');
    const afterwards = await eventsDuring(async () => {
      expect(await send('get_pushrules', user)).toEqual({ ok: true, body: { global: serverDefaultRuleset(user) } });
    }, 1);
    // A front that saw version 3 sees the new user's defaults as newer, not as version 1.
    expect(afterwards).toEqual([{ user_id: user, type: 'm.push_rules', version: 4 }]);
    expect(await documentOf(user)).toMatchObject({
      version: 4,
      pushers_version: 3,
      recent_writes: [{ message_id: 'deactivate', reply_json: '{"ok":true,"body":{}}' }],
    });
  });

  it('a retry with the same messageId replays {}, erases nothing made since, and announces both types again', async () => {
    const user = await withData();
    await send('delete_user_data', user, {}, 'deactivate');
    await send('set_pusher', user, { device_id: 'PHONE', action: action('again') });
    const document = await documentOf(user);
    const versions = { rules: document?.['version'] as number, pushers: document?.['pushers_version'] as number };
    const events = await eventsDuring(async () => {
      expect(await send('delete_user_data', user, {}, 'deactivate')).toEqual({ ok: true, body: {} });
    }, 2);
    // Its rules and pushers changes are announced again, at the versions now (other workers may have missed them).
    expect(events).toEqual([
      { user_id: user, type: 'm.push_rules', version: versions.rules },
      { user_id: user, type: 'm.pushers', version: versions.pushers },
    ]);
    expect(await pushkeys(user)).toEqual(['again']);
  });

  it('for a user without data answers {} and announces nothing', async () => {
    const user = aUser();
    const events = await eventsDuring(async () => {
      expect(await send('delete_user_data', user)).toEqual({ ok: true, body: {} });
    }, 0);
    expect(events).toEqual([]);
    expect(await documentOf(user)).toBeNull();
  });

  it('refuses an invalid user_id with BadJson', async () => {
    expectFailure(await send('delete_user_data', 'nobody'), 'BadJson', 'user_id is not a valid Matrix user ID.');
  });
});

describe('a pusher the push gateway rejected', () => {
  it("is removed with set_pusher kind: null for its user; another user's pusher with the same pushkey stays", async () => {
    const user = aUser();
    const other = aUser();
    const pushkey = `rejected-${randomUUID()}`;
    await send('set_pusher', user, { device_id: 'PHONE', action: action(pushkey) });
    await send('set_pusher', other, { device_id: 'TABLET', action: action(pushkey, { append: true }) });
    await send('set_pusher', user, { device_id: 'PHONE', action: action('kept') });
    const removal = { action: { kind: null, app_id: 'org.example.app', pushkey } };
    expect(await send('set_pusher', user, removal, randomUUID())).toEqual({ ok: true, body: {} });
    expect(await pushkeys(user)).toEqual(['kept']);
    expect(await pushkeys(other)).toEqual([pushkey]);
  });
});

describe('PushRulesClient: the homeserver ops, typed', () => {
  it('deletePushers and deleteUserData through a real worker', async () => {
    const user = aUser();
    await client.setPusher(user, aPusherSetAction({ pushkey: 'phone' }), { deviceId: 'PHONE' });
    await client.setPusher(user, aPusherSetAction({ pushkey: 'laptop' }), { deviceId: 'LAPTOP' });
    await client.setPusher(
      user,
      { ...aPusherSetAction({ pushkey: 'a@example.org' }), kind: 'email', data: {} },
      { deviceId: 'PHONE' },
    );
    expect((await client.getPushers(user)).pushers.find((p) => p.pushkey === 'phone')).toMatchObject({
      device_id: 'PHONE',
      enabled: true,
    });

    expect(await client.deletePushers(user, { deviceIds: ['PHONE'] }, { messageId: 'logout' })).toEqual({ deleted: 1 });
    expect(await client.deletePushers(user, { deviceIds: ['PHONE'] }, { messageId: 'logout' })).toEqual({ deleted: 1 });
    expect(await client.deletePushers(user, { exceptDeviceId: 'LAPTOP' })).toEqual({ deleted: 0 });
    expect(await client.deletePushers(user, { all: true })).toEqual({ deleted: 1 });
    expect((await client.getPushers(user)).pushers.map((p) => p.pushkey)).toEqual(['a@example.org']);
    expect(await client.deleteUserData(user)).toEqual({});
    expect(await client.getPushers(user)).toEqual({ pushers: [] });

    const refused = await client
      .deletePushers(user, { all: true, deviceIds: ['X'] } as never)
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(PushRulesError);
    expect(refused).toMatchObject({ kind: 'BadJson', status: 400 });
  });
});

describe('set_pusher and delete_pushers for the same device, concurrently, on MongoDB', () => {
  const user = '@interleaved:example.org';
  const store = () =>
    new MongoPushStore(h.db, {
      accountDataCollection: 'interleaved_account_data',
      pushersCollection: 'interleaved_pushers',
    });
  const service = {
    maxWriteAttempts: 12,
    backoff: { baseMs: 2, maxMs: 20 },
    pusherPolicy: { allowInsecureGateways: false },
    limits: TEST_LIMITS,
  };
  const setPusher = (pushkey: string, deviceId?: string, overrides: Record<string, unknown> = {}): Command => ({
    op: 'set_pusher',
    userId: user,
    action: { ...aPusherSetAction({ pushkey }), ...overrides },
    ...(deviceId === undefined ? {} : { deviceId }),
  });
  const deletePushers = (devices: { deviceIds: string[] } | { exceptDeviceId: string }): Command => ({
    op: 'delete_pushers',
    userId: user,
    devices,
    includeEmail: false,
  });
  const snapshot = async (s: PushStore) =>
    (await s.listPushers(user)).map((p) => ({ pushkey: p.pushkey, lang: p.lang, device: p.device_id ?? null }));
  const storeWith = (existing: Command) => async (): Promise<PushStore> => {
    await h.db.collection('interleaved_pushers').deleteMany({});
    await h.db.collection('interleaved_account_data').deleteMany({});
    const fresh = store();
    await fresh.ensureIndexes();
    await new PushService(fresh, service).handle(existing);
    return fresh;
  };

  it.each<[string, Command, Command, Command]>([
    [
      'an update from another device and the logout of the creating device',
      setPusher('k', 'PHONE'),
      setPusher('k', 'LAPTOP', { lang: 'de' }),
      deletePushers({ deviceIds: ['PHONE'] }),
    ],
    [
      'the kept device taking a pusher of an unknown device during a password change',
      setPusher('k'),
      setPusher('k', 'LAPTOP', { lang: 'de' }),
      deletePushers({ exceptDeviceId: 'LAPTOP' }),
    ],
  ])('%s end as one of the two orders would leave them', async (_case, existing, set, remove) => {
    const { sequential, interleaved } = await allInterleavings({
      fresh: storeWith(existing),
      service,
      first: set,
      second: remove,
      snapshot,
    });
    expect(interleaved.length).toBeGreaterThan(3);
    for (const run of interleaved) expect(sequential, run.label).toContainEqual(run.state);
  });
});
