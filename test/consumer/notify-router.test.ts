import { afterEach, describe, expect, it } from 'vitest';
import type { NotifyRequestBody } from '../../src/contract/ops.js';
import { NotifyRouter, RouterStoppedError, type PartSink } from '../../src/consumer/notify-router.js';
import { partitionOf } from '../../src/delivery/partitions.js';
import { createLogger } from '../../src/logging/logger.js';
import type { AcceptedNotify } from '../../src/store/delivery-store.js';

const PARTITIONS = 4;

/** A user in the given partition. */
function aUserIn(partition: number): string {
  for (let n = 0; ; n += 1) {
    const user = `@user${String(n)}:example.org`;
    if (partitionOf(user, PARTITIONS) === partition) return user;
  }
}

const aNotify = (event: string, users: readonly string[]): NotifyRequestBody => ({
  op: 'notify',
  notification: { event_id: event, room_id: '!r:example.org' },
  recipients: users.map((user_id) => ({ user_id })),
});

const stops: AbortController[] = [];
afterEach(() => {
  for (const stop of stops.splice(0)) stop.abort();
});

/** A router whose sink refuses every part of the `down` partitions (a queue without quorum, say) and records the rest. */
function aRouter(
  options: { down?: ReadonlySet<number>; records?: (ids: readonly string[]) => readonly AcceptedNotify[] } = {},
) {
  const published: { partition: number; id: string }[] = [];
  const stop = new AbortController();
  stops.push(stop);
  const sink: PartSink = {
    publish: async (queue, _body, id) => {
      const partition = Number(queue);
      if (options.down?.has(partition) === true) throw new Error('refused');
      published.push({ partition, id });
      return Promise.resolve();
    },
  };
  const router = new NotifyRouter({
    partitions: PARTITIONS,
    queueOf: String,
    sink,
    records: { findAcceptedMany: async (ids) => Promise.resolve(options.records?.(ids) ?? []) },
    backoff: { baseMs: 1, maxMs: 5 },
    replyWaitMs: 100,
    signal: stop.signal,
    logger: createLogger('silent'),
  });
  return { router, published, stop };
}

describe('the notify router', () => {
  it('routes messages of other partitions while one partition cannot take its part', async () => {
    const { router, published, stop } = aRouter({ down: new Set([1]) });
    const stuck = router.route(aNotify('$1', [aUserIn(1), aUserIn(2)]), 'm1', false);
    // Only partition 3: nothing ahead of it there.
    await router.route(aNotify('$2', [aUserIn(3)]), 'm2', false);
    // Partition 2's part of m2 waits for nothing either; m1 keeps retrying its partition-1 part.
    await router.route(aNotify('$3', [aUserIn(2)]), 'm3', false);
    expect(published.map((part) => part.id)).toEqual(['m1/p002', 'm2/p003', 'm3/p002']);
    stop.abort();
    await expect(stuck).rejects.toBeInstanceOf(RouterStoppedError);
  });

  it('keeps a partition in publish order: a later part waits for the one that cannot be published', async () => {
    const { router, published, stop } = aRouter({ down: new Set([1]) });
    const first = router.route(aNotify('$1', [aUserIn(1)]), 'm1', false);
    const second = router.route(aNotify('$2', [aUserIn(1)]), 'm2', false);
    await router.route(aNotify('$3', [aUserIn(0)]), 'm3', false);
    expect(published.map((part) => part.id)).toEqual(['m3/p000']);
    stop.abort();
    // Both go back to the queue, in order: the second was never published ahead of the first.
    await expect(first).rejects.toBeInstanceOf(RouterStoppedError);
    await expect(second).rejects.toBeInstanceOf(RouterStoppedError);
    expect(published.map((part) => part.id)).toEqual(['m3/p000']);
  });

  it('answers a reply with what was taken in, and how many parts are pending, once the wait is over', async () => {
    const record = (id: string): AcceptedNotify => ({ id, recipients: 1, devices: 2, acceptedAt: 0 });
    // Partition 2's part is never taken in (dead-lettered, or its partition stalled).
    const { router } = aRouter({ records: (ids) => ids.filter((id) => !id.endsWith('p002')).map(record) });
    expect(await router.route(aNotify('$1', [aUserIn(0), aUserIn(1), aUserIn(2)]), 'm1', true)).toEqual({
      recipients: 2,
      devices: 4,
      pending: 1,
    });
  });

  it('answers a reply at once when every part was taken in', async () => {
    const record = (id: string): AcceptedNotify => ({ id, recipients: 1, devices: 1, acceptedAt: 0 });
    const { router } = aRouter({ records: (ids) => ids.map(record) });
    expect(await router.route(aNotify('$1', [aUserIn(0), aUserIn(3)]), 'm1', true)).toEqual({
      recipients: 2,
      devices: 2,
      pending: 0,
    });
  });
});
