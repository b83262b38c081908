import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTRACT_KINDS } from '../support/expect-result.js';
import {
  expectCleanPrototype,
  forbiddenKeyMessage,
  POISONED_CASES,
  prototypeKeys,
} from '../support/poisoned-bodies.js';
import { MAX_REQUEST_BYTES, startHarness, TEST_LIMITS, type Harness } from './support/worker-harness.js';

const USER = '@victim:example.org';
let h: Harness;
let snapshot: unknown;

const rule = { actions: ['notify'], conditions: [] };
const address = { op: 'set_pushrule', user_id: USER, scope: 'global', kind: 'override', rule_id: 'x' };

/** `levels` arrays one inside the other: 3,100 of them made one request kill every worker that took it. */
const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
const TOO_DEEP = `Request body nests arrays and objects deeper than ${TEST_LIMITS.maxJsonDepth} levels.`;
const deepPusher = Buffer.from(
  `{"op": "set_pusher", "user_id": "${USER}", "action": {"kind": "email", "app_id": "m.email", "pushkey": "deep@example.org", ` +
    `"app_display_name": "E", "device_display_name": "E", "lang": "en", "data": {"x": ${nested(3_100)}}}}`,
);
const deepCondition = Buffer.from(
  `{"op": "set_pushrule", "user_id": "${USER}", "scope": "global", "kind": "override", "rule_id": "deep", ` +
    `"rule": {"actions": ["notify"], "conditions": [{"kind": "event_match", "key": "content.body", "pattern": "hi", "org.example.v": ${nested(3_100)}}]}}`,
);

beforeAll(async () => {
  h = await startHarness();
  await h.call('get_pushrules', USER);
  await h.call('set_pushrule', USER, { scope: 'global', kind: 'override', rule_id: 'mine', rule });
  await h.call('set_pusher', USER, {
    action: {
      kind: 'email',
      app_id: 'm.email',
      pushkey: 'v@example.org',
      app_display_name: 'E',
      device_display_name: 'E',
      lang: 'en',
      data: {},
    },
  });
  snapshot = await state();
});
afterAll(async () => {
  await h.close();
});

async function state(): Promise<unknown> {
  return {
    account: await h.db.collection('account_data').find().sort({ _id: 1 }).toArray(),
    // The pushers are in the account documents; the owners of each key beside them.
    owners: await h.db.collection('pushers_by_key').find().sort({ _id: 1 }).toArray(),
  };
}

/** After every bad request: nothing changed, and the worker still serves. */
async function expectUntouchedAndServing(): Promise<void> {
  expect(await state()).toEqual(snapshot);
  const reply = await h.call('get_pushrule_enabled', USER, { scope: 'global', kind: 'override', rule_id: 'mine' });
  expect(reply).toEqual({ ok: true, body: { enabled: true } });
}

