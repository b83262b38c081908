import { describe, expect, it } from 'vitest';
import { BrokerUnavailableError } from '../../src/amqp/broker-connection.js';
import { layer, settle, useBrokerConnectionWorld } from '../support/broker-connection-world.js';
import { FakeBroker } from '../support/fake-broker.js';

// Connecting, losing the connection and reconnecting are in broker-connection.test.ts.

useBrokerConnectionWorld();

describe('BrokerConnection', () => {
  describe('session()', () => {
    it('waits for the attempt under way', async () => {
      const broker = new FakeBroker();
      const connection = layer(broker);
      expect((await connection.session()).node).toBe('a:5672');
    });

    it('rejects when the whole round fails, and at once between rounds', async () => {
      const broker = new FakeBroker();
      broker.down.add('a').add('b').add('c');
      let release: () => void = () => undefined;
      const connection = layer(broker, {
        wait: async () => {
          await new Promise<void>((resolve) => {
            release = resolve;
          });
        },
      });
      await expect(connection.session()).rejects.toThrow(
        new BrokerUnavailableError('cannot reach the broker: connect ECONNREFUSED c'),
      );
      // Waiting out the backoff now: no attempt is under way, so no waiting for one.
      await expect(connection.session()).rejects.toThrow('cannot reach the broker');
      broker.down.clear();
      release();
      await settle();
      expect((await connection.session()).node).toBe('a:5672');
    });
  });

  describe('close()', () => {
    it('runs beforeDisconnect with the live session, closes the connection, reconnects no more; idempotent', async () => {
      const broker = new FakeBroker();
      const closed: string[] = [];
      const connection = layer(broker, {
        observer: {
          closed: () => {
            closed.push('closed');
          },
        },
      });
      await connection.start();
      const drained: string[] = [];
      await Promise.all([
        connection.close((s) => void drained.push(s.node)),
        connection.close((s) => void drained.push(`second ${s.node}`)),
      ]);
      expect(drained).toEqual(['a:5672']);
      expect(broker.connections[0]?.closed).toBe(true);
      expect(closed).toEqual(['closed']);
      await settle();
      expect(broker.events.filter((e) => e.startsWith('attempt'))).toEqual(['attempt a']);
      await expect(connection.session()).rejects.toThrow('the broker connection is closed');
    });

    it('does not wait for an attempt that hangs; if that attempt succeeds after all, its connection is closed', async () => {
      const broker = new FakeBroker();
      let release: () => void = () => undefined;
      const connection = layer(broker, {
        setup: async (link) => {
          await new Promise<void>((resolve) => {
            release = resolve;
          });
          return { node: link.address.label, link };
        },
      });
      const started = connection.start();
      await settle();
      await connection.close();
      expect(await started).toBeUndefined();
      release();
      await settle();
      expect(broker.connections.map((c) => c.closed)).toEqual([true]);
      expect(connection.current).toBeUndefined();
    });

    it('while waiting between rounds: start() resolves undefined and nothing more is tried', async () => {
      const broker = new FakeBroker();
      broker.down.add('a').add('b').add('c');
      const connection = layer(broker, {
        wait: async (_ms, signal) => {
          await new Promise<void>((resolve) => {
            signal.addEventListener('abort', () => {
              resolve();
            });
          });
        },
      });
      const started = connection.start();
      await settle();
      await connection.close();
      expect(await started).toBeUndefined();
      expect(broker.events.filter((e) => e.startsWith('attempt'))).toHaveLength(3);
    });
  });
});
