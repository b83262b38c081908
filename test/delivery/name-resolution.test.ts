import { describe, expect, it } from 'vitest';
import {
  addressKey,
  combineAnswers,
  DEFAULT_NAME_CACHE_POLICY,
  type FamilyAnswer,
  loopbackName,
  NameCache,
  type NameCachePolicy,
  pickAddress,
  type ResolvedAddress,
  type ResolvedName,
} from '../../src/delivery/name-resolution.js';

const POLICY: NameCachePolicy = {
  maxEntries: 3,
  minTtlMs: 1000,
  maxTtlMs: 300_000,
  negativeTtlMs: 30_000,
  failureTtlMs: 5000,
};

const records = (ttl: number, ...addresses: string[]): FamilyAnswer => ({
  ok: true,
  records: addresses.map((address) => ({ address, ttl })),
});
const error = (code: string): FamilyAnswer => ({ ok: false, code });
const v4 = (address: string): ResolvedAddress => ({ address, family: 4 });
const v6 = (address: string): ResolvedAddress => ({ address, family: 6 });

describe('an A and an AAAA answer together', () => {
  it.each<[string, FamilyAnswer, FamilyAnswer, ResolvedName, number]>([
    [
      'both families, kept for the lowest TTL',
      records(60, '8.8.8.8'),
      records(30, '2001:4860::8888'),
      { ok: true, addresses: [v4('8.8.8.8'), v6('2001:4860::8888')] },
      30_000,
    ],
    [
      'IPv4 only (no AAAA records)',
      records(60, '8.8.8.8'),
      error('ENODATA'),
      { ok: true, addresses: [v4('8.8.8.8')] },
      60_000,
    ],
    [
      'a TTL of 0 is kept the least time',
      records(0, '8.8.8.8'),
      error('ENODATA'),
      { ok: true, addresses: [v4('8.8.8.8')] },
      1000,
    ],
    [
      'a TTL of a day is kept the most time',
      records(86_400, '8.8.8.8'),
      records(86_400),
      { ok: true, addresses: [v4('8.8.8.8')] },
      300_000,
    ],
    [
      'half an answer (the other query failed) is kept only as long as a failure',
      records(60, '8.8.8.8'),
      error('ETIMEOUT'),
      { ok: true, addresses: [v4('8.8.8.8')] },
      5000,
    ],
    ['a name that does not exist', error('ENOTFOUND'), error('ENOTFOUND'), { ok: false, code: 'ENOTFOUND' }, 30_000],
    ['a name without addresses', records(60), error('ENODATA'), { ok: false, code: 'ENODATA' }, 30_000],
    ['a timeout', error('ETIMEOUT'), error('ETIMEOUT'), { ok: false, code: 'ETIMEOUT' }, 5000],
    [
      'no A records, the AAAA query failed: the failure speaks',
      error('ENODATA'),
      error('ESERVFAIL'),
      { ok: false, code: 'ESERVFAIL' },
      5000,
    ],
  ])('%s', (_, a, aaaa, name, ttlMs) => {
    expect(combineAnswers(a, aaaa, POLICY)).toEqual({ name, ttlMs });
  });
});

describe('localhost', () => {
  it.each<[string, boolean]>([
    ['localhost', true],
    ['LocalHost', true],
    ['localhost.', true],
    ['push.localhost', true],
    ['localhost.example.org', false],
    ['notlocalhost', false],
    ['push.example.org', false],
  ])('%s is loopback without DNS: %s', (name, loopback) => {
    expect(loopbackName(name)).toEqual(loopback ? [v4('127.0.0.1')] : undefined);
  });
});

describe('the address connected to', () => {
  it.each<[string, ResolvedAddress[], ResolvedAddress | undefined]>([
    ['the first IPv4 address', [v6('2001:db8::1'), v4('8.8.8.8'), v4('8.8.4.4')], v4('8.8.8.8')],
    ['the first IPv6 address when there is no IPv4 one', [v6('2001:db8::1'), v6('2001:db8::2')], v6('2001:db8::1')],
    ['none of nothing', [], undefined],
  ])('%s', (_, addresses, picked) => {
    expect(pickAddress(addresses)).toEqual(picked);
  });
});

describe('the key an address is counted under', () => {
  it.each<[string, string, string]>([
    ['IPv4 and its mapped form', '8.8.8.8', '::ffff:8.8.8.8'],
    ['IPv4 and its mapped form in hex', '127.0.0.1', '::ffff:7f00:1'],
    ['IPv6 in long and short forms', '2001:db8::1', '2001:0db8:0000:0000:0000:0000:0000:0001'],
  ])('is one for %s', (_, one, other) => {
    expect(addressKey(one)).toBe(addressKey(other));
    expect(addressKey(one)).not.toBeUndefined();
  });

  it('differs between hosts, and is undefined for what is not an address', () => {
    expect(addressKey('8.8.8.8')).not.toBe(addressKey('8.8.4.4'));
    expect(addressKey('push.example.org')).toBeUndefined();
  });
});

describe('the name cache', () => {
  const answer = (address: string): ResolvedName => ({ ok: true, addresses: [v4(address)] });

  it('keeps an answer until its time is up, not a millisecond longer', () => {
    const cache = new NameCache(POLICY);
    cache.set('a.test', answer('8.8.8.8'), 1000, 0);
    expect(cache.get('a.test', 999)).toEqual(answer('8.8.8.8'));
    expect(cache.get('a.test', 1000)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('forgets the least recently used name when full', () => {
    const cache = new NameCache(POLICY);
    for (const name of ['a', 'b', 'c']) cache.set(name, answer('8.8.8.8'), 60_000, 0);
    cache.get('a', 1);
    cache.set('d', answer('8.8.4.4'), 60_000, 2);
    expect(cache.size).toBe(3);
    expect(['a', 'b', 'c', 'd'].map((name) => cache.get(name, 3) !== undefined)).toEqual([true, false, true, true]);
  });

  it('replaces the answer of a name set again', () => {
    const cache = new NameCache(POLICY);
    cache.set('a', answer('8.8.8.8'), 60_000, 0);
    cache.set('a', { ok: false, code: 'ENOTFOUND' }, 30_000, 1);
    expect(cache.get('a', 2)).toEqual({ ok: false, code: 'ENOTFOUND' });
    expect(cache.size).toBe(1);
  });

  it('keeps nothing with no room or no time', () => {
    const none = new NameCache({ ...POLICY, maxEntries: 0 });
    none.set('a', answer('8.8.8.8'), 60_000, 0);
    expect(none.size).toBe(0);
    const cache = new NameCache(POLICY);
    cache.set('a', answer('8.8.8.8'), 0, 0);
    expect(cache.size).toBe(0);
  });

  it('has sane defaults', () => {
    expect(DEFAULT_NAME_CACHE_POLICY).toMatchObject({ maxEntries: 4096, maxTtlMs: 300_000 });
    expect(() => new NameCache({ ...POLICY, maxEntries: -1 })).toThrow(RangeError);
  });
});
