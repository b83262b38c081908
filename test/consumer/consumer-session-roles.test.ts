import { afterEach, describe, expect, it } from 'vitest';
import type { ConsumedQueue } from '../../src/consumer/consumed-queue.js';
import { ConsumerSession } from '../../src/consumer/consumer-session.js';
import { createLogger } from '../../src/logging/logger.js';
import { aConsumedQueue, brokerLinkDouble } from '../support/broker-link-double.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';

const { amqp } = DEFAULT_CONFIG;
/** The queues of each role, as worker-process.ts gives them to the session (only the request queue is required). */
const QUEUES: Readonly<Record<string, ConsumedQueue>> = {
  request: aConsumedQueue('request', amqp.queue, true),
  read: aConsumedQueue('read', amqp.readQueue, false),
  evaluate: aConsumedQueue('evaluate', 'matrix.push.evaluate', false),
  deliver: aConsumedQueue('deliver', 'matrix.push.deliver', false),
};

const sessions: ConsumerSession[] = [];
afterEach(async () => {
  // Its queues that could not be consumed are tried again on a timer until it retires.
  for (const session of sessions.splice(0)) await session.retire();
});

async function open(roles: readonly string[], refused: readonly string[] = []) {
  const broker = brokerLinkDouble(new Set(refused.map((role) => (QUEUES[role] as ConsumedQueue).queue)));
  const session = await ConsumerSession.open(broker.link, {
    queues: roles.map((role) => QUEUES[role] as ConsumedQueue),
    amqp,
    logger: createLogger('silent'),
    handle: async () => Promise.resolve(),
    closing: () => false,
  });
  sessions.push(session);
  return { session, calls: broker.calls };
}

describe('a consumer session serves the queues of its worker’s roles', () => {
  it.each([
    { queues: ['request', 'read', 'evaluate', 'deliver'], refused: [], ready: true },
    // The request queue is what a worker with the rpc role needs; the others are tried again meanwhile.
    { queues: ['request', 'read', 'evaluate', 'deliver'], refused: ['read', 'deliver'], ready: true },
    { queues: ['request'], refused: [], ready: true },
    // Without the request queue, every queue it has is what it is for.
    { queues: ['deliver'], refused: [], ready: true },
    { queues: ['deliver'], refused: ['deliver'], ready: false },
    { queues: ['read', 'evaluate'], refused: [], ready: true },
    { queues: ['read', 'evaluate'], refused: ['evaluate'], ready: false },
  ])('consuming $queues, $refused refused: ready $ready', async ({ queues, refused, ready }) => {
    const { session } = await open(queues, refused);
    expect(session.consumingNeeded).toBe(ready);
    expect([...session.consumedRoles].sort()).toEqual(queues.filter((role) => !refused.includes(role)).sort());
  });

  it('declares the dead-letter and event exchanges itself when it has no request queue to bring them', async () => {
    const { calls } = await open(['deliver']);
    const at = (call: string) => calls.indexOf(call);
    expect(at(`assertExchange ${amqp.deadLetterExchange}`)).toBeGreaterThanOrEqual(0);
    expect(at(`assertExchange ${amqp.eventsExchange}`)).toBeGreaterThanOrEqual(0);
    expect(at(`assertExchange ${amqp.deadLetterExchange}`)).toBeLessThan(at('consume matrix.push.deliver'));
  });

  it('leaves the exchanges to the request queue’s declaration when it has one', async () => {
    const { calls } = await open(['request', 'deliver']);
    expect(calls).not.toContain(`assertExchange ${amqp.deadLetterExchange}`);
  });
});
