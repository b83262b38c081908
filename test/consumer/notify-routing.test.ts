import type { ConsumeMessage } from 'amqplib';
import { afterEach, describe, expect, it } from 'vitest';
import type { NotifyRequestBody } from '../../src/contract/ops.js';
import { notifyPartHandler } from '../../src/consumer/notify-part-handler.js';
import { notifyLimits, notifyQueue } from '../../src/consumer/notify-queue.js';
import { NotifyRouter } from '../../src/consumer/notify-router.js';
import { DeliveryJournal } from '../../src/delivery-service/delivery-journal.js';
import { NotifyIntake } from '../../src/delivery-service/notify-intake.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import type { PendingDelivery } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';
import { aStoredPusher } from '../support/notify-builders.js';

const SILENT = createLogger('silent');
const ROUTER_USER = 'pool';
const T0 = Date.parse('2026-11-28T12:00:00.250Z');
const HOUR = 3_600_000;
const PARTITIONS = 4;
const config = {
  amqp: { ...DEFAULT_CONFIG.amqp, trustedPublishers: ['homeserver'] },
  delivery: { ...DEFAULT_CONFIG.delivery, partitions: PARTITIONS },
};

/** A badge reset: the same bytes every time it is sent. */
const BADGE_RESET: NotifyRequestBody = {
  op: 'notify',
  notification: { room_id: '!room:example.org' },
  recipients: [{ user_id: '@alice:example.org', counts: { unread: 0 } }],
};

const aPusher = (userId: string): StoredPusher => aStoredPusher(userId);

/** What the homeserver set on the message besides the body. */
interface Published {
  readonly timestamp?: number;
  readonly correlationId?: string;
  /** When the router takes it (its clock). */
  readonly routedAt: number;
  /** When the part is taken in (the intake's clock); `routedAt` unless given. */
  readonly takenInAt?: number;
}

const journals: DeliveryJournal[] = [];
afterEach(() => {
  for (const journal of journals.splice(0)) journal.close();
});

/**
 * The delivery queue's consumer, the router, the partition queues (a list),
 * the part handler, the intake and the journal on an in-memory store; what
 * the intake hands the scheduler is kept in `held`.
 */
function aPool() {
  const store = new InMemoryDeliveryStore();
  const clock = { now: T0 };
  // Secures every part at its first pass: nothing here is ever sent.
  const journal = new DeliveryJournal({
    store,
    writable: () => true,
    persistAfterMs: 0,
    logger: SILENT,
    now: () => clock.now + 1,
  });
  journal.start();
  journals.push(journal);
  const held: PendingDelivery[] = [];
  const stop = new AbortController();
  const intake = new NotifyIntake({
    store,
    journal,
    pushers: {
      listPushers: async (userId) => Promise.resolve([aPusher(userId)]),
      listPushersOfUsers: async (userIds) => Promise.resolve(new Map(userIds.map((u) => [u, [aPusher(u)]]))),
    },
    holder: { hold: (deliveries) => void held.push(...deliveries) },
    gate: { takesIn: () => true },
    backoff: { baseMs: 1, maxMs: 2 },
    signal: stop.signal,
    logger: SILENT,
    now: () => clock.now,
  });
  for (let partition = 0; partition < PARTITIONS; partition += 1) intake.open(partition, 0);
  const handle = notifyPartHandler({
    intake,
    limits: notifyLimits(config.delivery, DEFAULT_CONFIG.limits.maxJsonDepth),
    publishers: new Set([ROUTER_USER]),
    logger: SILENT,
  });
  const parts: { partition: number; message: ConsumeMessage }[] = [];
  const router = new NotifyRouter({
    partitions: PARTITIONS,
    queueOf: (partition) => `parts.${String(partition)}`,
    sink: {
      publish: async (queue, body, messageId, publishedAt?: number) => {
        const properties = { userId: ROUTER_USER, messageId, timestamp: publishedAt };
        const message = { content: Buffer.from(JSON.stringify(body)), properties } as unknown as ConsumeMessage;
        parts.push({ partition: Number(queue.split('.')[1]), message });
        return Promise.resolve();
      },
    },
    records: store,
    backoff: { baseMs: 1, maxMs: 2 },
    replyWaitMs: 1_000,
    signal: stop.signal,
    logger: SILENT,
  });
  const queue = notifyQueue({
    ...config,
    maxJsonDepth: DEFAULT_CONFIG.limits.maxJsonDepth,
    router,
    now: () => clock.now,
  });
  return {
    held,
    parts,
    /** The homeserver publishes the body; the router routes it, and each part is taken in. */
    async publish(body: NotifyRequestBody, published: Published): Promise<void> {
      clock.now = published.routedAt;
      const before = parts.length;
      const outcome = await queue.serve(Buffer.from(JSON.stringify(body)), {
        messageId: undefined,
        deadline: undefined,
        ...(published.timestamp === undefined ? {} : { publishedAt: published.timestamp }),
        ...(published.correlationId === undefined ? {} : { correlationId: published.correlationId }),
      });
      expect(outcome.reply.ok).toBe(true);
      clock.now = published.takenInAt ?? published.routedAt;
      for (const { partition, message } of parts.slice(before)) expect(await handle(partition, message)).toBe('ack');
    },
    /** A part taken in again (a worker crashed before acknowledging it), at `at`. */
    async takeInAgain(index: number, at: number): Promise<void> {
      clock.now = at;
      const part = parts[index];
      if (part === undefined) throw new Error(`no part ${String(index)}`);
      expect(await handle(part.partition, part.message)).toBe('ack');
    },
  };
}

