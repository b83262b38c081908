import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import amqp from 'amqplib';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startHarness, type Harness } from './support/worker-harness.js';

/**
 * Only the request queue is needed to serve. The read queue, the evaluate
 * queue and the dead-letter queue may be unavailable to a worker (on a
 * cluster: classic queues homed on a node that is down, `404 … home node …
 * is down`); here they are made unavailable the way a single node can: an
 * existing queue of the same name with other arguments, which the broker
 * refuses to declare again (`406 PRECONDITION_FAILED`). The worker starts,
 * is ready, serves every op from the request queue, and consumes the read
 * queue as soon as it can be declared.
 */
const id = randomUUID().slice(0, 8);
const READ_QUEUE = `test.unavailable.${id}.read`;
const DEAD_LETTER_QUEUE = `test.unavailable.${id}.dead`;
const lines: Record<string, unknown>[] = [];
let h: Harness;
let connection: amqp.ChannelModel;

/** Declares `queue` with arguments no worker uses, on a channel of its own. */
async function squat(queue: string): Promise<void> {
  const channel = await connection.createChannel();
  await channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'classic', 'x-max-length': 7 } });
  await channel.close();
}

beforeAll(async () => {
  connection = await amqp.connect(inject('amqpUrl'));
  await squat(READ_QUEUE);
  await squat(DEAD_LETTER_QUEUE);
  const logger = pino(
    { level: 'info' },
    {
      write: (line: string) => {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  );
  h = await startHarness(
    { readQueue: READ_QUEUE, deadLetterQueue: DEAD_LETTER_QUEUE, reconnectBaseMs: 50, reconnectMaxMs: 200 },
    { logger },
  );
});

afterAll(async () => {
  await h.close();
  const channel = await connection.createChannel();
  await channel.deleteQueue(READ_QUEUE);
  await channel.deleteQueue(DEAD_LETTER_QUEUE);
  await connection.close();
});

const warnings = (message: string) => lines.filter((l) => l['level'] === 40 && l['msg'] === message);

describe('queues a worker does not need to serve', () => {
  it('a read queue and a dead-letter queue that cannot be declared do not stop the worker', async () => {
    expect(h.worker.consuming).toBe(true);
    expect(h.worker.consumedQueues).toEqual(['request']);
    expect(warnings('cannot consume this queue; serving the others and trying it again')[0]).toMatchObject({
      queue: READ_QUEUE,
      role: 'read',
      failures: 1,
    });
    // Retried, but said once (then every 30th attempt), not a warning per attempt.
    await sleep(1_000);
    expect(warnings('cannot consume this queue; serving the others and trying it again')).toHaveLength(1);
    expect(lines.filter((l) => l['msg'] === 'AMQP channel error')).toEqual([]);
    expect(
      warnings(
        'cannot declare the dead-letter queue; serving without it (unanswerable requests are dropped until it is back)',
      )[0],
    ).toMatchObject({
      queue: DEAD_LETTER_QUEUE,
    });
    const user = '@unavailable:example.org';
    expect(await h.call('get_pushrules', user)).toMatchObject({ ok: true });
    expect(
      await h.call('set_pushrule', user, {
        scope: 'global',
        kind: 'room',
        rule_id: '!r:example.org',
        rule: { actions: [] },
      }),
    ).toMatchObject({ ok: true });
    expect(
      await h.call('get_pushrule_enabled', user, { scope: 'global', kind: 'room', rule_id: '!r:example.org' }),
    ).toEqual({ ok: true, body: { enabled: true } });
  });

  it('the dead-letter queue declared before with other arguments is kept, and still bound: an unanswerable request is parked there', async () => {
    const channel = await connection.createChannel();
    // No replyTo: the worker rejects it to the dead-letter exchange.
    channel.sendToQueue(h.names.queue, Buffer.from('{"op":"get_pushrules","user_id":"@parked:example.org"}'), {
      correlationId: 'parked',
    });
    let parked: amqp.GetMessage | false = false;
    for (let i = 0; i < 100 && parked === false; i += 1) {
      parked = await channel.get(DEAD_LETTER_QUEUE, { noAck: true });
      if (parked === false) await sleep(50);
    }
    expect(parked === false ? undefined : parked.properties.correlationId).toBe('parked');
    await channel.close();
  });

  it('consumes the read queue once it can be declared, and serves reads from it', async () => {
    const channel = await connection.createChannel();
    await channel.deleteQueue(READ_QUEUE);
    await channel.close();
    for (let i = 0; i < 100 && !h.worker.consumedQueues.includes('read'); i += 1) await sleep(50);
    expect(h.worker.consumedQueues).toEqual(['request', 'read']);
    expect(
      await h.caller.call(READ_QUEUE, {
        op: 'get_pushrule_enabled',
        user_id: '@unavailable:example.org',
        scope: 'global',
        kind: 'room',
        rule_id: '!r:example.org',
      }),
    ).toEqual({
      ok: true,
      body: { enabled: true },
    });
  });

  it('a read queue deleted under the worker is consumed again (the broker cancels the consumer; the worker re-declares it)', async () => {
    const channel = await connection.createChannel();
    await channel.deleteQueue(READ_QUEUE);
    await channel.close();
    for (let i = 0; i < 40 && h.worker.consumedQueues.includes('read'); i += 1) await sleep(25);
    for (let i = 0; i < 100 && !h.worker.consumedQueues.includes('read'); i += 1) await sleep(50);
    expect(h.worker.consumedQueues).toEqual(['request', 'read']);
    expect(h.worker.consuming).toBe(true);
    expect(await h.caller.call(READ_QUEUE, { op: 'get_pushrules', user_id: '@unavailable:example.org' })).toMatchObject(
      { ok: true },
    );
  });
});
