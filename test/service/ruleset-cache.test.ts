import { describe, expect, it } from 'vitest';
import {
  MAX_REMEMBERED_INVALIDATIONS,
  RulesetCache,
  type RulesetCacheOptions,
} from '../../src/service/ruleset-cache.js';

function aCache(overrides: Partial<RulesetCacheOptions> = {}) {
  const clock = { now: 1_000 };
  const cache = new RulesetCache<string>({
    maxEntries: 100,
    maxBytes: 10_000,
    maxStalenessMs: 1_000,
    now: () => clock.now,
    ...overrides,
  });
  /** Caches `value` for `user` as a load that started now. */
  const load = (user: string, value = `rules of ${user}`, bytes = 10) => cache.set(user, value, bytes, cache.ticket());
  return { cache, clock, load };
}

describe('RulesetCache', () => {
  it('serves what was loaded, and counts hits and misses', () => {
    const { cache, load } = aCache();
    expect(cache.get('@a:x')).toBeUndefined();
    load('@a:x');
    expect(cache.get('@a:x')).toBe('rules of @a:x');
    expect(cache.stats).toMatchObject({ hits: 1, misses: 1 });
  });

  it.each([
    [999, 'rules of @a:x'],
    [1_000, 'rules of @a:x'],
    [1_001, undefined],
  ])('data read %i ms ago is served: %s (maxStalenessMs 1000)', (age, expected) => {
    const { cache, clock, load } = aCache();
    load('@a:x');
    clock.now += age;
    expect(cache.get('@a:x')).toBe(expected);
    expect(cache.stats.staleRefreshes).toBe(expected === undefined ? 1 : 0);
  });

  it('measures age from when the load started, not from when it finished', () => {
    const { cache, clock } = aCache();
    const ticket = cache.ticket();
    clock.now += 800;
    cache.set('@a:x', 'slow load', 10, ticket);
    clock.now += 300;
    expect(cache.get('@a:x')).toBeUndefined();
  });

  it('drops a user on invalidation and leaves the others', () => {
    const { cache, load } = aCache();
    load('@a:x');
    load('@b:x');
    cache.invalidate('@a:x');
    expect(cache.get('@a:x')).toBeUndefined();
    expect(cache.get('@b:x')).toBe('rules of @b:x');
    expect(cache.stats.invalidations).toBe(1);
  });

  it('refuses a load that started before an invalidation of its user (it may hold the old rules)', () => {
    const { cache } = aCache();
    const racing = cache.ticket();
    cache.invalidate('@a:x');
    expect(cache.set('@a:x', 'old rules', 10, racing)).toBe(false);
    expect(cache.get('@a:x')).toBeUndefined();
    expect(cache.set('@b:x', 'other user', 10, racing)).toBe(true);
    expect(cache.set('@a:x', 'new rules', 10, cache.ticket())).toBe(true);
    expect(cache.get('@a:x')).toBe('new rules');
  });

  it('drops everything on clear, and refuses loads that started before it', () => {
    const { cache, load } = aCache();
    load('@a:x');
    load('@b:x');
    const racing = cache.ticket();
    cache.clear();
    expect([cache.get('@a:x'), cache.get('@b:x'), cache.size, cache.bytes]).toEqual([undefined, undefined, 0, 0]);
    expect(cache.set('@c:x', 'old', 10, racing)).toBe(false);
    expect(cache.set('@c:x', 'new', 10, cache.ticket())).toBe(true);
  });

  it('evicts the least recently used beyond maxEntries', () => {
    const { cache, load } = aCache({ maxEntries: 2 });
    load('@a:x');
    load('@b:x');
    cache.get('@a:x');
    load('@c:x');
    expect([cache.get('@a:x'), cache.get('@b:x'), cache.get('@c:x')]).toEqual([
      'rules of @a:x',
      undefined,
      'rules of @c:x',
    ]);
    expect(cache.stats.evictions).toBe(1);
  });

  it('spares an entry served since it was placed once (second chance), then evicts in placement order', () => {
    const { cache, load } = aCache({ maxEntries: 4 });
    for (const user of ['@a:x', '@b:x', '@c:x', '@d:x']) load(user);
    cache.get('@a:x'); // spared by the next eviction, placed again behind @d:x
    cache.get('@d:x'); // spared when its turn comes, placed again behind @f:x
    load('@e:x'); // evicts @b:x
    load('@f:x'); // evicts @c:x
    load('@g:x'); // @d:x spared; @a:x, not served since its second chance, evicted
    expect(
      ['@a:x', '@b:x', '@c:x', '@d:x', '@e:x', '@f:x', '@g:x'].map((user) => cache.get(user) !== undefined),
    ).toEqual([false, false, false, true, true, true, true]);
    expect(cache.stats.evictions).toBe(3);
  });

  it('spares each served entry once, not forever, and never evicts the entry being cached', () => {
    const { cache, load } = aCache({ maxEntries: 2 });
    load('@a:x');
    load('@b:x');
    cache.get('@a:x');
    cache.get('@b:x');
    load('@c:x'); // both spared once, then @a:x, the older, goes
    expect([cache.size, cache.stats.evictions]).toEqual([2, 1]);
    expect(['@a:x', '@b:x', '@c:x'].map((user) => cache.get(user) !== undefined)).toEqual([false, true, true]);
  });

  it('evicts the least recently used beyond maxBytes, and never keeps one larger than the whole budget', () => {
    const { cache, load } = aCache({ maxBytes: 100 });
    load('@a:x', 'a', 40);
    load('@b:x', 'b', 40);
    load('@c:x', 'c', 40);
    expect([cache.size, cache.bytes]).toEqual([2, 80]);
    expect(cache.get('@a:x')).toBeUndefined();
    expect(load('@huge:x', 'h', 101)).toBe(false);
    expect(cache.bytes).toBe(80);
  });

  it('replacing an entry counts its bytes once', () => {
    const { cache, load } = aCache();
    load('@a:x', 'one', 30);
    load('@a:x', 'two', 50);
    expect([cache.size, cache.bytes, cache.get('@a:x')]).toEqual([1, 50, 'two']);
  });

  it('forgets old invalidations once no load that old could be served', () => {
    const { cache, clock } = aCache();
    const old = cache.ticket();
    cache.invalidate('@a:x');
    clock.now += 5_000;
    cache.invalidate('@b:x');
    // The record of @a:x is gone, but what the old load read is too old to serve anyway.
    cache.set('@a:x', 'old rules', 10, old);
    expect(cache.get('@a:x')).toBeUndefined();
  });

  it('remembers no invalidation when no load started within maxStalenessMs (an import while nobody reads)', () => {
    const { cache, clock } = aCache();
    const old = cache.ticket();
    clock.now += 1_001;
    for (let i = 0; i < 1_000; i += 1) cache.invalidate(`@u${i}:x`);
    expect(cache.rememberedInvalidations).toBe(0);
    // What the old load read is too old to serve anyway.
    cache.set('@u1:x', 'old rules', 10, old);
    expect(cache.get('@u1:x')).toBeUndefined();
  });

  it('remembers at most maxRememberedInvalidations; past it, loads older than the forgotten ones are refused', () => {
    const { cache } = aCache({ maxRememberedInvalidations: 3 });
    const before = cache.ticket();
    for (const user of ['@a:x', '@b:x', '@c:x', '@d:x', '@e:x']) cache.invalidate(user);
    expect(cache.rememberedInvalidations).toBe(3);
    // @a:x was forgotten: a load that started before it may not be kept, whoever it read.
    expect(cache.set('@a:x', 'old rules', 10, before)).toBe(false);
    expect(cache.set('@z:x', 'other user', 10, before)).toBe(false);
    const between = cache.ticket();
    cache.invalidate('@f:x');
    expect(cache.set('@f:x', 'old rules', 10, between)).toBe(false);
    expect(cache.set('@z:x', 'other user', 10, between)).toBe(true);
    expect(cache.set('@a:x', 'new rules', 10, cache.ticket())).toBe(true);
  });

  it('bounds what it remembers by default, whatever the rate of change events', () => {
    const { cache } = aCache({ maxStalenessMs: 60_000 });
    const racing = cache.ticket();
    for (let i = 0; i < 3 * MAX_REMEMBERED_INVALIDATIONS; i += 1) cache.invalidate(`@u${i}:x`);
    expect(cache.rememberedInvalidations).toBe(MAX_REMEMBERED_INVALIDATIONS);
    expect(cache.set('@u0:x', 'old rules', 10, racing)).toBe(false);
  });

  it('reweighs an entry that still holds the value, evicting others to stay under maxBytes', () => {
    const { cache, load } = aCache({ maxBytes: 100 });
    load('@a:x', 'a', 40);
    load('@b:x', 'b', 40);
    expect(cache.reweigh('@b:x', 'stale value', 90)).toBe(false);
    expect(cache.reweigh('@b:x', 'b', 90)).toBe(true);
    expect([cache.bytes, cache.get('@a:x'), cache.get('@b:x')]).toEqual([90, undefined, 'b']);
    // Alone over the budget: it goes.
    expect(cache.reweigh('@b:x', 'b', 101)).toBe(false);
    expect([cache.size, cache.bytes]).toEqual([0, 0]);
  });
});
