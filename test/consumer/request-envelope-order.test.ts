import type { Channel, ConfirmChannel, ConsumeMessage } from 'amqplib';
import { describe, expect, it } from 'vitest';
import { AckBatcher } from '../../src/consumer/ack-batcher.js';
import type { ConsumedQueue, ServeOutcome } from '../../src/consumer/consumed-queue.js';
import { RequestEnvelope } from '../../src/consumer/request-envelope.js';
import { NO_OBSERVER } from '../../src/consumer/worker-observer.js';
import { createLogger } from '../../src/logging/logger.js';

/**
 * The order of what a write sends: its change events, confirmed, then its
 * reply, then its ack. Every worker has the event before the caller has the
 * reply, so a read sent after the reply finds the write (the read cache).
 */
function world(confirm: 'ok' | 'refused') {
  const sent: string[] = [];
  const pendingConfirms: (() => void)[] = [];
  const channel = {
    publish: () => {
      sent.push('reply');
      return true;
    },
    ack: () => sent.push('ack'),
    nack: (_message: unknown, _allUpTo: boolean, requeue: boolean) => sent.push(requeue ? 'requeue' : 'reject'),
  };
  const confirms = {
    publish: (
      _exchange: string,
      routingKey: string,
      _content: Buffer,
      _options: unknown,
      done: (error: unknown) => void,
    ) => {
      sent.push(`event ${routingKey}`);
      pendingConfirms.push(() => {
        sent.push('confirmed');
        done(confirm === 'ok' ? null : new Error('nacked'));
      });
      return true;
    },
  };
  const outcome: ServeOutcome = {
    reply: { ok: true, body: {} },
    conflicts: 0,
    op: 'set_pushrule_enabled',
    changes: [{ user_id: '@alice:example.org', type: 'm.push_rules', version: 2 }],
  };
  const consumed: ConsumedQueue = {
    role: 'request',
    queue: 'q',
    prefetch: 1,
    required: true,
    declare: async () => Promise.resolve(),
    serve: async () => Promise.resolve(outcome),
  };
  const acks = new AckBatcher(channel, () => undefined);
  const lane = { consumed, channel: channel as unknown as Channel, acks };
  const envelope = new RequestEnvelope({
    amqp: { trustedPublishers: [], replyMarginMs: 0, eventsExchange: 'events', connectTimeoutMs: 5_000 },
    logger: createLogger('silent'),
    observer: NO_OBSERVER,
    now: Date.now,
  });
  const message = {
    content: Buffer.from('{}'),
    fields: { deliveryTag: 1, redelivered: false },
    properties: { replyTo: 'amq.rabbitmq.reply-to', correlationId: 'c1' },
  } as unknown as ConsumeMessage;
  acks.delivered(1);
  const handled = envelope.handle({ lane, message, confirms: confirms as unknown as ConfirmChannel });
  return { sent, pendingConfirms, handled };
}

const settle = async () => new Promise((resolve) => setImmediate(resolve));

describe('RequestEnvelope: a write is answered once its change events are confirmed', () => {
  it('publishes the event, waits for its confirm, then replies and acks', async () => {
    const { sent, pendingConfirms, handled } = world('ok');
    await settle();
    expect(sent).toEqual(['event m.push_rules']);
    for (const confirm of pendingConfirms) confirm();
    await handled;
    expect(sent).toEqual(['event m.push_rules', 'confirmed', 'reply', 'ack']);
  });

  it('an event the broker refuses leaves the request unanswered, back in the queue for its redelivery to announce', async () => {
    const { sent, pendingConfirms, handled } = world('refused');
    await settle();
    for (const confirm of pendingConfirms) confirm();
    await handled;
    expect(sent).toEqual(['event m.push_rules', 'confirmed', 'requeue']);
  });
});
