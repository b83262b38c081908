import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import type { ChannelModel } from 'amqplib';
import { connectAmqp } from '../../src/amqp/amqp-connect.js';

/** The heartbeat the connection tuned to: what amqplib sent in tune-ok and the broker enforces. */
function negotiated(model: ChannelModel): number {
  return (model.connection as unknown as { heartbeat: number }).heartbeat;
}

describe('the configured heartbeat', () => {
  it.each([
    [7, 7],
    [10, 10],
    [0, 0],
  ])('asked for %i s, the connection runs with %i s', async (asked, expected) => {
    const model = await connectAmqp(inject('amqpUrl'), { heartbeatSeconds: asked });
    try {
      expect(negotiated(model)).toBe(expected);
    } finally {
      await model.close();
    }
  });

  it("without a setting, the broker's suggestion applies (RabbitMQ: 60 s)", async () => {
    const model = await connectAmqp(inject('amqpUrl'));
    try {
      expect(negotiated(model)).toBe(60);
    } finally {
      await model.close();
    }
  });
});
