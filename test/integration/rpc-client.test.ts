import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/rpc-client.js';
import { RpcRequestError, RpcTransportError } from '../../src/client/rpc-errors.js';
import { startHarness, type Harness } from './support/worker-harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

/** The calls' deadline: a failure that is not a `timeout` came before it, whatever the machine's load. */
const TIMEOUT_MS = 5_000;
const aClient = (queue = h.names.queue) => new RpcClient({ url: h.names.amqp.url, queue, timeoutMs: TIMEOUT_MS });
const reasonOf = async (call: Promise<unknown>) =>
  call.then(
    () => 'resolved',
    (error: unknown) => (error instanceof RpcTransportError ? error.reason : String(error)),
  );

describe('RpcClient', () => {
  it('gets the reply envelope through a real worker, sending messageId, expiration and timestamp', async () => {
    const client = aClient();
    try {
      const user = '@client:example.org';
      expect(await client.request({ op: 'get_pushrules', user_id: user })).toMatchObject({ ok: true });
      const body = {
        op: 'set_pushrule_enabled',
        user_id: user,
        scope: 'global',
        kind: 'override',
        rule_id: '.m.rule.master',
        enabled: true,
      };
      expect(await client.request(body, { messageId: 'client-1' })).toEqual({ ok: true, body: {} });
      expect(await client.request(body, { messageId: 'client-1' })).toEqual({ ok: true, body: {} });
      const doc = await h.db.collection('account_data').findOne({ _id: user as never });
      expect(doc?.['version']).toBe(2);
    } finally {
      await client.close();
    }
  });

  it('fails at once with unroutable when no queue takes the request', async () => {
    const client = aClient(`no.such.queue.${randomUUID()}`);
    const started = Date.now();
    expect(await reasonOf(client.request({ op: 'get_pushers', user_id: '@x:example.org' }))).toBe('unroutable');
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS);
    await client.close();
  });

  it('fails at once with refused when the broker nacks the request, and serves the next call on a fresh connection', async () => {
    // A full queue that rejects what comes beyond its length: the broker nacks the publish.
    const full = `full.${randomUUID()}`;
    await h.caller.channel.assertQueue(full, {
      autoDelete: true,
      arguments: { 'x-max-length': 1, 'x-overflow': 'reject-publish' },
    });
    h.caller.channel.sendToQueue(full, Buffer.from('{}'));
    const client = new RpcClient({ url: h.names.amqp.url, queue: h.names.queue, timeoutMs: TIMEOUT_MS });
    try {
      expect(await client.request({ op: 'get_pushers', user_id: '@x:example.org' })).toMatchObject({ ok: true });
      const first = client.broker;
      const started = Date.now();
      expect(await reasonOf(client.request({ op: 'get_pushers', user_id: '@x:example.org' }, { queue: full }))).toBe(
        'refused',
      );
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS);
      expect(await client.request({ op: 'get_pushers', user_id: '@x:example.org' })).toMatchObject({ ok: true });
      expect(client.broker).toBe(first);
    } finally {
      await client.close();
      await h.caller.channel.deleteQueue(full);
    }
  });

  it('times out at the per-call deadline, whose time left it also sends as the request expiration', async () => {
    // A queue with no consumer: the request waits there.
    const queue = `idle.${randomUUID()}`;
    await h.caller.channel.assertQueue(queue, { autoDelete: true });
    const client = aClient(queue);
    const started = Date.now();
    const call = reasonOf(
      client.request({ op: 'get_pushers', user_id: '@x:example.org' }, { timeoutMs: 600, messageId: 'm-1' }),
    );
    await new Promise((r) => setTimeout(r, 100));
    const waiting = await h.caller.channel.get(queue, { noAck: true });
    expect(waiting && waiting.properties).toMatchObject({
      // The time left of the call's 600 ms when it was sent: the wait for the connection counts too.
      expiration: expect.stringMatching(/^(5\d\d|600)$/) as unknown,
      messageId: 'm-1',
      // The broker rewrites direct reply-to into the caller's own address.
      replyTo: expect.stringMatching(/^amq\.rabbitmq\.reply-to\./) as unknown,
      contentType: 'application/json',
    });
    expect(waiting && typeof waiting.properties.timestamp).toBe('number');
    expect(await call).toBe('timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(600);
    await client.close();
    await h.caller.channel.deleteQueue(queue);
  });

  it('fails pending calls fast with connection-lost when the channel goes, and connects again for the next call', async () => {
    // RabbitMQ closes a channel that publishes a userId other than its own user.
    const client = new RpcClient({
      url: h.names.amqp.url,
      queue: h.names.queue,
      timeoutMs: TIMEOUT_MS,
      publisherUserId: 'impostor',
    });
    const started = Date.now();
    const reasons = await Promise.all(
      [1, 2].map(async () => reasonOf(client.request({ op: 'get_pushers', user_id: '@x:example.org' }))),
    );
    expect(reasons).toEqual(['connection-lost', 'connection-lost']);
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS);
    // Not `closed`: the client opened a new connection for this call (and lost it the same way).
    expect(await reasonOf(client.request({ op: 'get_pushers', user_id: '@x:example.org' }))).toBe('connection-lost');
    await client.close();
  });

  it('close() rejects pending calls with closed, is idempotent, and refuses later calls', async () => {
    const queue = `idle.${randomUUID()}`;
    await h.caller.channel.assertQueue(queue, { autoDelete: true });
    const client = aClient(queue);
    const pending = reasonOf(client.request({ op: 'get_pushers', user_id: '@x:example.org' }));
    await new Promise((r) => setTimeout(r, 100));
    await Promise.all([client.close(), client.close()]);
    expect(await pending).toBe('closed');
    expect(await reasonOf(client.request({ op: 'get_pushers', user_id: '@x:example.org' }))).toBe('closed');
    await h.caller.channel.deleteQueue(queue);
  });

  it('a body it cannot serialize fails only its own call: the calls pending on the same connection get their replies', async () => {
    // The test plays the worker, so that the other calls are surely pending
    // (published, not answered) when the bad one is made.
    const queue = `fake-worker.${randomUUID()}`;
    await h.caller.channel.assertQueue(queue, { autoDelete: true });
    const client = aClient(queue);
    const take = async () => {
      for (let tries = 0; tries < 50; tries += 1) {
        const request = await h.caller.channel.get(queue, { noAck: true });
        if (request !== false) return request;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('no request arrived');
    };
    const answer = (request: Awaited<ReturnType<typeof take>>) => {
      const { replyTo, correlationId } = request.properties as { replyTo: string; correlationId: string };
      const { user_id: userId } = JSON.parse(request.content.toString()) as { user_id: string };
      h.caller.channel.sendToQueue(replyTo, Buffer.from(JSON.stringify({ ok: true, body: { for: userId } })), {
        correlationId,
      });
    };
    const pending = ['@one:example.org', '@two:example.org'].map(async (user) =>
      client.request({ op: 'get_pushers', user_id: user }),
    );
    const taken = [await take(), await take()];

    // ~4,100 levels and more overflow JSON.stringify's stack.
    let deep: unknown = 'leaf';
    for (let i = 0; i < 10_000; i += 1) deep = [deep];
    const bad = await client
      .request({ op: 'set_pusher', user_id: '@bad:example.org', action: { data: { deep } } })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(RpcRequestError);

    for (const request of taken) answer(request);
    expect(await Promise.all(pending)).toEqual([
      { ok: true, body: { for: '@one:example.org' } },
      { ok: true, body: { for: '@two:example.org' } },
    ]);
    // Same connection, still serving.
    const next = client.request({ op: 'get_pushers', user_id: '@three:example.org' });
    answer(await take());
    expect(await next).toEqual({ ok: true, body: { for: '@three:example.org' } });
    await client.close();
    await h.caller.channel.deleteQueue(queue);
  });

  it.each([
    ['text that is not JSON', 'not json'],
    ['JSON that is not an envelope', '[1, 2]'],
  ])('rejects with bad-reply when the reply is %s, and keeps serving', async (_name, content) => {
    // The test plays the worker: it takes the request and answers it itself.
    const queue = `fake-worker.${randomUUID()}`;
    await h.caller.channel.assertQueue(queue, { autoDelete: true });
    const client = aClient(queue);
    const answer = async (reply: string) => {
      for (let tries = 0; tries < 50; tries += 1) {
        const request = await h.caller.channel.get(queue, { noAck: true });
        if (request !== false) {
          const { replyTo, correlationId } = request.properties as { replyTo: string; correlationId: string };
          h.caller.channel.sendToQueue(replyTo, Buffer.from(reply), { correlationId });
          return;
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('no request arrived');
    };
    const bad = reasonOf(client.request({ op: 'get_pushers', user_id: '@x:example.org' }));
    await answer(content);
    expect(await bad).toBe('bad-reply');
    const good = client.request({ op: 'get_pushers', user_id: '@x:example.org' });
    await answer('{"ok":true,"body":{"pushers":[]}}');
    expect(await good).toEqual({ ok: true, body: { pushers: [] } });
    await client.close();
    await h.caller.channel.deleteQueue(queue);
  });
});
