import type { Channel, ConfirmChannel, ConsumeMessage } from 'amqplib';
import { describe, expect, it } from 'vitest';
import { AckBatcher } from '../../src/consumer/ack-batcher.js';
import type { ConsumedQueue, ServeOutcome } from '../../src/consumer/consumed-queue.js';
import { RequestEnvelope } from '../../src/consumer/request-envelope.js';
import { NO_OBSERVER } from '../../src/consumer/worker-observer.js';
import { createLogger } from '../../src/logging/logger.js';

/**
 * The wire version (docs/rpc-contract.md#wire-version): a request names the
 * version it speaks in the header `x-push-wire-version` (none: 1); a worker
 * serves versions up to its own, refuses a newer one unserved, and says its
 * own on every reply and change event.
 */
interface Published {
  readonly to: string;
  readonly body: unknown;
  readonly headers: unknown;
}

async function serveWith(headers: Record<string, unknown> | undefined) {
  const published: Published[] = [];
  let served = 0;
  const channel = {
    publish: (_exchange: string, to: string, content: Buffer, options: { headers?: unknown }) => {
      published.push({ to, body: JSON.parse(content.toString('utf8')), headers: options.headers });
      return true;
    },
    ack: () => undefined,
    nack: () => undefined,
  };
  const confirms = {
    publish: (
      exchange: string,
      _key: string,
      content: Buffer,
      options: { headers?: unknown },
      done: (error: unknown) => void,
    ) => {
      published.push({ to: exchange, body: JSON.parse(content.toString('utf8')), headers: options.headers });
      done(null);
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
    serve: async () => {
      served += 1;
      return Promise.resolve(outcome);
    },
  };
  const acks = new AckBatcher(channel, () => undefined);
  const envelope = new RequestEnvelope({
    amqp: { trustedPublishers: [], replyMarginMs: 0, eventsExchange: 'events', connectTimeoutMs: 5_000 },
    logger: createLogger('silent'),
    observer: NO_OBSERVER,
    now: Date.now,
  });
  const message = {
    content: Buffer.from('{}'),
    fields: { deliveryTag: 1, redelivered: false },
    properties: { replyTo: 'amq.rabbitmq.reply-to', correlationId: 'c1', headers },
  } as unknown as ConsumeMessage;
  acks.delivered(1);
  await envelope.handle({
    lane: { consumed, channel: channel as unknown as Channel, acks },
    message,
    confirms: confirms as unknown as ConfirmChannel,
  });
  return { published, served };
}

describe('RequestEnvelope: the wire version', () => {
  it.each([
    ['no header (a caller that predates it: version 1)', undefined],
    ['no such header', { other: 'x' }],
    ['version 1', { 'x-push-wire-version': 1 }],
    ['version 1 as text', { 'x-push-wire-version': '1' }],
  ])('serves a request with %s, and says version 1 on its change event and reply', async (_name, headers) => {
    const { published, served } = await serveWith(headers);
    expect(served).toBe(1);
    expect(published).toEqual([
      {
        to: 'events',
        body: { user_id: '@alice:example.org', type: 'm.push_rules', version: 2 },
        headers: { 'x-push-wire-version': 1 },
      },
      { to: 'amq.rabbitmq.reply-to', body: { ok: true, body: {} }, headers: { 'x-push-wire-version': 1 } },
    ]);
  });

  it.each([
    [{ 'x-push-wire-version': 2 }, 'This worker speaks wire versions 1 to 1; the request asks for 2.'],
    [{ 'x-push-wire-version': 0 }, 'x-push-wire-version must be a positive integer.'],
    [{ 'x-push-wire-version': 1.5 }, 'x-push-wire-version must be a positive integer.'],
    [{ 'x-push-wire-version': 'two' }, 'x-push-wire-version must be a positive integer.'],
  ])('refuses %j unserved: Unrecognized, nothing changed, no change event', async (headers, message) => {
    const { published, served } = await serveWith(headers);
    expect(served).toBe(0);
    expect(published).toHaveLength(1);
    expect(published[0]).toMatchObject({
      to: 'amq.rabbitmq.reply-to',
      body: { ok: false, error: { kind: 'Unrecognized', errcode: 'M_UNRECOGNIZED', status: 400 } },
      headers: { 'x-push-wire-version': 1 },
    });
    expect((published[0]?.body as { error: { error: string } }).error.error).toContain(message);
  });
});
