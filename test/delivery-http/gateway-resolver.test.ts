import { pbkdf2 } from 'node:crypto';
import type { RecordWithTtl } from 'node:dns';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_NAME_CACHE_POLICY } from '../../src/delivery/name-resolution.js';
import {
  type DnsQueries,
  GatewayResolver,
  type GatewayResolverOptions,
} from '../../src/delivery-http/gateway-resolver.js';
import { DnsDouble } from '../support/dns-double.js';

const doubles: DnsDouble[] = [];
const resolvers: GatewayResolver[] = [];

afterEach(async () => {
  for (const resolver of resolvers.splice(0)) resolver.cancel();
  await Promise.all(doubles.splice(0).map(async (double) => double.close()));
});

async function aDnsServer(): Promise<DnsDouble> {
  const double = await DnsDouble.start();
  doubles.push(double);
  return double;
}

function aResolver(options: GatewayResolverOptions): GatewayResolver {
  const resolver = new GatewayResolver(options);
  resolvers.push(resolver);
  return resolver;
}

/** Occupies libuv's four threadpool threads for about `ms` (pbkdf2 runs there), as slow getaddrinfo calls would. */
async function busyThreadpool(ms: number): Promise<unknown> {
  const iterations = Math.max(1, Math.round(ms * 800));
  return Promise.all(
    Array.from(
      { length: 4 },
      async () =>
        new Promise((resolve) => {
          pbkdf2('x', 'y', iterations, 32, 'sha256', resolve);
        }),
    ),
  );
}

describe('resolving with c-ares, against a DNS double', () => {
  it('answers a name with its A and AAAA records', async () => {
    const dns = await aDnsServer();
    dns.set('push.test', { a: ['203.0.113.7'], aaaa: ['2001:db8::7'] });
    expect(await aResolver({ servers: [dns.server] }).resolve('push.test')).toEqual({
      ok: true,
      addresses: [
        { address: '203.0.113.7', family: 4 },
        { address: '2001:db8::7', family: 6 },
      ],
    });
  });

  it('resolves while every threadpool thread is busy: no look-up waits for the threadpool', async () => {
    const dns = await aDnsServer();
    dns.set('push.test', { a: ['203.0.113.7'] });
    const resolver = aResolver({ servers: [dns.server] });
    let poolDone = false;
    const pool = busyThreadpool(800).then(() => (poolDone = true));
    const started = performance.now();
    expect(await resolver.resolve('push.test')).toMatchObject({ ok: true });
    expect(poolDone).toBe(false);
    expect(performance.now() - started).toBeLessThan(1000);
    await pool;
  });

  it('answers localhost as 127.0.0.1 without asking DNS', async () => {
    const dns = await aDnsServer();
    const resolver = aResolver({ servers: [dns.server] });
    for (const name of ['localhost', 'LOCALHOST.', 'gw.localhost']) {
      expect(await resolver.resolve(name)).toEqual({
        ok: true,
        addresses: [{ address: '127.0.0.1', family: 4 }],
      });
    }
    expect(dns.questions).toEqual([]);
  });

  it.each<[string, Parameters<DnsDouble['set']>[1], string]>([
    ['a name that does not exist', { rcode: 'NXDOMAIN' }, 'ENOTFOUND'],
    ['a name without addresses', {}, 'ENODATA'],
    ['a failing server', { rcode: 'SERVFAIL' }, 'ESERVFAIL'],
  ])('says why for %s', async (_, entry, code) => {
    const dns = await aDnsServer();
    dns.set('push.test', entry);
    expect(await aResolver({ servers: [dns.server] }).resolve('push.test')).toEqual({ ok: false, code });
  });

  it('gives up on a silent server within its timeouts, and remembers the failure briefly', async () => {
    const dns = await aDnsServer();
    dns.set('slow.test', { silent: true });
    let now = 0;
    const resolver = aResolver({ servers: [dns.server], timeoutMs: 100, tries: 1, now: () => now });
    const started = performance.now();
    expect(await resolver.resolve('slow.test')).toEqual({ ok: false, code: 'ETIMEOUT' });
    expect(performance.now() - started).toBeLessThan(1000);
    const asked = dns.asked('slow.test');
    expect(await resolver.resolve('slow.test')).toEqual({ ok: false, code: 'ETIMEOUT' });
    expect(dns.asked('slow.test')).toBe(asked);
    now += DEFAULT_NAME_CACHE_POLICY.failureTtlMs;
    await resolver.resolve('slow.test');
    expect(dns.asked('slow.test')).toBeGreaterThan(asked);
  });

  it('keeps an answer for its TTL, then asks again', async () => {
    const dns = await aDnsServer();
    dns.set('push.test', { a: ['203.0.113.7'], ttl: 30 });
    let now = 0;
    const resolver = aResolver({ servers: [dns.server], now: () => now });
    await resolver.resolve('push.test');
    expect(dns.asked('push.test')).toBe(2);
    now = 29_999;
    await resolver.resolve('push.test');
    expect(dns.asked('push.test')).toBe(2);
    dns.set('push.test', { a: ['203.0.113.8'], ttl: 30 });
    now = 30_000;
    expect(await resolver.resolve('push.test')).toEqual({
      ok: true,
      addresses: [{ address: '203.0.113.8', family: 4 }],
    });
    expect(dns.asked('push.test')).toBe(4);
  });

  it('a slow name holds up no other name', async () => {
    const dns = await aDnsServer();
    dns.set('slow.test', { a: ['203.0.113.1'], delayMs: 800 });
    dns.set('fast.test', { a: ['203.0.113.2'] });
    const resolver = aResolver({ servers: [dns.server], timeoutMs: 2000 });
    const slow = Array.from({ length: 10 }, async () => resolver.resolve('slow.test'));
    const started = performance.now();
    expect(await resolver.resolve('fast.test')).toMatchObject({ ok: true });
    expect(performance.now() - started).toBeLessThan(400);
    await Promise.all(slow);
    // Ten callers, one look-up (an A and an AAAA question).
    expect(dns.asked('slow.test')).toBe(2);
  });
});

