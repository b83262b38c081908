import { describe, expect, it } from 'vitest';
import { CachedPusherLookup } from '../../src/delivery-service/cached-pusher-lookup.js';
import type { PusherLookup } from '../../src/delivery-service/pusher-lookup.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import { aStoredPusher } from '../support/notify-builders.js';

/**
 * A lookup that would serve a kept list first waits until the change
 * events queued for the worker are applied (`changesApplied`): a `notify`
 * sent after a pusher write's reply may reach delivery before that write's
 * event, and must not go to a phone the write took away.
 */
const ALICE = '@alice:example.org';
const phone = (pushkey: string): StoredPusher => aStoredPusher(ALICE, { pushkey });

type Lookup = (cache: CachedPusherLookup) => Promise<readonly StoredPusher[]>;
const LOOKUPS: readonly [string, Lookup][] = [
  ['listPushers', async (cache) => cache.listPushers(ALICE)],
  ['listPushersOfUsers', async (cache) => (await cache.listPushersOfUsers([ALICE])).get(ALICE) ?? []],
];

/**
 * Alice's list kept with the old phone; then another thread's write gives
 * her a new one, which the cache hears of only through `changesApplied`'s
 * events (`then`).
 */
async function aCacheBehindAWrite(then: (cache: CachedPusherLookup) => Promise<void>) {
  const stored = new Map<string, readonly StoredPusher[]>([[ALICE, [phone('old-phone')]]]);
  const reads = { count: 0 };
  const inner: PusherLookup = {
    listPushers: async (userId) => {
      reads.count += 1;
      return Promise.resolve(stored.get(userId) ?? []);
    },
    listPushersOfUsers: async (userIds) => {
      reads.count += 1;
      return Promise.resolve(new Map(userIds.map((u) => [u, stored.get(u) ?? []])));
    },
  };
  const waited = { count: 0 };
  const cache: CachedPusherLookup = new CachedPusherLookup(inner, {
    maxBytes: 1 << 20,
    maxEntries: 100,
    maxStalenessMs: 60_000,
    changesApplied: async () => {
      waited.count += 1;
      await then(cache);
    },
  });
  await cache.listPushers(ALICE);
  stored.set(ALICE, [phone('new-phone')]);
  return { cache, reads, waited };
}

const pushkeys = (pushers: readonly StoredPusher[]) => pushers.map((p) => p.pushkey);

describe.each(LOOKUPS)('CachedPusherLookup.%s of a kept user', (_, lookup) => {
  it("waits for the queued change events: the write's event drops the list, and the store answers", async () => {
    const { cache, reads, waited } = await aCacheBehindAWrite(async (c) => {
      c.pushersChanged(ALICE);
      return Promise.resolve();
    });
    expect(pushkeys(await lookup(cache))).toEqual(['new-phone']);
    expect({ waited: waited.count, reads: reads.count }).toEqual({ waited: 1, reads: 2 });
  });

  it('serves the kept list once they are applied, when none named the user', async () => {
    const { cache, reads, waited } = await aCacheBehindAWrite(async () => Promise.resolve());
    expect(pushkeys(await lookup(cache))).toEqual(['old-phone']);
    expect({ waited: waited.count, reads: reads.count }).toEqual({ waited: 1, reads: 1 });
  });

  it('reads the store when they cannot be waited for (the subscription ended)', async () => {
    const { cache, reads } = await aCacheBehindAWrite(async () => Promise.reject(new Error('subscription closed')));
    expect(pushkeys(await lookup(cache))).toEqual(['new-phone']);
    expect(reads.count).toBe(2);
  });
});

describe('CachedPusherLookup of users not kept', () => {
  it('does not wait: the store answers', async () => {
    const { cache, waited } = await aCacheBehindAWrite(async () => Promise.resolve());
    expect(await cache.listPushersOfUsers(['@bob:example.org'])).toEqual(new Map([['@bob:example.org', []]]));
    expect(await cache.listPushers('@carol:example.org')).toEqual([]);
    expect(waited.count).toBe(0);
  });
});
