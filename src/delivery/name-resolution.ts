import { parseIp } from './cidr.js';

/**
 * The pure side of resolving a gateway's name: what an answer is, how long
 * it is kept, which of its addresses is connected to, and which slot an
 * address counts against. The look-ups themselves are in
 * delivery-http/gateway-resolver.ts.
 */

export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** What resolving a name came to. `code` is c-ares' (`ENOTFOUND`, `ETIMEOUT`, …), for the log. */
export type ResolvedName =
  { readonly ok: true; readonly addresses: readonly ResolvedAddress[] } | { readonly ok: false; readonly code: string };

/** One family's query, as the resolver answered it: records with their TTL (s), or the error's code. */
export type FamilyAnswer =
  | { readonly ok: true; readonly records: readonly { readonly address: string; readonly ttl: number }[] }
  | { readonly ok: false; readonly code: string };

export interface NameCachePolicy {
  /** Names kept, the longest unused out first. */
  readonly maxEntries: number;
  /** An answer is kept at least this long, whatever its TTL (a TTL of 0 would mean a query per request). */
  readonly minTtlMs: number;
  /** And at most this long, whatever its TTL. */
  readonly maxTtlMs: number;
  /** A name that does not exist or has no address. */
  readonly negativeTtlMs: number;
  /** A resolver that failed (timeout, SERVFAIL, refused). */
  readonly failureTtlMs: number;
}

/**
 * - 4,096 names: a worker talks to a few gateways, a million pushers' hosts
 *   are a handful of names; a few hundred bytes each.
 * - TTLs honoured between 1 s and 5 min: a gateway that moves is followed
 *   within minutes whatever TTL it published, and a 0 TTL does not cost a
 *   query per push.
 * - A name without address is asked again after 30 s (c-ares does not pass
 *   the SOA's negative TTL on); a failing resolver after 5 s, long enough
 *   that a burst of pushes to a broken name costs one query, short enough
 *   that a passing failure is soon forgotten.
 */
export const DEFAULT_NAME_CACHE_POLICY: NameCachePolicy = {
  maxEntries: 4096,
  minTtlMs: 1000,
  maxTtlMs: 300_000,
  negativeTtlMs: 30_000,
  failureTtlMs: 5000,
};

/** c-ares' codes for "the name has no address", as opposed to "the resolver failed". */
const NO_ADDRESS = new Set(['ENOTFOUND', 'ENODATA']);

/**
 * The A and AAAA answers of one name together, and how long to keep that.
 * A name answers when either family has records: many gateways have no
 * AAAA, and a family whose query failed does not void the other's records.
 * With neither, the A query's failure speaks for the name unless it merely
 * found no A records and the AAAA query failed otherwise.
 */
export function combineAnswers(
  a: FamilyAnswer,
  aaaa: FamilyAnswer,
  policy: NameCachePolicy,
): { readonly name: ResolvedName; readonly ttlMs: number } {
  const records = [
    ...(a.ok ? a.records.map((record) => ({ ...record, family: 4 as const })) : []),
    ...(aaaa.ok ? aaaa.records.map((record) => ({ ...record, family: 6 as const })) : []),
  ];
  const failures = [a, aaaa].flatMap((answer) => (answer.ok ? [] : [answer.code]));
  const failed = failures.find((code) => !NO_ADDRESS.has(code));
  if (records.length > 0) {
    const ttlMs = Math.min(policy.maxTtlMs, Math.max(policy.minTtlMs, Math.min(...records.map((r) => r.ttl)) * 1000));
    return {
      name: { ok: true, addresses: records.map(({ address, family }) => ({ address, family })) },
      // Half an answer (the other family's query failed) is kept only as long as a failure.
      ttlMs: failed === undefined ? ttlMs : Math.min(ttlMs, policy.failureTtlMs),
    };
  }
  if (failed !== undefined) return { name: { ok: false, code: failed }, ttlMs: policy.failureTtlMs };
  return { name: { ok: false, code: failures[0] ?? 'ENODATA' }, ttlMs: policy.negativeTtlMs };
}

const LOOPBACK: readonly ResolvedAddress[] = [{ address: '127.0.0.1', family: 4 }];

/**
 * `localhost` and names under it are loopback without asking DNS (RFC 6761
 * §6.3): DNS queries skip /etc/hosts, and a resolver may answer such a
 * name with anything. 127.0.0.1 alone, the address /etc/hosts gives it on
 * every usual system and the one local gateways and the tests' doubles
 * listen on, so opening 127.0.0.1/32 is enough to reach them (with ::1 in
 * the answer too, the name would be refused unless both were opened). The
 * address policy refuses it unless the operator opened loopback.
 */
export function loopbackName(hostname: string): readonly ResolvedAddress[] | undefined {
  const name = hostname.toLowerCase().replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost') ? LOOPBACK : undefined;
}

/**
 * The one address of an answer a request is sent to: the first IPv4
 * address, else the first IPv6 one. IPv4 first because a worker's network
 * reaches IPv4 almost everywhere, while a gateway's AAAA record may point
 * where the worker has no route; the answer's order within a family is
 * the resolver's (c-ares keeps the server's).
 */
export function pickAddress(addresses: readonly ResolvedAddress[]): ResolvedAddress | undefined {
  return addresses.find((entry) => entry.family === 4) ?? addresses[0];
}

/**
 * The key an address's requests in flight are counted under: one per
 * host, whatever form it is written in (`1.2.3.4` and `::ffff:1.2.3.4` are
 * one host, cidr.ts's shared space). Undefined for what is not an address.
 */
export function addressKey(address: string): string | undefined {
  return parseIp(address)?.toString(16);
}

/**
 * Resolved names by name, each until its time runs out, at most
 * `maxEntries` of them: a full cache forgets its least recently used name.
 * A Map keeps insertion order, so re-inserting on use keeps the least
 * recently used first, and evicting it is O(1).
 */
export class NameCache {
  readonly #policy: NameCachePolicy;
  readonly #entries = new Map<string, { readonly name: ResolvedName; readonly until: number }>();

  constructor(policy: NameCachePolicy) {
    if (!Number.isSafeInteger(policy.maxEntries) || policy.maxEntries < 0)
      throw new RangeError(`maxEntries must be a whole number ≥ 0, not ${policy.maxEntries}`);
    this.#policy = policy;
  }

  get(hostname: string, now: number): ResolvedName | undefined {
    const entry = this.#entries.get(hostname);
    if (entry === undefined) return undefined;
    this.#entries.delete(hostname);
    if (now >= entry.until) return undefined;
    this.#entries.set(hostname, entry);
    return entry.name;
  }

  set(hostname: string, name: ResolvedName, ttlMs: number, now: number): void {
    this.#entries.delete(hostname);
    if (this.#policy.maxEntries === 0 || ttlMs <= 0) return;
    if (this.#entries.size >= this.#policy.maxEntries) {
      const [oldest] = this.#entries.keys();
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
    this.#entries.set(hostname, { name, until: now + ttlMs });
  }

  get size(): number {
    return this.#entries.size;
  }
}