/** A stand-in for c-ares whose queries end when the test says. */
class ManualQueries implements DnsQueries {
  readonly started: string[] = [];
  readonly #ends: (() => void)[] = [];
  cancelled = false;

  async resolve4(hostname: string): Promise<RecordWithTtl[]> {
    return this.#query(hostname, [{ address: '203.0.113.1', ttl: 60 }]);
  }

  async resolve6(hostname: string): Promise<RecordWithTtl[]> {
    return this.#query(hostname, []);
  }

  cancel(): void {
    this.cancelled = true;
  }

  /** Ends the oldest query still running. */
  endOne(): void {
    this.#ends.shift()?.();
  }

  async #query(hostname: string, records: RecordWithTtl[]): Promise<RecordWithTtl[]> {
    this.started.push(hostname);
    return new Promise((resolve) =>
      this.#ends.push(() => {
        resolve(records);
      }),
    );
  }
}

describe('the resolver’s own bounds', () => {
  it('looks up at most maxConcurrent names at once; the others wait their turn', async () => {
    const queries = new ManualQueries();
    const resolver = aResolver({ queries, maxConcurrent: 2 });
    const answers = ['a.test', 'b.test', 'c.test'].map(async (name) => resolver.resolve(name));
    await new Promise((resolve) => setImmediate(resolve));
    // Two names, each an A and an AAAA query.
    expect(queries.started).toEqual(['a.test', 'a.test', 'b.test', 'b.test']);
    queries.endOne();
    queries.endOne();
    await answers[0];
    await new Promise((resolve) => setImmediate(resolve));
    expect(queries.started.slice(4)).toEqual(['c.test', 'c.test']);
    for (let index = 0; index < 4; index += 1) queries.endOne();
    expect(await Promise.all(answers)).toEqual(
      Array.from({ length: 3 }, () => ({ ok: true, addresses: [{ address: '203.0.113.1', family: 4 }] })),
    );
  });

  it('ends a look-up at its deadline, whatever the queries do, and frees its slot', async () => {
    const queries = new ManualQueries();
    const resolver = aResolver({ queries, maxConcurrent: 1, deadlineMs: 50 });
    expect(await resolver.resolve('a.test')).toEqual({ ok: false, code: 'ETIMEOUT' });
    const next = resolver.resolve('b.test');
    await new Promise((resolve) => setImmediate(resolve));
    expect(queries.started).toContain('b.test');
    queries.endOne();
    queries.endOne();
    queries.endOne();
    queries.endOne();
    expect(await next).toMatchObject({ ok: true });
  });

  it('does not remember a look-up cancelled by a closing client', async () => {
    let cancelled = true;
    let asked = 0;
    const answer = async (): Promise<RecordWithTtl[]> => {
      asked += 1;
      return cancelled
        ? Promise.reject(Object.assign(new Error('cancelled'), { code: 'ECANCELLED' }))
        : Promise.resolve([{ address: '203.0.113.1', ttl: 60 }]);
    };
    const resolver = aResolver({ queries: { resolve4: answer, resolve6: answer, cancel: () => undefined } });
    expect(await resolver.resolve('a.test')).toEqual({ ok: false, code: 'ECANCELLED' });
    cancelled = false;
    expect(await resolver.resolve('a.test')).toMatchObject({ ok: true });
    expect(asked).toBe(4);
  });

  it.each([
    ['maxConcurrent', { maxConcurrent: 0 }],
    ['deadlineMs', { deadlineMs: 1.5 }],
    ['tries', { tries: -1 }],
  ])('refuses a %s that is not a whole number ≥ 1', (key, options) => {
    expect(() => new GatewayResolver(options)).toThrow(new RegExp(key));
  });
});
