import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { Logger } from '../../src/logging/logger.js';
import { layer, settle, useBrokerConnectionWorld } from '../support/broker-connection-world.js';
import { FakeBroker, type FakeConnection } from '../support/fake-broker.js';

// What its owner calls, session() and close(), is in broker-connection-session-close.test.ts.

useBrokerConnectionWorld();

/** A real pino logger whose lines are kept, parsed, for the test to read. */
function capturedLog(): { lines: Record<string, unknown>[]; logger: Logger } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info' },
    { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { lines, logger };
}

describe('BrokerConnection', () => {
  it('connects to the first node of its order and sets the session up there', async () => {
    const broker = new FakeBroker();
    const connected: string[] = [];
    const connection = layer(broker, {
      observer: { connected: (address, again) => connected.push(`${address.label} again=${again}`) },
    });
    const session = await connection.start();
    expect(session?.node).toBe('a:5672');
    expect(connection.address?.label).toBe('a:5672');
    expect(broker.events).toEqual(['attempt a', 'setup a:5672']);
    expect(connected).toEqual(['a:5672 again=false']);
  });

  it('asks for the heartbeat, names the connection and bounds the attempt', async () => {
    const broker = new FakeBroker();
    await layer(broker, { heartbeatSeconds: 7, role: 'matrix-push-worker' }).start();
    expect(broker.options[0]).toMatchObject({ heartbeatSeconds: 7, timeoutMs: 1_000 });
    expect(broker.options[0]?.connectionName).toMatch(/^matrix-push-worker .+:\d+$/);
  });

  it('on loss, retires the session, then tries the next node at once (no wait)', async () => {
    const broker = new FakeBroker();
    const lost: string[] = [];
    const connection = layer(broker, {
      observer: { lost: (address, reason) => lost.push(`${address.label}: ${reason}`) },
    });
    await connection.start();
    broker.live()?.drop();
    await settle();
    expect(broker.events).toEqual([
      'attempt a',
      'setup a:5672',
      'retire a:5672: connection closed',
      'attempt b',
      'setup b:5672',
    ]);
    expect(lost).toEqual(['a:5672: connection closed']);
    expect(connection.current?.node).toBe('b:5672');
  });

  it.each([
    [
      'the broker closed it',
      new Error(
        'Connection closed: 320 (CONNECTION-FORCED) with message "CONNECTION_FORCED - broker forced connection closure with reason \'shutdown\'"',
      ),
      'connection closed: Connection closed: 320 (CONNECTION-FORCED) with message "CONNECTION_FORCED - broker forced connection closure with reason \'shutdown\'"',
    ],
    ['a heartbeat was missed', new Error('Heartbeat timeout'), 'connection closed: Heartbeat timeout'],
    ['the socket failed', new Error('read ECONNRESET'), 'connection closed: read ECONNRESET'],
    ['no cause was given', undefined, 'connection closed'],
    ['the cause cannot be written as JSON', { big: 1n }, 'connection closed'],
  ])('says why the connection was lost when %s', async (_case, error, reason) => {
    const broker = new FakeBroker();
    const lost: string[] = [];
    const connection = layer(broker, { observer: { lost: (_address, why) => lost.push(why) } });
    await connection.start();
    broker.live()?.drop(error);
    await settle();
    expect(lost).toEqual([reason]);
    expect(broker.events).toContain(`retire a:5672: ${reason}`);
  });

  it('logs each reconnect attempt with its target, and how long the attempt and the whole outage took', async () => {
    const broker = new FakeBroker();
    const { lines, logger } = capturedLog();
    const connection = layer(broker, { logger });
    await connection.start();
    broker.down.add('b');
    broker.live()?.drop(new Error('Heartbeat timeout'));
    await settle();
    expect(connection.current?.node).toBe('c:5672');
    const seen = lines.map((l) => [l['msg'], l['broker'], l['reason'] ?? null]);
    expect(seen).toEqual([
      ['connected to RabbitMQ', 'a:5672', null],
      ['lost the broker connection; reconnecting', 'a:5672', 'connection closed: Heartbeat timeout'],
      ['reconnecting to RabbitMQ', 'b:5672', null],
      ['cannot reach this RabbitMQ node; trying the next one', 'b:5672', null],
      ['reconnecting to RabbitMQ', 'c:5672', null],
      ['reconnected to RabbitMQ', 'c:5672', null],
    ]);
    for (const line of [lines[3], lines[5]]) expect(line).toMatchObject({ attemptMs: expect.any(Number) as unknown });
    expect(lines[5]).toMatchObject({ totalMs: expect.any(Number) as unknown });
  });

  it('logs the cause when the connection closes after its owner already lost the session to a closed channel', async () => {
    const broker = new FakeBroker();
    const { lines, logger } = capturedLog();
    const connection = layer(broker, { logger });
    const session = await connection.start();
    // amqplib's order: the channels close first (the owner loses the session), then the connection with its error.
    session?.link.lose('change-event publishing channel closed');
    broker.connections[0]?.drop(new Error('Unexpected close'));
    await settle();
    expect(
      lines
        .filter((l) => String(l['msg']).includes('closed') || String(l['msg']).startsWith('lost'))
        .map((l) => [l['msg'], l['reason']]),
    ).toEqual([
      ['lost the broker connection; reconnecting', 'change-event publishing channel closed'],
      ['the broker connection closed', 'connection closed: Unexpected close'],
    ]);
  });

  it('skips a dead node within the round, still without waiting', async () => {
    const broker = new FakeBroker();
    const connection = layer(broker);
    await connection.start();
    broker.down.add('b');
    broker.live()?.drop();
    await settle();
    expect(broker.events.slice(3)).toEqual(['attempt b', 'attempt c', 'setup c:5672']);
    expect(connection.current?.node).toBe('c:5672');
  });

  it('waits only after a whole round failed, with jittered backoff capped at maxMs', async () => {
    const broker = new FakeBroker();
    broker.down.add('a').add('b').add('c');
    const connection = layer(broker);
    const started = connection.start();
    await settle();
    broker.down.clear();
    expect(await started).toMatchObject({ node: expect.any(String) as string });
    const waits = broker.events.filter((e) => e.startsWith('wait'));
    const attempts = broker.events.map((e) => e.split(' ')[0]);
    // Three attempts (a whole round) before every wait.
    const firstWait = attempts.indexOf('wait');
    expect(attempts.slice(0, firstWait)).toEqual(['attempt', 'attempt', 'attempt']);
    expect(attempts.slice(firstWait + 1, firstWait + 4)).toEqual(['attempt', 'attempt', 'attempt']);
    // random 0.999: 0.999 · min(1000, 100 · 2^(round-1)), never below baseMs.
    expect(waits.slice(0, 5)).toEqual(['wait 100', 'wait 199', 'wait 399', 'wait 799', 'wait 999']);
  });

  it('a failing setup fails the attempt at that node, and its connection is closed', async () => {
    const broker = new FakeBroker();
    const connection = layer(broker, {
      setup: async (link) => {
        await Promise.resolve();
        if (link.address.label === 'a:5672') throw new Error("404 NOT_FOUND - home node of queue 'dead' is down");
        return { node: link.address.label, link };
      },
    });
    expect((await connection.start())?.node).toBe('b:5672');
    expect(broker.connections.map((c) => [c.node, c.closed])).toEqual([
      ['a', true],
      ['b', false],
    ]);
  });

  it('a setup that hangs is given up after attemptTimeoutMs, and the next node is tried', async () => {
    const broker = new FakeBroker();
    const connection = layer(broker, {
      attemptTimeoutMs: 50,
      setup: async (link) => {
        if (link.address.label === 'a:5672') await new Promise(() => undefined);
        return { node: link.address.label, link };
      },
    });
    expect((await connection.start())?.node).toBe('b:5672');
    expect(broker.connections[0]?.closed).toBe(true);
  });

  it('a connection lost during its setup fails that attempt', async () => {
    const broker = new FakeBroker();
    const connection = layer(broker, {
      setup: async (link) => {
        await Promise.resolve();
        if (link.address.label === 'a:5672') link.lose('a channel closed');
        return { node: link.address.label, link };
      },
    });
    expect((await connection.start())?.node).toBe('b:5672');
    expect(broker.events).not.toContain('retire a:5672: a channel closed');
  });

  it('the owner can drop a live session (a channel it needs closed): retired once, reconnected', async () => {
    const broker = new FakeBroker();
    const connection = layer(broker);
    const session = await connection.start();
    session?.link.lose('consumer cancelled');
    session?.link.lose('consumer cancelled again');
    await settle();
    expect(broker.events.filter((e) => e.startsWith('retire'))).toEqual(['retire a:5672: consumer cancelled']);
    expect(broker.connections[0]?.closed).toBe(true);
    expect(connection.current?.node).toBe('b:5672');
  });

  it('closes the old connection only once its retirement settled', async () => {
    const broker = new FakeBroker();
    let finish: () => void = () => undefined;
    const retired = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const connection = layer(broker, { retire: async () => retired });
    await connection.start();
    const first = broker.connections[0];
    first?.emit('close');
    await settle();
    expect(connection.current?.node).toBe('b:5672');
    // `emit` alone does not mark the fake closed: the layer has not closed it yet.
    expect(first?.closed).toBe(false);
    finish();
    await settle();
    expect(first?.closed).toBe(true);
  });

  it('a failed attempt does not wait for its connection to close: the next node is tried at once', async () => {
    const broker = new FakeBroker();
    const connection = layer(broker, {
      setup: async (link) => {
        await Promise.resolve();
        if (link.address.label === 'a:5672') {
          // A node gone silent: amqplib's close would wait for a CloseOk that never comes.
          (link.connection as unknown as FakeConnection).close = async () => new Promise<void>(() => undefined);
          throw new Error('declaring timed out');
        }
        return { node: link.address.label, link };
      },
    });
    expect((await connection.start())?.node).toBe('b:5672');
  });

  it('an observer that throws on a loss does not stop the reconnecting', async () => {
    const broker = new FakeBroker();
    const connection = layer(broker, {
      observer: {
        lost: () => {
          throw new Error('metrics broke');
        },
      },
    });
    await connection.start();
    broker.live()?.drop();
    await settle();
    expect(connection.current?.node).toBe('b:5672');
  });
});
