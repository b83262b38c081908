import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './support/worker-harness.js';

/**
 * Clients repeat the same PUT (Synapse deployments grew 16 GB push-rule
 * streams that way). Through a real worker on RabbitMQ and MongoDB: a write
 * that changes nothing answers `{}`, leaves the stored document and its
 * versions as they are, and publishes no change event.
 */
let h: Harness;
let events: string;

beforeAll(async () => {
  h = await startHarness();
  events = (await h.caller.channel.assertQueue('', { exclusive: true, autoDelete: true })).queue;
  await h.caller.channel.bindQueue(events, h.names.amqp.eventsExchange, '#');
});
afterAll(async () => {
  await h.close();
});

const USER = '@repeats:example.org';
const cake = { scope: 'global', kind: 'override', rule_id: 'cake' };
const cakeRule = {
  actions: ['notify', { set_tweak: 'sound', value: 'cake.ogg' }, { set_tweak: 'highlight', value: false }],
  conditions: [
    { kind: 'event_match', key: 'content.body', pattern: '*cake*' },
    { kind: 'room_member_count', is: '<10' },
  ],
};
const quiet = { scope: 'global', kind: 'room', rule_id: '!quiet:example.org' };
const loud = { scope: 'global', kind: 'room', rule_id: '!loud:example.org' };
const pusher = {
  kind: 'http',
  app_id: 'org.example.app',
  pushkey: 'device-key',
  app_display_name: 'Example',
  device_display_name: 'Phone',
  lang: 'en',
  profile_tag: 'tag',
  data: {
    url: 'https://push.example.org/_matrix/push/v1/notify',
    format: 'event_id_only',
    'org.custom': { a: [1, null] },
  },
};

/** Every identical write of the four ops, as a client would repeat it. */
const REPEATS: readonly [string, Record<string, unknown>][] = [
  ['set_pushrule', { ...cake, rule: cakeRule }],
  ['set_pushrule', { ...quiet, rule: { actions: [] } }],
  // Placements that land the rule where it is: !quiet is above !loud.
  ['set_pushrule', { ...quiet, rule: { actions: [] }, before: loud.rule_id }],
  ['set_pushrule', { ...loud, rule: { actions: ['notify'] }, after: quiet.rule_id }],
  ['set_pushrule_actions', { ...cake, actions: cakeRule.actions }],
  ['set_pushrule_enabled', { ...cake, enabled: true }],
  ['set_pushrule_enabled', { scope: 'global', kind: 'override', rule_id: '.m.rule.master', enabled: false }],
  ['set_pusher', { action: pusher }],
  ['set_pusher', { action: { ...pusher, append: true } }],
];

async function storedDocuments() {
  const account = await h.db
    .collection('account_data')
    .findOne({ _id: USER as never }, { projection: { recent_writes: 0 } });
  // The pushers are in the account document (its list); the owners of each key beside it.
  const owners = await h.db.collection('pushers_by_key').find({}).toArray();
  return { account, owners };
}

/** Change events received until one with `version` of `type` arrives (published after every earlier one). */
async function eventsUntil(type: string, version: number): Promise<unknown[]> {
  const received: { type: string; version: number }[] = [];
  const deadline = Date.now() + 10_000;
  while (!received.some((e) => e.type === type && e.version === version) && Date.now() < deadline) {
    const message = await h.caller.channel.get(events, { noAck: true });
    if (message === false) await sleep(20);
    else received.push(JSON.parse(message.content.toString()) as { type: string; version: number });
  }
  return received;
}

describe('writes that change nothing, end to end', () => {
  it('repeating each identical write leaves version, pushers_version and the documents as they were, and publishes no event but the re-announcement of a pusher write with a messageId', async () => {
    expect((await h.call('get_pushrules', USER)).ok).toBe(true);
    for (const [op, fields] of [
      ['set_pushrule', { ...cake, rule: cakeRule }],
      ['set_pushrule', { ...loud, rule: { actions: ['notify'] } }],
      // New rules go first: !quiet lands above !loud.
      ['set_pushrule', { ...quiet, rule: { actions: [] } }],
      ['set_pusher', { action: pusher }],
    ] as const) {
      expect(await h.call(op, USER, fields)).toEqual({ ok: true, body: {} });
    }
    expect(await eventsUntil('m.pushers', 1)).toHaveLength(5);
    const before = await storedDocuments();
    expect(before.account).toMatchObject({ version: 4, pushers_version: 1 });

    for (const [i, [op, fields]] of REPEATS.entries()) {
      // Without a messageId, with one, and its retry.
      expect(await h.call(op, USER, fields)).toEqual({ ok: true, body: {} });
      const id = `repeat-${i}`;
      expect(await h.caller.call(h.names.queue, { op, user_id: USER, ...fields }, { messageId: id })).toEqual({
        ok: true,
        body: {},
      });
      expect(await h.caller.call(h.names.queue, { op, user_id: USER, ...fields }, { messageId: id })).toEqual({
        ok: true,
        body: {},
      });
    }

    expect(await storedDocuments()).toEqual(before);
    // The no-ops with a messageId are remembered, each once.
    const recorded = (await h.db.collection('account_data').findOne({ _id: USER as never }))?.['recent_writes'] as {
      message_id: string;
    }[];
    expect(recorded.map((w) => w.message_id)).toEqual(REPEATS.map((_, i) => `repeat-${i}`));

    // A real change afterwards is announced with the next version. Before it,
    // only the pusher no-ops with a messageId announced anything: at the
    // version stored, once and again on their retry (they may be the retry of
    // a write whose version bump failed; see pusher-writes.ts, pushersWritten).
    expect(await h.call('set_pushrule_enabled', USER, { ...cake, enabled: false })).toEqual({ ok: true, body: {} });
    expect(await h.call('set_pusher', USER, { action: { ...pusher, lang: 'de' } })).toEqual({ ok: true, body: {} });
    const reannounced = { user_id: USER, type: 'm.pushers', version: 1 };
    expect(await eventsUntil('m.pushers', 2)).toEqual([
      ...REPEATS.filter(([op]) => op === 'set_pusher').flatMap(() => [reannounced, reannounced]),
      { user_id: USER, type: 'm.push_rules', version: 5 },
      { user_id: USER, type: 'm.pushers', version: 2 },
    ]);
  });
});
