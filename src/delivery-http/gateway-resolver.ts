import type { RecordWithTtl } from 'node:dns';
import { Resolver } from 'node:dns/promises';
import {
  combineAnswers,
  DEFAULT_NAME_CACHE_POLICY,
  type FamilyAnswer,
  loopbackName,
  NameCache,
  type NameCachePolicy,
  type ResolvedName,
} from '../delivery/name-resolution.js';
import { RequestSlots } from './request-slots.js';

/** The part of `dns.promises.Resolver` used: a test may answer with a stand-in. */
export interface DnsQueries {
  resolve4(hostname: string, options: { ttl: true }): Promise<RecordWithTtl[]>;
  resolve6(hostname: string, options: { ttl: true }): Promise<RecordWithTtl[]>;
  cancel(): void;
}

/**
 * - 1 s per try, 2 tries per server: a DNS server answers in milliseconds
 *   or not at all; c-ares doubles the wait on the second try, so one
 *   server costs at most about 3 s.
 * - 5 s in all, whatever the number of servers: a name that takes longer
 *   fails the request (a connection error, retried on the backoff) and is
 *   remembered as failing for a few seconds (`failureTtlMs`).
 * - 32 names looked up at once. Look-ups do not use threads (see
 *   `GatewayResolver`), so this bounds what a flood of distinct names puts
 *   on the DNS server, not the worker's threads; a name asked for again
 *   while its look-up runs waits for that one, taking no slot.
 */
export const GATEWAY_RESOLVER_DEFAULTS = {
  timeoutMs: 1000,
  tries: 2,
  deadlineMs: 5000,
  maxConcurrent: 32,
} as const;

export interface GatewayResolverOptions {
  /** DNS servers (`ip` or `ip:port`); without, the system's (/etc/resolv.conf). */
  readonly servers?: readonly string[];
  readonly timeoutMs?: number;
  readonly tries?: number;
  readonly deadlineMs?: number;
  readonly maxConcurrent?: number;
  readonly cache?: NameCachePolicy;
  /** A stand-in for c-ares (tests); `servers`, `timeoutMs` and `tries` are then its business. */
  readonly queries?: DnsQueries;
  readonly now?: () => number;
}

/**
 * Resolves gateway names with DNS queries of its own, never `dns.lookup`.
 *
 * Why: `dns.lookup` (what Node connects with by default) calls
 * getaddrinfo on libuv's threadpool, four threads shared with file system
 * and crypto work. A handful of names whose DNS servers do not answer hold
 * all four for seconds each, and then no new connection to any gateway,
 * and no file or crypto operation of the process, can start. A pusher URL
 * is user input, so such names are one `set_pusher` away. `Resolver`
 * (c-ares) sends its queries on sockets of the event loop instead: a slow
 * name costs a timer and a socket, and others resolve meanwhile.
 *
 * What that changes: /etc/hosts and nsswitch are not read, only DNS
 * (`localhost` is answered as loopback without a query, `loopbackName`).
 * Answers are cached for their TTL within bounds, failures briefly
 * (`NameCachePolicy`).
 */
export class GatewayResolver {
  readonly #queries: DnsQueries;
  readonly #cache: NameCache;
  readonly #policy: NameCachePolicy;
  readonly #slots: RequestSlots;
  readonly #deadlineMs: number;
  readonly #now: () => number;
  /** Look-ups under way, by name: a second caller waits for the first's answer. */
  readonly #pending = new Map<string, Promise<ResolvedName>>();

  constructor(options: GatewayResolverOptions = {}) {
    const settings = { ...GATEWAY_RESOLVER_DEFAULTS, ...options };
    for (const key of Object.keys(GATEWAY_RESOLVER_DEFAULTS) as (keyof typeof GATEWAY_RESOLVER_DEFAULTS)[]) {
      const value = settings[key];
      if (!Number.isSafeInteger(value) || value < 1)
        throw new RangeError(`${key} must be a whole number ≥ 1, not ${value}`);
    }
    this.#queries = options.queries ?? systemResolver(settings.timeoutMs, settings.tries, options.servers);
    this.#policy = options.cache ?? DEFAULT_NAME_CACHE_POLICY;
    this.#cache = new NameCache(this.#policy);
    this.#slots = new RequestSlots(settings.maxConcurrent);
    this.#deadlineMs = settings.deadlineMs;
    this.#now = options.now ?? Date.now;
  }

  /** The addresses of a name (never an IP literal: the caller connects to those as they are). Never rejects. */
  async resolve(hostname: string): Promise<ResolvedName> {
    const loopback = loopbackName(hostname);
    if (loopback !== undefined) return { ok: true, addresses: loopback };
    const cached = this.#cache.get(hostname, this.#now());
    if (cached !== undefined) return cached;
    let pending = this.#pending.get(hostname);
    if (pending === undefined) {
      pending = this.#lookUp(hostname).finally(() => this.#pending.delete(hostname));
      this.#pending.set(hostname, pending);
    }
    return pending;
  }

  /** Ends the queries under way (each answers `ECANCELLED`); for a client that closes. */
  cancel(): void {
    this.#queries.cancel();
  }

  async #lookUp(hostname: string): Promise<ResolvedName> {
    await this.#slots.acquire();
    let timer: NodeJS.Timeout | undefined;
    try {
      const deadline = new Promise<'deadline'>((resolve) => {
        timer = setTimeout(() => {
          resolve('deadline');
        }, this.#deadlineMs);
      });
      const answers = Promise.all([
        familyAnswer(this.#queries.resolve4(hostname, { ttl: true })),
        familyAnswer(this.#queries.resolve6(hostname, { ttl: true })),
      ]);
      const settled = await Promise.race([answers, deadline]);
      const [a, aaaa] =
        settled === 'deadline'
          ? [{ ok: false, code: 'ETIMEOUT' } as const, { ok: false, code: 'ETIMEOUT' } as const]
          : settled;
      const { name, ttlMs } = combineAnswers(a, aaaa, this.#policy);
      // A cancelled look-up (the client closing) says nothing about the name.
      if (name.ok || name.code !== 'ECANCELLED') this.#cache.set(hostname, name, ttlMs, this.#now());
      return name;
    } finally {
      clearTimeout(timer);
      this.#slots.release();
    }
  }
}

function systemResolver(timeoutMs: number, tries: number, servers: readonly string[] | undefined): DnsQueries {
  const resolver = new Resolver({ timeout: timeoutMs, tries });
  if (servers !== undefined) resolver.setServers([...servers]);
  return resolver;
}

async function familyAnswer(query: Promise<RecordWithTtl[]>): Promise<FamilyAnswer> {
  try {
    return { ok: true, records: await query };
  } catch (error) {
    const { code } = error as { code?: unknown };
    return { ok: false, code: typeof code === 'string' ? code : 'EUNKNOWN' };
  }
}
