import { EventEmitter } from 'node:events';
import type { ChannelModel } from 'amqplib';
import { afterEach, describe, expect, it } from 'vitest';
import { BrokerQueueProbe } from '../../src/observability/broker-queue-probe.js';

const SETTINGS = {
  url: 'amqp://a:5672',
  heartbeatSeconds: 10,
  connectTimeoutMs: 1_000,
  reconnectBaseMs: 10,
  reconnectMaxMs: 20,
};

/** A broker with one queue of 4 ready messages and 2 consumers; any other name closes the channel, as RabbitMQ's 404 does. */
function fakeBroker() {
  const log: string[] = [];
  const connect = async (url: string, options: { connectionName?: string }): Promise<ChannelModel> => {
    await Promise.resolve();
    log.push(`connect ${new URL(url).host} as ${options.connectionName?.split(' ').slice(0, 2).join(' ') ?? ''}`);
    const connection = Object.assign(new EventEmitter(), {
      createChannel: async () => {
        await Promise.resolve();
        log.push('channel');
        const channel = Object.assign(new EventEmitter(), {
          checkQueue: async (queue: string) => {
            await Promise.resolve();
            if (queue === 'there') return { queue, messageCount: 4, consumerCount: 2 };
            channel.emit('error', new Error(`NOT_FOUND - no queue '${queue}'`));
            channel.emit('close');
            throw new Error(
              `Operation failed: QueueDeclare; 404 (NOT-FOUND) with message "NOT_FOUND - no queue '${queue}'"`,
            );
          },
        });
        return channel;
      },
      close: async () => {
        await Promise.resolve();
        log.push('close');
      },
    });
    return connection as unknown as ChannelModel;
  };
  return { log, connect };
}

const probes: BrokerQueueProbe[] = [];
afterEach(async () => {
  await Promise.all(probes.splice(0).map(async (p) => p.close()));
});

describe('broker queue probe', () => {
  it('counts on a connection of its own, opened at the first count, on one channel', async () => {
    const broker = fakeBroker();
    const probe = new BrokerQueueProbe(SETTINGS, { connect: broker.connect });
    probes.push(probe);
    expect(broker.log).toEqual([]);
    expect(await probe.check('there')).toEqual({ messageCount: 4, consumerCount: 2 });
    expect(await probe.check('there')).toEqual({ messageCount: 4, consumerCount: 2 });
    expect(broker.log).toEqual(['connect a:5672 as matrix-push-worker queue-depth', 'channel']);
  });

  it('rejects for a queue that is not there, and opens a new channel for the next count', async () => {
    const broker = fakeBroker();
    const probe = new BrokerQueueProbe(SETTINGS, { connect: broker.connect });
    probes.push(probe);
    await expect(probe.check('missing')).rejects.toThrow(/NOT-FOUND/);
    expect(await probe.check('there')).toEqual({ messageCount: 4, consumerCount: 2 });
    expect(broker.log.filter((l) => l === 'channel')).toHaveLength(2);
  });

  it('rejects once closed, and closes its connection', async () => {
    const broker = fakeBroker();
    const probe = new BrokerQueueProbe(SETTINGS, { connect: broker.connect });
    await probe.check('there');
    await probe.close();
    expect(broker.log.at(-1)).toBe('close');
    await expect(probe.check('there')).rejects.toThrow(/closed/);
  });
});
