import { describe, expect, it } from 'vitest';
import { CachedPusherLookup, estimateBytes } from '../../src/delivery-service/cached-pusher-lookup.js';
import type { PusherLookup } from '../../src/delivery-service/pusher-lookup.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';

const pusherOf = (userId: string, pushkey = `${userId}-phone`): StoredPusher => ({
  user_id: userId,
  kind: 'http',
  app_id: 'org.example.app',
  pushkey,
  app_display_name: 'App',
  device_display_name: 'Phone',
  lang: 'en',
  data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
  enabled: true,
});

/** What the store holds: @a and @b have a pusher each, @c has two, @none has none. */
const STORED: Readonly<Record<string, readonly StoredPusher[]>> = {
  '@a': [pusherOf('@a')],
  '@b': [pusherOf('@b')],
  '@c': [pusherOf('@c', 'c1'), pusherOf('@c', 'c2')],
  '@none': [],
};

/** An inner lookup over `STORED` (or `stored`) that records which users each call read. */
function fakeStore(stored: Record<string, readonly StoredPusher[]> = { ...STORED }) {
  const reads: string[][] = [];
  const inner: PusherLookup = {
    listPushers: async (userId) => {
      reads.push([userId]);
      return Promise.resolve(stored[userId] ?? []);
    },
    listPushersOfUsers: async (userIds) => {
      reads.push([...userIds]);
      return Promise.resolve(new Map(userIds.map((u) => [u, stored[u] ?? []])));
    },
  };
  return { inner, reads, stored };
}

const big = { maxBytes: 1 << 20, maxEntries: 1000, maxStalenessMs: 60_000 };

