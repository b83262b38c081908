import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PushRulesClient, PushRulesError } from '../../src/client/push-rules-client.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { CONTRACT_KINDS, type ContractKind } from '../support/expect-result.js';
import { aPusherSetAction } from '../support/builders.js';
import { emailAction } from '../support/pusher-devices-world.js';
import {
  action,
  aUser,
  h,
  PUBLISHER,
  pushers,
  pushkeys,
  send,
  useDevicePushersWorld,
} from './support/device-pushers-world.js';
import type { ContractReply } from './support/rpc-caller.js';

// The homeserver ops that delete pushers and user data. set_pusher by device is in
// device-pushers.test.ts.

useDevicePushersWorld();
let client: PushRulesClient;

beforeAll(() => {
  client = new PushRulesClient({
    url: h.names.amqp.url,
    queue: h.names.queue,
    timeoutMs: 5_000,
    publisherUserId: PUBLISHER,
  });
});
afterAll(async () => {
  await client.close();
});

function expectFailure(reply: ContractReply, kind: ContractKind, message: string): void {
  expect(reply).toEqual({ ok: false, error: { kind, ...CONTRACT_KINDS[kind], error: message } });
}

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

describe('delete_pushers', () => {
  async function seeded(): Promise<{ user: string; other: string }> {
    const user = aUser();
    const other = aUser();
    await send('set_pusher', user, { device_id: 'PHONE', action: action('phone') });
    await send('set_pusher', user, { device_id: 'LAPTOP', action: action('laptop') });
    await send('set_pusher', user, { device_id: 'PHONE', action: emailAction('a@example.org') });
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
    await send('set_pusher', user, { device_id: 'PHONE', action: emailAction('a@example.org') });
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