describe('bad input gets a clear error and changes nothing', () => {
  it.each([
    ['not JSON', Buffer.from('{"op": "set_pushrule", '), 'BadJson', 'Request body is not valid JSON.'],
    ['not an object', Buffer.from('[1, 2]'), 'BadJson', 'Request body must be a JSON object.'],
    ['an unknown op', { op: 'drop_database', user_id: USER }, 'Unrecognized', 'Unrecognized op: "drop_database".'],
    ['a wrong field type', { ...address, rule, before: 7 }, 'BadJson', 'before must be string.'],
    [
      'a missing field',
      { ...address, rule_id: undefined, rule },
      'BadJson',
      "request must have required property 'rule_id'.",
    ],
    [
      'an invalid user ID',
      { ...address, user_id: 'victim', rule },
      'BadJson',
      'user_id is not a valid Matrix user ID.',
    ],
    [
      'an oversize body',
      { ...address, rule, padding: 'x'.repeat(MAX_REQUEST_BYTES) },
      'TooLarge',
      `Request body is larger than ${MAX_REQUEST_BYTES} bytes.`,
    ],
    ['an unknown kind', { ...address, kind: 'everything', rule }, 'BadJson', /^kind must/],
    [
      'a rule body invalid for its kind',
      { ...address, kind: 'content', rule },
      'BadJson',
      'content rules need a pattern.',
    ],
    [
      'an invalid action',
      { ...address, rule: { actions: [42], conditions: [] } },
      'BadJson',
      'actions[0] must be a string or an object.',
    ],
    [
      'an invalid condition',
      { ...address, rule: { actions: [], conditions: [{ kind: 'event_match' }] } },
      'BadJson',
      'conditions[0] (event_match) needs key to be a string.',
    ],
    [
      'a string over the limit',
      { ...address, rule_id: 'r'.repeat(TEST_LIMITS.maxStringBytes + 1), rule },
      'InvalidParam',
      `rule_id is longer than ${TEST_LIMITS.maxStringBytes} bytes.`,
    ],
    ['a pusher whose data nests 3,100 deep', deepPusher, 'BadJson', TOO_DEEP],
    ['a rule whose condition nests 3,100 deep', deepCondition, 'BadJson', TOO_DEEP],
    [
      'too many conditions',
      {
        ...address,
        rule: {
          actions: [],
          conditions: Array.from({ length: TEST_LIMITS.maxConditionsPerRule + 1 }, () => ({
            kind: 'contains_display_name',
          })),
        },
      },
      'InvalidParam',
      `Too many conditions: a rule may have at most ${TEST_LIMITS.maxConditionsPerRule}.`,
    ],
  ] as const)('%s', async (_case, body, kind, message) => {
    const reply = await h.caller.call(h.names.queue, body);
    expect(reply.ok).toBe(false);
    expect(reply.error).toMatchObject({ kind, ...CONTRACT_KINDS[kind] });
    if (typeof message === 'string') expect(reply.error?.error).toBe(message);
    else expect(reply.error?.error).toMatch(message);
    await expectUntouchedAndServing();
  });

  it.each([
    ['no replyTo', { correlationId: randomUUID() }],
    ['no correlationId', { replyTo: 'amq.rabbitmq.reply-to' }],
  ])('a request with %s is dead-lettered, not answered', async (_case, properties) => {
    const marker = randomUUID();
    h.caller.publish(h.names.queue, Buffer.from(JSON.stringify({ ...address, rule, marker })), properties);
    let parked: false | { content: Buffer } = false;
    for (let i = 0; i < 100 && parked === false; i += 1) {
      parked = await h.caller.channel.get(h.names.amqp.deadLetterQueue, { noAck: true });
      if (parked === false) await new Promise((r) => setTimeout(r, 25));
    }
    expect(parked && (JSON.parse(parked.content.toString()) as { marker: string }).marker).toBe(marker);
    await expectUntouchedAndServing();
  });

  it('a request whose deadline passed before it was taken is dropped without work', async () => {
    const correlationId = randomUUID();
    const sentLongAgo = Date.now() - 60_000;
    await expect(
      h.caller.call(
        h.names.queue,
        { ...address, rule_id: 'late', rule },
        { correlationId, timestamp: sentLongAgo, expiration: '30000' },
        1500,
      ),
    ).rejects.toThrow(/no reply/);
    await expectUntouchedAndServing();
  });
});

describe('keys that reach a prototype are refused, stored nowhere, and pollute nothing', () => {
  const before = prototypeKeys();

  it.each(POISONED_CASES)('%s with a key %s', async (_place, key, place) => {
    const reply = await h.caller.call(h.names.queue, Buffer.from(place.request(USER, key)));
    expect(reply).toEqual({
      ok: false,
      error: { kind: 'BadJson', ...CONTRACT_KINDS.BadJson, error: forbiddenKeyMessage(place.requestPath(key)) },
    });
    // Read back through the worker as well as in the database.
    expect(await h.call('get_pushrule', USER, { scope: 'global', kind: 'override', rule_id: 'poison' })).toMatchObject({
      ok: false,
      error: { kind: 'NotFound' },
    });
    const pushers = await h.call('get_pushers', USER);
    expect((pushers.body as { pushers: { pushkey: string }[] }).pushers.map((p) => p.pushkey)).toEqual([
      'v@example.org',
    ]);
    await expectUntouchedAndServing();
    expectCleanPrototype(before);
  });
});
