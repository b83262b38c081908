import type { ChannelModel, ConsumeMessage } from 'amqplib';
import { describe, expect, it } from 'vitest';
import type { ChangeListener } from '../../src/consumer/change-listener.js';
import { ChangeSubscription } from '../../src/consumer/change-subscription.js';
import { createLogger } from '../../src/logging/logger.js';

const EVENTS = 'matrix.push.events';
const QUEUE = 'amq.gen-events';

interface Queued {
  readonly exchange: string;
  readonly routingKey: string;
  readonly content: Buffer;
  readonly properties: Record<string, unknown>;
}

/**
 * The worker's own event queue on a fake broker: what is published to it
 * (events by the test, markers by the subscription through the default
 * exchange) waits in order until the test delivers it.
 */
async function aSubscription() {
  const queued: Queued[] = [];
  const heard: string[] = [];
  const lost: string[] = [];
  const handlers = new Map<string, (...args: unknown[]) => void>();
  let consumer: ((message: ConsumeMessage | null) => void) | undefined;
  const channel = {
    on: (event: string, handler: (...args: unknown[]) => void) => handlers.set(event, handler),
    assertExchange: async () => Promise.resolve({}),
    assertQueue: async () => Promise.resolve({ queue: QUEUE, messageCount: 0, consumerCount: 0 }),
    bindQueue: async () => Promise.resolve({}),
    consume: async (_queue: string, onMessage: (message: ConsumeMessage | null) => void) => {
      consumer = onMessage;
      return Promise.resolve({ consumerTag: 'events' });
    },
    sendToQueue: (queue: string, content: Buffer, properties: Record<string, unknown>) => {
      expect(queue).toBe(QUEUE);
      queued.push({ exchange: '', routingKey: queue, content, properties });
      return true;
    },
    close: async () => Promise.resolve(),
  };
  const listener: ChangeListener = {
    pushRulesChanged: (userId) => heard.push(userId),
    pushersChanged: (userId) => heard.push(`pushers ${userId}`),
    subscriptionReset: () => heard.push('reset'),
  };
  const subscription = await ChangeSubscription.open(
    { createChannel: async () => Promise.resolve(channel) } as unknown as ChannelModel,
    { eventsExchange: EVENTS, listener, logger: createLogger('silent'), lost: (reason) => lost.push(reason) },
  );
  const deliver = (count = queued.length) => {
    for (const message of queued.splice(0, count)) {
      consumer?.({
        fields: message,
        properties: message.properties,
        content: message.content,
      } as unknown as ConsumeMessage);
    }
  };
  return {
    subscription,
    heard,
    lost,
    queued,
    deliver,
    /** Another worker's change event of `userId`, on the queue behind what is there. */
    announce: (userId: string) =>
      queued.push({
        exchange: EVENTS,
        routingKey: 'm.push_rules',
        content: Buffer.from(JSON.stringify({ type: 'm.push_rules', user_id: userId, version: 1 })),
        properties: {},
      }),
    emit: (event: string, ...args: unknown[]) => handlers.get(event)?.(...args),
    /** The broker cancels the consumer (its queue deleted, say). */
    cancel: () => consumer?.(null),
  };
}

/** Whether a promise has settled, after the turn in which markers are sent. */
async function state(promise: Promise<void>): Promise<'pending' | 'resolved' | 'rejected'> {
  let settled: 'pending' | 'resolved' | 'rejected' = 'pending';
  promise.then(
    () => (settled = 'resolved'),
    () => (settled = 'rejected'),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

describe('ChangeSubscription.changesApplied', () => {
  it('resolves only once every event queued before the call has been applied', async () => {
    const world = await aSubscription();
    world.announce('@a:example.org');
    world.announce('@b:example.org');
    const applied = world.subscription.changesApplied();
    expect(await state(applied)).toBe('pending');
    world.announce('@c:example.org');
    world.deliver(1);
    expect(await state(applied)).toBe('pending');
    // `@b`, then the marker: `@c` came after the call, so it is not waited for.
    world.deliver(2);
    expect(await state(applied)).toBe('resolved');
    expect(world.heard).toEqual(['reset', '@a:example.org', '@b:example.org']);
  });

  it('sends one marker for the calls of one turn; a call after it was sent waits for the next', async () => {
    const world = await aSubscription();
    const first = world.subscription.changesApplied();
    const second = world.subscription.changesApplied();
    expect(await state(first)).toBe('pending');
    expect(world.queued).toHaveLength(1);
    const third = world.subscription.changesApplied();
    expect(await state(third)).toBe('pending');
    expect(world.queued).toHaveLength(2);
    world.deliver(1);
    expect([await state(first), await state(second), await state(third)]).toEqual(['resolved', 'resolved', 'pending']);
    world.deliver();
    expect(await state(third)).toBe('resolved');
    // A marker is neither an event nor a message that resets the caches.
    expect(world.heard).toEqual(['reset']);
  });

  it.each<[string, (world: Awaited<ReturnType<typeof aSubscription>>) => void]>([
    [
      'the channel closes',
      (world) => {
        world.emit('close');
      },
    ],
    [
      'the broker cancels the consumer',
      (world) => {
        world.cancel();
      },
    ],
  ])('rejects what waits, and every later call, when %s: the caches reset, the session lost', async (_, end) => {
    const world = await aSubscription();
    const waiting = world.subscription.changesApplied();
    expect(await state(waiting)).toBe('pending');
    end(world);
    expect(await state(waiting)).toBe('rejected');
    expect(await state(world.subscription.changesApplied())).toBe('rejected');
    expect(world.heard).toEqual(['reset', 'reset']);
    expect(world.lost).toHaveLength(1);
  });

  it("takes a message that only looks like a marker (another subscription's) as an event it cannot read", async () => {
    const world = await aSubscription();
    const waiting = world.subscription.changesApplied();
    expect(await state(waiting)).toBe('pending');
    const marker = world.queued[0];
    if (marker === undefined) throw new Error('no marker sent');
    world.queued.unshift({
      ...marker,
      properties: { ...marker.properties, correlationId: 'another-subscription/1' },
    });
    world.deliver(1);
    expect(await state(waiting)).toBe('pending');
    // An event nobody can read may be about anyone: the caches are reset.
    expect(world.heard).toEqual(['reset', 'reset']);
    world.deliver();
    expect(await state(waiting)).toBe('resolved');
  });
});
