import { randomUUID } from 'node:crypto';
import amqp, { type ConsumeMessage } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/rpc-client.js';
import { startHarness, type Harness } from './support/worker-harness.js';

/**
 * The wire version on the broker (docs/rpc-contract.md#wire-version): the
 * client says which it speaks, a worker says its own on every reply, and
 * refuses a newer one without serving it.
 */
let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

const HEADER = 'x-push-wire-version';

describe('the wire version', () => {
  it('is sent by RpcClient on its requests', async () => {
    const { queue } = await h.caller.channel.assertQueue('', { exclusive: true });
    const client = new RpcClient({ url: h.names.amqp.url, queue, timeoutMs: 200 });
    try {
      await client.request({ op: 'get_pushers', user_id: '@wire:example.org' }).catch(() => undefined);
      const request = await h.caller.channel.get(queue, { noAck: true });
      expect(request && request.properties.headers).toEqual({ [HEADER]: 1 });
    } finally {
      await client.close();
    }
  });

  it("is a worker's own on its replies", async () => {
    const connection = await amqp.connect(h.names.amqp.url);
    try {
      const channel = await connection.createChannel();
      let resolve: (message: ConsumeMessage) => void = () => undefined;
      const reply = new Promise<ConsumeMessage>((settle) => {
        resolve = settle;
      });
      // Consuming before the request goes: direct reply-to needs it.
      await channel.consume(
        'amq.rabbitmq.reply-to',
        (message) => {
          if (message !== null) resolve(message);
        },
        { noAck: true },
      );
      channel.sendToQueue(h.names.queue, Buffer.from('{"op":"get_pushers","user_id":"@wire:example.org"}'), {
        replyTo: 'amq.rabbitmq.reply-to',
        correlationId: randomUUID(),
      });
      expect((await reply).properties.headers).toEqual({ [HEADER]: 1 });
    } finally {
      await connection.close();
    }
  });

  it('newer than the worker: refused Unrecognized, nothing changed', async () => {
    const user = '@newer:example.org';
    const reply = await h.caller.call(
      h.names.queue,
      {
        op: 'set_pushrule_enabled',
        user_id: user,
        scope: 'global',
        kind: 'override',
        rule_id: '.m.rule.master',
        enabled: true,
      },
      { headers: { [HEADER]: 2 } },
    );
    expect(reply).toMatchObject({ ok: false, error: { kind: 'Unrecognized', status: 400 } });
    expect(reply.error?.error).toContain('the request asks for 2');
    expect(await h.db.collection('account_data').findOne({ _id: user as never })).toBeNull();
    // The same request as version 1 is served.
    const served = await h.caller.call(
      h.names.queue,
      { op: 'get_pushrules', user_id: user },
      { headers: { [HEADER]: 1 } },
    );
    expect(served).toMatchObject({ ok: true });
  });
});
