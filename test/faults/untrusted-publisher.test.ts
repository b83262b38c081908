import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTRACT_KINDS } from '../support/expect-result.js';
import { openFaultWorld, type FaultWorld } from './support/fault-world.js';
import { services } from './support/services.js';

/**
 * A second RabbitMQ user that may publish to the queue but is not in
 * TRUSTED_PUBLISHERS. RabbitMQ checks that a request's `userId` property is
 * the publishing connection's user, so the worker can trust it.
 */
const USER = '@target:example.org';
const INTRUDER = { name: 'push-intruder', password: 'intruder-secret' };
let world: FaultWorld;

beforeAll(async () => {
  await services('add-amqp-user', INTRUDER.name, INTRUDER.password);
  world = await openFaultWorld(1, { TRUSTED_PUBLISHERS: 'guest' });
  expect((await world.client.request({ op: 'get_pushrules', user_id: USER })).ok).toBe(true);
});
afterAll(async () => {
  await world.close();
});

const FORBIDDEN = {
  ok: false,
  error: { kind: 'Forbidden', ...CONTRACT_KINDS.Forbidden, error: 'The publisher of this request is not trusted.' },
};
const intruderUrl = () => world.names.amqp.url.replace('guest:guest@', `${INTRUDER.name}:${INTRUDER.password}@`);
const write = {
  op: 'set_pushrule',
  user_id: USER,
  scope: 'global',
  kind: 'room',
  rule_id: '!evil:example.org',
  rule: { actions: ['notify'] },
};

describe('an untrusted publisher', () => {
  it('is refused with Forbidden, with or without a userId, and changes nothing', async () => {
    const before = await world.stored(USER);
    const connection = await amqp.connect(intruderUrl());
    const channel = await connection.createChannel();
    const replies: unknown[] = [];
    await channel.consume(
      'amq.rabbitmq.reply-to',
      (m) => {
        if (m !== null) replies.push(JSON.parse(m.content.toString()));
      },
      { noAck: true },
    );
    for (const userId of [INTRUDER.name, undefined]) {
      channel.sendToQueue(world.names.queue, Buffer.from(JSON.stringify(write)), {
        replyTo: 'amq.rabbitmq.reply-to',
        correlationId: `c-${String(userId)}`,
        ...(userId === undefined ? {} : { userId }),
      });
    }
    for (let i = 0; i < 100 && replies.length < 2; i += 1) await new Promise((r) => setTimeout(r, 50));
    await connection.close();
    expect(replies).toEqual([FORBIDDEN, FORBIDDEN]);
    expect(await world.stored(USER)).toEqual(before);
  });

  it('cannot pose as the trusted user: the broker refuses a forged userId', async () => {
    const connection = await amqp.connect(intruderUrl());
    const channel = await connection.createChannel();
    const closed = new Promise<Error>((resolve) => channel.once('error', resolve));
    channel.sendToQueue(world.names.queue, Buffer.from(JSON.stringify(write)), {
      replyTo: 'amq.rabbitmq.reply-to',
      correlationId: 'forged',
      userId: 'guest',
    });
    expect((await closed).message).toMatch(/PRECONDITION_FAILED/);
    await connection.close().catch(() => undefined);
    expect((await world.stored(USER)).ruleIds).toEqual([]);
  });

  it('the trusted user is served', async () => {
    expect(await world.client.request({ op: 'get_pushers', user_id: USER })).toEqual({
      ok: true,
      body: { pushers: [] },
    });
  });
});
