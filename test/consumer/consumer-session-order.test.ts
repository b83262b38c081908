import { describe, expect, it } from 'vitest';
import type { ChangeListener } from '../../src/consumer/change-listener.js';
import { ConsumerSession } from '../../src/consumer/consumer-session.js';
import { createLogger } from '../../src/logging/logger.js';
import { aConsumedQueue as queue, brokerLinkDouble } from '../support/broker-link-double.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';

/**
 * What a session does on a new connection, in order, on a fake broker that
 * logs every call: the change events must be bound (and the caches reset)
 * before any queue that serves reads is consumed, or a read served between
 * the two is answered from a cache no event can reach yet.
 */
describe('ConsumerSession.open: the change events are bound before any request is taken', () => {
  it.each<[string, boolean]>([
    ['with a pusher listener (delivery)', true],
    ['push rules only', false],
  ])('binds, then resets the caches, then consumes the request and read queues (%s)', async (_, pushers) => {
    const { calls, link } = brokerLinkDouble();
    const listener: ChangeListener = {
      pushRulesChanged: () => undefined,
      ...(pushers ? { pushersChanged: () => undefined } : {}),
      subscriptionReset: () => calls.push('subscriptionReset'),
    };
    const { amqp } = DEFAULT_CONFIG;
    await ConsumerSession.open(link, {
      queues: [queue('request', amqp.queue, true), queue('read', amqp.readQueue, false)],
      amqp,
      changes: listener,
      logger: createLogger('silent'),
      handle: async () => Promise.resolve(),
      closing: () => false,
    });
    const at = (call: string) => {
      const index = calls.indexOf(call);
      expect(index, `${call} in ${JSON.stringify(calls)}`).toBeGreaterThanOrEqual(0);
      return index;
    };
    const lastBind = at(`bind amq.gen-events ${amqp.eventsExchange} ${pushers ? 'm.pushers' : 'm.push_rules'}`);
    // The exchange exists before the bind, whoever declares it first.
    expect(at(`assertExchange ${amqp.eventsExchange}`)).toBeLessThan(lastBind);
    expect(lastBind).toBeLessThan(at('subscriptionReset'));
    expect(at('subscriptionReset')).toBeLessThan(at(`consume ${amqp.queue}`));
    expect(at('subscriptionReset')).toBeLessThan(at(`consume ${amqp.readQueue}`));
  });
});
