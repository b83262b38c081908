import type { Channel } from 'amqplib';
import type { AckBatcher } from './ack-batcher.js';
import type { ConsumedQueue } from './consumed-queue.js';

/** One consumed queue on a channel of its own, with its own prefetch and acknowledgements. */
export interface Lane {
  readonly consumed: ConsumedQueue;
  readonly channel: Channel;
  readonly acks: AckBatcher;
  /** Set once the broker confirmed the consumer. */
  consumerTag?: string;
}
