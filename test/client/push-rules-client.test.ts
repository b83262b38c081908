import { describe, expect, it } from 'vitest';
import { PushRulesClient, PushRulesError, type RpcTransport } from '../../src/client/push-rules-client.js';
import { RpcClient } from '../../src/client/rpc-client.js';
import { RpcRequestError, RpcTransportError, type TransportFailure } from '../../src/client/rpc-errors.js';
import type { RequestOptions } from '../../src/client/rpc-client-options.js';
import type { JsonValue } from '../../src/matrix/json.js';
import type { Reply } from '../../src/contract/reply.js';
import { aPusherSetAction } from '../support/builders.js';

interface Sent {
  readonly body: Record<string, unknown>;
  readonly options: RequestOptions;
}

/** A transport that records what it is asked to send and answers `reply`. */
function recordingTransport(
  answer: (body: Record<string, unknown>) => Promise<Reply> = async () => Promise.resolve({ ok: true, body: {} }),
) {
  const sent: Sent[] = [];
  const closes = { count: 0 };
  const transport: RpcTransport = {
    request: async (body, options) => {
      sent.push({ body: body as Record<string, unknown>, options });
      return answer(body as Record<string, unknown>);
    },
    publish: async (body, options) => {
      sent.push({ body: body as Record<string, unknown>, options: { ...options, published: true } as RequestOptions });
      return Promise.resolve();
    },
    close: async () => {
      closes.count += 1;
      return Promise.resolve();
    },
  };
  return { client: new PushRulesClient({ url: 'amqp://unused' }, transport), sent, closes };
}

const USER = '@alice:example.org';
const ADDRESS = { scope: 'global', kind: 'override', ruleId: 'my.rule' } as const;
const WIRE_ADDRESS = { scope: 'global', kind: 'override', rule_id: 'my.rule' };
const PUSHER = aPusherSetAction();

type Call = (client: PushRulesClient) => Promise<unknown>;