describe('a notify without a messageId', () => {
  it.each([
    { case: 'timestamps an hour apart', first: { timestamp: T0 }, second: { timestamp: T0 + HOUR } },
    { case: 'correlation IDs that differ', first: { correlationId: 'c1' }, second: { correlationId: 'c2' } },
    { case: 'neither, routed an hour apart', first: {}, second: {} },
  ])('published again later is a new message ($case): both are scheduled', async ({ first, second }) => {
    const pool = aPool();
    await pool.publish(BADGE_RESET, { ...first, routedAt: T0 });
    await pool.publish(BADGE_RESET, { ...second, routedAt: T0 + HOUR });
    expect(pool.held).toHaveLength(2);
    expect(new Set(pool.held.map((delivery) => delivery.id)).size).toBe(2);
  });

  it.each([
    { case: 'the same timestamp', published: { timestamp: T0 } },
    { case: 'the same correlation ID', published: { correlationId: 'c1' } },
    { case: 'neither, within the window', published: {} },
  ])('redelivered to the router schedules nothing twice ($case)', async ({ published }) => {
    const pool = aPool();
    await pool.publish(BADGE_RESET, { ...published, routedAt: T0 });
    await pool.publish(BADGE_RESET, { ...published, routedAt: T0 + 1_000 });
    expect(pool.held).toHaveLength(1);
  });
});

describe('the maximum age of a notification', () => {
  it('counts from the publisher timestamp, not from when a partition took it in', async () => {
    const pool = aPool();
    await pool.publish(BADGE_RESET, { timestamp: T0, routedAt: T0 + 2 * HOUR, takenInAt: T0 + 3 * HOUR });
    expect(pool.held.map((delivery) => delivery.acceptedAt)).toEqual([T0]);
  });

  it('counts from when the router took it when the publisher set no timestamp', async () => {
    const pool = aPool();
    await pool.publish(BADGE_RESET, { routedAt: T0, takenInAt: T0 + HOUR });
    expect(pool.held.map((delivery) => delivery.acceptedAt)).toEqual([T0]);
  });

  it('reads a timestamp in seconds as the AMQP spec has it', async () => {
    const pool = aPool();
    await pool.publish(BADGE_RESET, { timestamp: Math.floor(T0 / 1000), routedAt: T0 + HOUR });
    expect(pool.held.map((delivery) => delivery.acceptedAt)).toEqual([Math.floor(T0 / 1000) * 1000]);
  });

  it('takes a publisher clock ahead of the pool as now', async () => {
    const pool = aPool();
    await pool.publish(BADGE_RESET, { timestamp: T0 + HOUR, routedAt: T0 });
    expect(pool.held.map((delivery) => delivery.acceptedAt)).toEqual([T0]);
  });

  it('keeps its clock when a part is taken in again after a crash', async () => {
    const pool = aPool();
    await pool.publish(BADGE_RESET, { timestamp: T0, routedAt: T0 });
    // A fresh pool's intake (the crashed worker's memory is gone) takes the same part in an hour later.
    const next = aPool();
    next.parts.push(...pool.parts);
    await next.takeInAgain(0, T0 + HOUR);
    expect(next.held.map((delivery) => delivery.acceptedAt)).toEqual([T0]);
  });
});
