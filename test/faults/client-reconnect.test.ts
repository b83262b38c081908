import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PushRulesClient, PushRulesError } from '../../src/client/push-rules-client.js';
import { stopWorkerProcess } from '../integration/support/worker-processes.js';
import { openFaultWorld, type FaultWorld } from './support/fault-world.js';
import { services } from './support/services.js';

/**
 * The typed client when the broker goes away: calls waiting for a reply
 * fail fast with Unavailable (their reply-to belongs to the lost connection,
 * so waiting for the deadline would gain nothing), and the same client
 * instance connects again for later calls.
 */
const USER = '@client-reconnect:example.org';
const ADDRESS = { scope: 'global', kind: 'override', ruleId: '.m.rule.master' };
let world: FaultWorld;
let client: PushRulesClient;

beforeAll(async () => {
  world = await openFaultWorld(1);
  client = new PushRulesClient({
    url: world.names.amqp.url,
    queue: world.names.queue,
    readQueue: world.names.amqp.readQueue,
    timeoutMs: 30_000,
    publisherUserId: 'guest',
  });
});
afterAll(async () => {
  await services('start-rabbitmq');
  await client.close();
  await world.close();
});

describe('PushRulesClient across a broker restart', () => {
  it('fails pending calls fast with Unavailable and serves later calls on a new connection', async () => {
    await client.getPushRules(USER); // stores the server defaults
    expect(await client.getPushRuleEnabled(USER, ADDRESS)).toEqual({ enabled: false });

    // With no worker consuming, calls stay pending in the queue.
    const [worker] = world.workers;
    if (worker === undefined) throw new Error('no worker');
    await stopWorkerProcess(worker, 'SIGTERM');
    const pending = [1, 2, 3].map(async (i) =>
      client.setPushRuleEnabled(USER, ADDRESS, true, { messageId: `pending-${i}` }).then(
        () => 'resolved',
        (error: unknown) => error,
      ),
    );
    await sleep(200);
    const stoppedAt = Date.now();
    await services('stop-rabbitmq');
    const failures = await Promise.all(pending);
    const failedWithinMs = Date.now() - stoppedAt;
    for (const failure of failures) {
      expect(failure).toBeInstanceOf(PushRulesError);
      expect(failure).toMatchObject({ kind: 'Unavailable', status: 503, reason: 'connection-lost' });
    }
    // Far below the 30 s deadline: they failed on the lost connection.
    expect(failedWithinMs).toBeLessThan(10_000);

    await services('start-rabbitmq');
    await world.startWorker();
    const restartedAt = Date.now();
    let answer: unknown;
    while (answer === undefined && Date.now() - restartedAt < 15_000) {
      answer = await client.getPushRuleEnabled(USER, ADDRESS, { timeoutMs: 2_000 }).catch(() => undefined);
      if (answer === undefined) await sleep(200);
    }
    expect(answer).toEqual({ enabled: expect.any(Boolean) as unknown });
    console.info(
      `[fault: client reconnect] 3 pending calls failed ${failedWithinMs} ms after the broker stop was asked for; ` +
        `the same client answered again ${Date.now() - restartedAt} ms after the worker was back`,
    );
  });
});