describe('CachedPusherLookup', () => {
  it.each<[string, string[][], string[][]]>([
    [
      'a fan-out to known users reads nothing',
      [
        ['@a', '@b'],
        ['@a', '@b'],
      ],
      [['@a', '@b']],
    ],
    ['users without pushers are kept too', [['@none'], ['@none', '@a'], ['@a']], [['@none'], ['@a']]],
    ['only the users not known are read', [['@a'], ['@a', '@b', '@c'], ['@c', '@b']], [['@a'], ['@b', '@c']]],
    ['a user named twice is read once', [['@a', '@a', '@b']], [['@a', '@b']]],
  ])('%s', async (_case, fanOuts, expectedReads) => {
    const { inner, reads } = fakeStore();
    const cache = new CachedPusherLookup(inner, big);
    for (const users of fanOuts) {
      const got = await cache.listPushersOfUsers(users);
      expect([...got.keys()]).toEqual([...new Set(users)]);
      for (const user of users) expect(got.get(user)).toEqual(STORED[user]);
    }
    expect(reads).toEqual(expectedReads);
  });

  it.each<[string, (cache: CachedPusherLookup) => Promise<unknown>, number, number]>([
    ['one user after a fan-out: a hit', async (cache) => cache.listPushers('@a'), 1, 2],
    ['one user not in the fan-out: a miss', async (cache) => cache.listPushers('@c'), 0, 3],
    ['the fan-out again: all hits', async (cache) => cache.listPushersOfUsers(['@a', '@none']), 2, 2],
  ])('counts %s', async (_case, then, hits, misses) => {
    const { inner } = fakeStore();
    const cache = new CachedPusherLookup(inner, big);
    await cache.listPushersOfUsers(['@a', '@none']);
    await then(cache);
    expect(cache.stats).toMatchObject({ hits, misses });
    expect(cache.stats.size).toBe(hits === 0 ? 3 : 2);
    expect(cache.stats.bytes).toBe(
      estimateBytes('@a', STORED['@a'] ?? []) +
        estimateBytes('@none', []) +
        (hits === 0 ? estimateBytes('@c', STORED['@c'] ?? []) : 0),
    );
  });

  it.each<[string, (cache: CachedPusherLookup) => void, string[][]]>([
    [
      'pushersChanged drops that user only',
      (cache) => {
        cache.pushersChanged('@a');
      },
      [['@a', '@b'], ['@a']],
    ],
    [
      'pushersChanged of a user not kept changes nothing',
      (cache) => {
        cache.pushersChanged('@c');
      },
      [['@a', '@b']],
    ],
    [
      'clear drops everyone',
      (cache) => {
        cache.clear();
      },
      [
        ['@a', '@b'],
        ['@a', '@b'],
      ],
    ],
  ])('%s', async (_case, change, expectedReads) => {
    const { inner, reads, stored } = fakeStore();
    const cache = new CachedPusherLookup(inner, big);
    await cache.listPushersOfUsers(['@a', '@b']);
    stored['@a'] = [pusherOf('@a', 'new')];
    change(cache);
    const got = await cache.listPushersOfUsers(['@a', '@b']);
    expect(reads).toEqual(expectedReads);
    // Read again after a change: what the store holds now.
    if (reads.length > 1) expect(got.get('@a')).toEqual([pusherOf('@a', 'new')]);
  });

  it.each<[string, { maxBytes: number; maxEntries: number }, string[]]>([
    ['by entries: the least recently used goes', { maxBytes: 1 << 20, maxEntries: 2 }, ['@a']],
    [
      'by bytes: the least recently used goes',
      {
        maxBytes: estimateBytes('@a', STORED['@a'] ?? []) + estimateBytes('@c', STORED['@c'] ?? []) + 10,
        maxEntries: 100,
      },
      ['@a'],
    ],
    ['a list larger than the whole budget is not kept', { maxBytes: 100, maxEntries: 100 }, []],
  ])('evicts %s', async (_case, options, stillKept) => {
    const { inner, reads } = fakeStore();
    const cache = new CachedPusherLookup(inner, { ...big, ...options });
    await cache.listPushersOfUsers(['@a', '@b']);
    // @a used again, so @b is now the least recently used.
    await cache.listPushers('@a');
    await cache.listPushersOfUsers(['@c']);
    expect(cache.stats.size).toBeLessThanOrEqual(options.maxEntries);
    expect(cache.stats.bytes).toBeLessThanOrEqual(options.maxBytes);
    reads.length = 0;
    await cache.listPushersOfUsers(['@a', '@b']);
    const readAgain = reads.flat();
    expect(['@a', '@b'].filter((u) => !readAgain.includes(u))).toEqual(stillKept);
  });

  describe('a change that comes while a read of its user is under way', () => {
    /** An inner lookup whose reads wait until released, answering what the store held when they started. */
    function slowStore() {
      const stored: Record<string, readonly StoredPusher[]> = { '@a': [pusherOf('@a', 'old')], '@b': [] };
      const waiting: (() => void)[] = [];
      let reads = 0;
      const answer = async <T>(value: T): Promise<T> =>
        new Promise((resolve) => {
          waiting.push(() => {
            resolve(value);
          });
        });
      const inner: PusherLookup = {
        listPushers: async (userId) => {
          reads += 1;
          return answer(stored[userId] ?? []);
        },
        listPushersOfUsers: async (userIds) => {
          reads += 1;
          return answer(new Map(userIds.map((u) => [u, stored[u] ?? []])));
        },
      };
      return {
        inner,
        stored,
        release: () => {
          for (const go of waiting.splice(0)) go();
        },
        reads: () => reads,
      };
    }

    it.each<[string, (cache: CachedPusherLookup) => Promise<unknown>, (cache: CachedPusherLookup) => void, boolean]>([
      [
        'pushersChanged of that user during a fan-out',
        async (c) => c.listPushersOfUsers(['@a', '@b']),
        (c) => {
          c.pushersChanged('@a');
        },
        true,
      ],
      [
        'pushersChanged of that user during a single read',
        async (c) => c.listPushers('@a'),
        (c) => {
          c.pushersChanged('@a');
        },
        true,
      ],
      [
        'clear during a fan-out',
        async (c) => c.listPushersOfUsers(['@a', '@b']),
        (c) => {
          c.clear();
        },
        true,
      ],
      [
        'pushersChanged of another user',
        async (c) => c.listPushersOfUsers(['@a', '@b']),
        (c) => {
          c.pushersChanged('@z');
        },
        false,
      ],
    ])(
      '%s: the stale read is answered but kept only when no change of its user came',
      async (_c, read, change, stale) => {
        const store = slowStore();
        const cache = new CachedPusherLookup(store.inner, big);
        const underWay = read(cache);
        // The change lands in the store, and its event arrives, before the read answers.
        store.stored['@a'] = [pusherOf('@a', 'new')];
        change(cache);
        store.release();
        await underWay;
        const next = cache.listPushers('@a');
        store.release();
        const pushkeys = (await next).map((p) => p.pushkey);
        expect(pushkeys).toEqual(stale ? ['new'] : ['old']);
        expect(store.reads()).toBe(stale ? 2 : 1);
      },
    );

    it('a read that started after the change is kept', async () => {
      const store = slowStore();
      const cache = new CachedPusherLookup(store.inner, big);
      cache.pushersChanged('@a');
      const first = cache.listPushers('@a');
      store.release();
      await first;
      expect(await cache.listPushers('@a')).toEqual([pusherOf('@a', 'old')]);
      expect(store.reads()).toBe(1);
    });
  });

  describe('an age bound: what no event announced is read again after maxStalenessMs', () => {
    /** A cache on a clock the test moves, with @a's pushers changed in the store behind its back (no event). */
    function aCacheOnAClock(maxStalenessMs = 60_000) {
      const clock = { now: 1_000_000 };
      const store = fakeStore();
      const cache = new CachedPusherLookup(store.inner, { ...big, maxStalenessMs, now: () => clock.now });
      const changeWithoutEvent = () => {
        store.stored['@a'] = [pusherOf('@a', 'new')];
      };
      return { clock, cache, store, changeWithoutEvent };
    }
    const pushkeysOf = (list: readonly StoredPusher[] | undefined) => (list ?? []).map((p) => p.pushkey);

    it.each<[string, (cache: CachedPusherLookup) => Promise<readonly StoredPusher[] | undefined>]>([
      ['a single read (the recheck before a send)', async (c) => c.listPushers('@a')],
      ['a fan-out (intake)', async (c) => (await c.listPushersOfUsers(['@a', '@b'])).get('@a')],
    ])('%s: served from memory up to the bound, read again past it', async (_case, read) => {
      const { clock, cache, store, changeWithoutEvent } = aCacheOnAClock();
      await read(cache);
      changeWithoutEvent();
      clock.now += 60_000;
      expect(pushkeysOf(await read(cache))).toEqual(['@a-phone']);
      clock.now += 1;
      expect(pushkeysOf(await read(cache))).toEqual(['new']);
      // Kept again, and its age counts afresh.
      const reads = store.reads.length;
      expect(pushkeysOf(await read(cache))).toEqual(['new']);
      expect(store.reads).toHaveLength(reads);
    });

    it('counts the age from when the read started, not from when it answered', async () => {
      const clock = { now: 0 };
      const stored: Record<string, readonly StoredPusher[]> = { '@a': [pusherOf('@a', 'old')] };
      let reads = 0;
      const inner: PusherLookup = {
        listPushers: async (userId) => {
          reads += 1;
          const answer = stored[userId] ?? [];
          // The store takes 40 s to answer (what it answers is as of the start).
          clock.now += 40_000;
          return Promise.resolve(answer);
        },
        listPushersOfUsers: async () => Promise.reject(new Error('not used')),
      };
      const cache = new CachedPusherLookup(inner, { ...big, maxStalenessMs: 60_000, now: () => clock.now });
      await cache.listPushers('@a');
      stored['@a'] = [pusherOf('@a', 'new')];
      clock.now += 20_001;
      expect(pushkeysOf(await cache.listPushers('@a'))).toEqual(['new']);
      expect(reads).toBe(2);
    });

    it('a bound of 0 serves nothing read before this millisecond', async () => {
      const { clock, cache, store } = aCacheOnAClock(0);
      await cache.listPushers('@a');
      await cache.listPushers('@a');
      expect(store.reads).toHaveLength(1);
      clock.now += 1;
      await cache.listPushers('@a');
      expect(store.reads).toHaveLength(2);
    });

    it('a stale entry leaves the byte count with it', async () => {
      const { clock, cache } = aCacheOnAClock();
      await cache.listPushersOfUsers(['@a', '@b']);
      clock.now += 60_001;
      await cache.listPushers('@a');
      // @b is still counted until it is looked up or evicted; @a was replaced by its new read.
      expect(cache.stats.bytes).toBe(estimateBytes('@a', STORED['@a'] ?? []) + estimateBytes('@b', STORED['@b'] ?? []));
      expect(cache.stats.size).toBe(2);
    });
  });
});