describe('notify', () => {
  const NOTIFICATION = { event_id: '$e', room_id: '!r:example.org' };
  const RECIPIENTS = [{ user_id: USER, actions: ['notify'], counts: { unread: 1 } }];

  it('publishes to the delivery queue with a messageId and no expiration, and resolves on the confirm', async () => {
    const { client, sent } = recordingTransport();
    await expect(client.notify(NOTIFICATION, RECIPIENTS)).resolves.toBeUndefined();
    expect(sent.map((s) => s.body)).toEqual([{ op: 'notify', notification: NOTIFICATION, recipients: RECIPIENTS }]);
    const { messageId, ...options } = sent[0]?.options ?? {};
    expect(options).toEqual({ queue: 'matrix.push.deliver', noExpiration: true, published: true });
    // A fresh one per message: a republished message is recognised by it.
    expect(messageId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('waits for the reply when asked, with the messageId given', async () => {
    const { client, sent } = recordingTransport(async () =>
      Promise.resolve({ ok: true, body: { recipients: 1, devices: 2 } }),
    );
    expect(await client.notify(NOTIFICATION, RECIPIENTS, { reply: true, messageId: 'n-1', timeoutMs: 50 })).toEqual({
      recipients: 1,
      devices: 2,
    });
    expect(sent[0]?.options).toEqual({
      queue: 'matrix.push.deliver',
      noExpiration: true,
      messageId: 'n-1',
      timeoutMs: 50,
    });
  });

  it('turns a refused publish into a PushRulesError', async () => {
    const transport: RpcTransport = {
      request: async () => Promise.resolve({ ok: true, body: {} }),
      publish: async () => Promise.reject(new RpcTransportError('refused', 'nacked')),
      close: async () => Promise.resolve(),
    };
    const client = new PushRulesClient({ url: 'amqp://unused' }, transport);
    await expect(client.notify(NOTIFICATION, RECIPIENTS)).rejects.toBeInstanceOf(PushRulesError);
  });
});

describe('PushRulesClient requests', () => {
  it.each<[string, Call, Record<string, unknown>]>([
    ['getPushRules', async (c) => c.getPushRules(USER), { op: 'get_pushrules', user_id: USER }],
    ['getPushRule', async (c) => c.getPushRule(USER, ADDRESS), { op: 'get_pushrule', user_id: USER, ...WIRE_ADDRESS }],
    [
      'getPushRuleActions',
      async (c) => c.getPushRuleActions(USER, ADDRESS),
      { op: 'get_pushrule_actions', user_id: USER, ...WIRE_ADDRESS },
    ],
    [
      'getPushRuleEnabled',
      async (c) => c.getPushRuleEnabled(USER, ADDRESS),
      { op: 'get_pushrule_enabled', user_id: USER, ...WIRE_ADDRESS },
    ],
    ['getPushers', async (c) => c.getPushers(USER), { op: 'get_pushers', user_id: USER }],
  ])(
    '%s sends the contract body as a read (the read queue may serve it) and no messageId',
    async (_name, call, expected) => {
      const { client, sent } = recordingTransport();
      await call(client);
      expect(sent).toEqual([{ body: expected, options: { read: true } }]);
    },
  );

  it.each<[string, Call, Record<string, unknown>]>([
    [
      'setPushRule',
      async (c) => c.setPushRule(USER, ADDRESS, { actions: ['notify'], conditions: [] }),
      { op: 'set_pushrule', user_id: USER, ...WIRE_ADDRESS, rule: { actions: ['notify'], conditions: [] } },
    ],
    [
      'setPushRule with placement',
      async (c) => c.setPushRule(USER, ADDRESS, { actions: [] }, { before: 'b', after: 'a' }),
      { op: 'set_pushrule', user_id: USER, ...WIRE_ADDRESS, rule: { actions: [] }, before: 'b', after: 'a' },
    ],
    [
      'deletePushRule',
      async (c) => c.deletePushRule(USER, ADDRESS),
      { op: 'delete_pushrule', user_id: USER, ...WIRE_ADDRESS },
    ],
    [
      'setPushRuleActions',
      async (c) => c.setPushRuleActions(USER, ADDRESS, ['notify', { set_tweak: 'sound', value: 'default' }]),
      {
        op: 'set_pushrule_actions',
        user_id: USER,
        ...WIRE_ADDRESS,
        actions: ['notify', { set_tweak: 'sound', value: 'default' }],
      },
    ],
    [
      'setPushRuleEnabled',
      async (c) => c.setPushRuleEnabled(USER, ADDRESS, false),
      { op: 'set_pushrule_enabled', user_id: USER, ...WIRE_ADDRESS, enabled: false },
    ],
    ['setPusher', async (c) => c.setPusher(USER, PUSHER), { op: 'set_pusher', user_id: USER, action: PUSHER }],
    [
      'setPusher with the device of the token',
      async (c) => c.setPusher(USER, { ...PUSHER, enabled: false }, { deviceId: 'PHONE' }),
      { op: 'set_pusher', user_id: USER, device_id: 'PHONE', action: { ...PUSHER, enabled: false } },
    ],
    [
      'deletePushers of devices',
      async (c) => c.deletePushers(USER, { deviceIds: ['PHONE', 'LAPTOP'] }),
      { op: 'delete_pushers', user_id: USER, device_ids: ['PHONE', 'LAPTOP'] },
    ],
    [
      'deletePushers of all devices but one',
      async (c) => c.deletePushers(USER, { exceptDeviceId: 'PHONE' }, { includeEmail: false }),
      { op: 'delete_pushers', user_id: USER, except_device_id: 'PHONE', include_email: false },
    ],
    [
      'deletePushers of every device, e-mail included',
      async (c) => c.deletePushers(USER, { all: true }, { includeEmail: true }),
      { op: 'delete_pushers', user_id: USER, all: true, include_email: true },
    ],
    ['deleteUserData', async (c) => c.deleteUserData(USER), { op: 'delete_user_data', user_id: USER }],
  ])('%s sends the contract body with a fresh messageId', async (_name, call, expected) => {
    const { client, sent } = recordingTransport();
    await call(client);
    await call(client);
    expect(sent.map((s) => s.body)).toEqual([expected, expected]);
    const ids = sent.map((s) => s.options.messageId);
    expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(ids[1]).not.toBe(ids[0]);
  });

  it('sends the messageId and deadline a write is given, so a retry is applied once', async () => {
    const { client, sent } = recordingTransport();
    await client.setPushRuleEnabled(USER, ADDRESS, true, { messageId: 'retry-me', timeoutMs: 250 });
    expect(sent[0]?.options).toEqual({ messageId: 'retry-me', timeoutMs: 250 });
  });

  it('sends the messageId a homeserver op is given, and resolves with its body', async () => {
    const { client, sent } = recordingTransport(async (body) =>
      Promise.resolve({ ok: true, body: body['op'] === 'delete_pushers' ? { deleted: 2 } : {} }),
    );
    expect(await client.deletePushers(USER, { all: true }, { messageId: 'logout-1', timeoutMs: 50 })).toEqual({
      deleted: 2,
    });
    expect(await client.deleteUserData(USER, { messageId: 'deactivate-1' })).toEqual({});
    expect(sent.map((s) => s.options)).toEqual([
      { messageId: 'logout-1', timeoutMs: 50 },
      { messageId: 'deactivate-1' },
    ]);
  });

  it('passes a worker refusal of a homeserver op on as PushRulesError', async () => {
    const error = { kind: 'Forbidden', errcode: 'M_FORBIDDEN', error: 'no', status: 403 } as const;
    const { client } = recordingTransport(async () => Promise.resolve({ ok: false, error }));
    await expect(client.deletePushers(USER, { deviceIds: ['D'] })).rejects.toMatchObject({
      kind: 'Forbidden',
      status: 403,
    });
    await expect(client.deleteUserData(USER)).rejects.toBeInstanceOf(PushRulesError);
  });

  it('sends the deadline a read is given', async () => {
    const { client, sent } = recordingTransport();
    await client.getPushers(USER, { timeoutMs: 99 });
    expect(sent[0]?.options).toEqual({ read: true, timeoutMs: 99 });
  });
});

describe('PushRulesClient replies', () => {
  it('resolves with the success body', async () => {
    const { client } = recordingTransport(async () => Promise.resolve({ ok: true, body: { enabled: false } }));
    expect(await client.getPushRuleEnabled(USER, ADDRESS)).toEqual({ enabled: false });
  });

  it('rejects with the worker error as PushRulesError', async () => {
    const error = { kind: 'NotFound', errcode: 'M_NOT_FOUND', error: 'Push rule not found.', status: 404 } as const;
    const { client } = recordingTransport(async () => Promise.resolve({ ok: false, error }));
    const thrown = await client.getPushRule(USER, ADDRESS).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(PushRulesError);
    expect(thrown).toMatchObject({
      kind: 'NotFound',
      errcode: 'M_NOT_FOUND',
      status: 404,
      message: 'Push rule not found.',
      reason: undefined,
    });
    expect((thrown as PushRulesError).toMatrixBody()).toEqual({
      errcode: 'M_NOT_FOUND',
      error: 'Push rule not found.',
    });
  });

  it.each<TransportFailure>(['timeout', 'connection-lost', 'unroutable', 'closed', 'bad-reply'])(
    'turns the transport failure %s into Unavailable 503 with that reason',
    async (reason) => {
      const { client } = recordingTransport(async () => Promise.reject(new RpcTransportError(reason, 'x')));
      const thrown = await client.deletePushRule(USER, ADDRESS).catch((e: unknown) => e);
      expect(thrown).toBeInstanceOf(PushRulesError);
      expect(thrown).toMatchObject({ kind: 'Unavailable', errcode: 'M_UNKNOWN', status: 503, reason });
      expect((thrown as PushRulesError).message).not.toBe('');
    },
  );

  it('close() closes the transport', async () => {
    const { client, closes } = recordingTransport();
    await client.close();
    expect(closes.count).toBe(1);
  });
});

/** A pusher whose `data` nests `levels` deep, built without recursion. */
function deepPusher(levels: number) {
  let deep: JsonValue = 'leaf';
  for (let i = 0; i < levels; i += 1) deep = [deep];
  return aPusherSetAction({ data: { url: 'https://push.example.org/_matrix/push/v1/notify', deep } });
}

describe('PushRulesClient with a body that cannot be serialized', () => {
  const BAD_JSON = { kind: 'BadJson', errcode: 'M_BAD_JSON', status: 400, reason: undefined };

  it('turns the transport refusing the body into BadJson 400, without a reason', async () => {
    const { client } = recordingTransport(async () =>
      Promise.reject(new RpcRequestError('the request body cannot be serialized as JSON: x')),
    );
    const thrown = await client.setPusher(USER, PUSHER).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(PushRulesError);
    expect(thrown).toMatchObject(BAD_JSON);
    expect((thrown as PushRulesError).toMatrixBody()).toEqual({
      errcode: 'M_BAD_JSON',
      error: expect.stringContaining('cannot be serialized as JSON') as unknown,
    });
  });

  // The real transport, pointed at a port nothing listens on: a body it
  // cannot serialize must fail before it tries to connect.
  const unreachable = 'amqp://guest:guest@127.0.0.1:1';
  const cyclic: Record<string, unknown> = {};
  cyclic['self'] = cyclic;

  it.each<[string, object]>([
    [
      'nested 10,000 deep (past JSON.stringify’s stack)',
      { op: 'set_pusher', user_id: USER, action: deepPusher(10_000) },
    ],
    ['cyclic', { op: 'set_pusher', user_id: USER, action: cyclic }],
    ['holding a BigInt', { op: 'set_pusher', user_id: USER, action: { n: 1n } }],
  ])('RpcClient refuses a body %s with RpcRequestError, before it connects', async (_case, body) => {
    const rpc = new RpcClient({ url: unreachable, queue: 'q', timeoutMs: 1_000 });
    const thrown = await rpc.request(body).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(RpcRequestError);
    expect((thrown as Error).message).toMatch(/^the request body cannot be serialized as JSON: /);
    await rpc.close();
  });

  it('PushRulesClient on the real transport answers BadJson 400 for such a body, not Unavailable', async () => {
    const client = new PushRulesClient({ url: unreachable, timeoutMs: 1_000 });
    const thrown = await client.setPusher(USER, deepPusher(10_000)).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(PushRulesError);
    expect(thrown).toMatchObject(BAD_JSON);
    await client.close();
  });
});

describe('PushRulesClient.evaluate', () => {
  const EVENT = {
    type: 'm.room.message',
    room_id: '!r:example.org',
    sender: '@s:example.org',
    content: { body: 'hi' },
  };
  const ROOM = { member_count: 2, sender_power_level: 0 };
  const RECIPIENTS = [{ user_id: USER, display_name: 'Alice' }];

  it('sends the request to the evaluate queue, with no user and no messageId, asking for the compact reply in runs', async () => {
    const { client, sent } = recordingTransport();
    await client.evaluate(EVENT, ROOM, RECIPIENTS);
    await client.evaluate(EVENT, ROOM, RECIPIENTS, { explain: true, timeoutMs: 50 });
    expect(sent).toEqual([
      {
        body: { op: 'evaluate', event: EVENT, room: ROOM, recipients: RECIPIENTS, compact: true, runs: true },
        options: { queue: 'matrix.push.evaluate' },
      },
      {
        body: {
          op: 'evaluate',
          event: EVENT,
          room: ROOM,
          recipients: RECIPIENTS,
          explain: true,
          compact: true,
          runs: true,
        },
        options: { queue: 'matrix.push.evaluate', timeoutMs: 50 },
      },
    ]);
  });

  const ALICE = '@alice:example.org';
  const BOB = '@bob:example.org';
  const CAROL = '@carol:example.org';
  const LOUD = ['notify', { set_tweak: 'sound', value: 'default' }];
  it.each([
    [
      'groups, expanded into the default form',
      {
        notify_groups: [
          { actions: ['notify'], user_ids: [ALICE, CAROL] },
          { actions: LOUD, user_ids: [BOB] },
        ],
        evaluated: 4,
      },
      { notify: { [ALICE]: ['notify'], [CAROL]: ['notify'], [BOB]: LOUD }, evaluated: 4 },
    ],
    [
      'groups with rule_ids',
      { notify_groups: [], evaluated: 1, rule_ids: { [ALICE]: null } },
      { notify: {}, evaluated: 1, rule_ids: { [ALICE]: null } },
    ],
    [
      'the default form, from a worker that predates compact',
      { notify: { [ALICE]: ['notify'] }, evaluated: 1 },
      { notify: { [ALICE]: ['notify'] }, evaluated: 1 },
    ],
  ])('resolves with the default form whatever the worker answered: %s', async (_case, body, expected) => {
    const transport: RpcTransport = {
      request: async () => Promise.resolve({ ok: true, body }),
      publish: async () => Promise.resolve(),
      close: async () => Promise.resolve(),
    };
    const client = new PushRulesClient({ url: 'amqp://unused' }, transport);
    expect(await client.evaluate(EVENT, ROOM, [])).toEqual(expected);
  });

  it('uses the evaluate queue it is configured with', async () => {
    const sent: RequestOptions[] = [];
    const transport: RpcTransport = {
      request: async (_body, options) => {
        sent.push(options);
        return Promise.resolve({ ok: true, body: { notify: {}, evaluated: 0 } });
      },
      publish: async () => Promise.resolve(),
      close: async () => Promise.resolve(),
    };
    const client = new PushRulesClient({ url: 'amqp://unused', evaluateQueue: 'hs1.evaluate' }, transport);
    expect(await client.evaluate(EVENT, ROOM, [])).toEqual({ notify: {}, evaluated: 0 });
    expect(sent).toEqual([{ queue: 'hs1.evaluate' }]);
  });

  it('rejects with the worker error as PushRulesError', async () => {
    const error = {
      kind: 'TooLarge',
      errcode: 'M_TOO_LARGE',
      error: 'Too many recipients: an evaluate request may name at most 5.',
      status: 413,
    } as const;
    const { client } = recordingTransport(async () => Promise.resolve({ ok: false, error }));
    await expect(client.evaluate(EVENT, ROOM, RECIPIENTS)).rejects.toMatchObject({
      kind: 'TooLarge',
      status: 413,
      message: error.error,
    });
  });
});
