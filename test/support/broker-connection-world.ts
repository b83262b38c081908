import { afterEach } from 'vitest';
import { BrokerConnection, type BrokerConnectionOptions } from '../../src/amqp/broker-connection.js';
import type { BrokerLink } from '../../src/amqp/broker-link.js';
import type { FakeBroker } from './fake-broker.js';

/**
 * The BrokerConnection under test (test/amqp/broker-connection*.test.ts), over the fake broker
 * (fake-broker.ts): each one a test opens is closed after it (`useBrokerConnectionWorld`).
 */

interface FakeSession {
  readonly node: string;
  readonly link: BrokerLink;
}

const opened: BrokerConnection<FakeSession>[] = [];

/** Closes after each test the connections it opened: call once at the top of a test file. */
export function useBrokerConnectionWorld(): void {
  afterEach(async () => {
    await Promise.all(opened.splice(0).map(async (c) => c.close()));
  });
}

/** A layer over nodes a, b, c in that order (random near 1 keeps the order), on the fake broker. */
export function layer(
  broker: FakeBroker,
  overrides: Partial<BrokerConnectionOptions<FakeSession>> = {},
): BrokerConnection<FakeSession> {
  const connection = new BrokerConnection<FakeSession>({
    urls: 'amqp://a:5672,amqp://b:5672,amqp://c:5672',
    role: 'test',
    attemptTimeoutMs: 1_000,
    backoff: { baseMs: 100, maxMs: 1_000 },
    random: () => 0.999,
    connect: broker.connect,
    wait: broker.wait,
    setup: async (link) => {
      await Promise.resolve();
      broker.events.push(`setup ${link.address.label}`);
      return { node: link.address.label, link };
    },
    retire: (session, reason) => {
      broker.events.push(`retire ${session.node}: ${reason}`);
    },
    ...overrides,
  });
  opened.push(connection);
  return connection;
}

export const settle = async () => {
  for (let i = 0; i < 20; i += 1) await new Promise((resolve) => setImmediate(resolve));
};
