import { type CidrRange, inRange, IPV4_MAPPED_BASE, isIpv4, parseCidr, parseIp } from './cidr.js';

/**
 * Which IP addresses a push may be sent to.
 *
 * A pusher URL is user input: without this check it makes the worker a
 * proxy into the operator's own network (server-side request forgery).
 * The check is made on an address, never on a name: the address a name
 * resolved to and that is connected to, or the one a socket reports. A name
 * proves nothing (it can resolve anywhere, and differently the next time).
 *
 * Refused by default, with why (first matching row wins, so the more
 * specific rows come first):
 *
 * | range              | what it is                                       | why refused                                    | source                 |
 * |--------------------|--------------------------------------------------|------------------------------------------------|------------------------|
 * | 0.0.0.0/8          | "this network"                                   | 0.0.0.0 reaches the local host on Linux        | RFC 791, RFC 6890      |
 * | 10.0.0.0/8         | private                                          | the operator's network                         | RFC 1918               |
 * | 100.64.0.0/10      | carrier-grade NAT shared space                   | the provider's network, not the internet       | RFC 6598               |
 * | 127.0.0.0/8        | loopback                                         | the worker itself (health port, local stores)  | RFC 1122               |
 * | 169.254.0.0/16     | link-local                                       | cloud metadata (169.254.169.254) lives here    | RFC 3927               |
 * | 172.16.0.0/12      | private                                          | the operator's network                         | RFC 1918               |
 * | 192.0.0.0/24       | IETF protocol assignments                        | DS-Lite, NAT64 discovery: no gateway           | RFC 6890               |
 * | 192.0.2.0/24       | documentation (TEST-NET-1)                       | never a real host                              | RFC 5737               |
 * | 192.88.99.0/24     | 6to4 relay anycast, deprecated                   | a relay, not a gateway                         | RFC 7526               |
 * | 192.168.0.0/16     | private                                          | the operator's network                         | RFC 1918               |
 * | 198.18.0.0/15      | benchmarking                                     | lab networks                                   | RFC 2544               |
 * | 198.51.100.0/24    | documentation (TEST-NET-2)                       | never a real host                              | RFC 5737               |
 * | 203.0.113.0/24     | documentation (TEST-NET-3)                       | never a real host                              | RFC 5737               |
 * | 224.0.0.0/4        | multicast                                        | not one host                                   | RFC 5771               |
 * | 255.255.255.255/32 | limited broadcast                                | every host of the local link                   | RFC 919, RFC 8190      |
 * | 240.0.0.0/4        | reserved for future use                          | not routed on the internet                     | RFC 1112, RFC 6890     |
 * | ::/128             | unspecified                                      | reaches the local host, like 0.0.0.0           | RFC 4291               |
 * | ::1/128            | loopback                                         | the worker itself                              | RFC 4291               |
 * | ::/96              | IPv4-compatible, deprecated                      | no longer routed; hides an IPv4 address        | RFC 4291 §2.5.5.1      |
 * | 64:ff9b:1::/48     | local-use IPv4/IPv6 translation                  | the operator's own translator: local           | RFC 8215               |
 * | 100::/64           | discard-only                                     | a black hole by design                         | RFC 6666               |
 * | 2001::/23          | IETF protocol assignments                        | Teredo (2001::/32, tunnels to an IPv4 host),   | RFC 2928, RFC 4380,    |
 * |                    |                                                  | benchmarking, ORCHID, anycast services: never  | RFC 5180, RFC 7343     |
 * |                    |                                                  | a push gateway                                 |                        |
 * | 2001:db8::/32      | documentation                                    | never a real host                              | RFC 3849               |
 * | 2002::/16          | 6to4                                             | tunnels to the IPv4 address it embeds          | RFC 3056, RFC 7526     |
 * | 3fff::/20          | documentation                                    | never a real host                              | RFC 9637               |
 * | 5f00::/16          | segment routing (SRv6) identifiers               | inside an operator's network                   | RFC 9602               |
 * | fc00::/7           | unique-local                                     | the operator's network (IPv6's RFC 1918)       | RFC 4193               |
 * | fe80::/10          | link-local                                       | the local link                                 | RFC 4291               |
 * | fec0::/10          | site-local, deprecated                           | still local wherever it is used                | RFC 3879               |
 * | ff00::/8           | multicast                                        | not one host                                   | RFC 4291               |
 * | ::/3, 4000::/2,    | outside 2000::/3                                 | the only block IANA allocates for global       | RFC 4291 §2.4,         |
 * | 8000::/1           |                                                  | unicast: anything else is reserved or local    | RFC 3587               |
 *
 * Not rows, because they carry an IPv4 address and are judged as it:
 *
 * - ::ffff:0:0/96, IPv4-mapped (RFC 4291 §2.5.5.2): `::ffff:127.0.0.1` and
 *   `::ffff:7f00:1` *are* 127.0.0.1 (the shared space of cidr.ts), so every
 *   IPv4 row above covers its mapped form and nothing else is needed.
 * - 64:ff9b::/96, the NAT64 well-known prefix (RFC 6052): judged by the IPv4
 *   address in its last 32 bits. On an IPv6-only host, DNS64 answers with
 *   these addresses for every IPv4-only gateway, so refusing the whole prefix
 *   would break delivery there; allowing it whole would make
 *   `64:ff9b::7f00:1` a way around every IPv4 row. RFC 6052 §3.1 already
 *   forbids the prefix for non-global IPv4 addresses, but nothing here may
 *   count on the translator enforcing it. (A network-specific NAT64 prefix
 *   is an ordinary global address that cannot be told apart; its operator
 *   knows it, and it maps to what that operator's translator allows.)
 *
 * Globally reachable special IPv4 blocks (AS112 192.31.196.0/24, AMT
 * 192.52.193.0/24, 192.175.48.0/24) are left open: they are on the internet.
 *
 * `PUSH_GATEWAY_IP_ALLOWLIST` (address-allowlist.ts) opens ranges: an address
 * in one of them is allowed whatever the rows say. It is consulted first, so
 * an operator can open 127.0.0.1/32 for a local gateway, or a private /8.
 */
export const DENIED_RANGES: readonly { readonly range: string; readonly why: string }[] = [
  { range: '0.0.0.0/8', why: '"this network" (unspecified), RFC 791' },
  { range: '10.0.0.0/8', why: 'private, RFC 1918' },
  { range: '100.64.0.0/10', why: 'carrier-grade NAT, RFC 6598' },
  { range: '127.0.0.0/8', why: 'loopback, RFC 1122' },
  { range: '169.254.0.0/16', why: 'link-local, RFC 3927' },
  { range: '172.16.0.0/12', why: 'private, RFC 1918' },
  { range: '192.0.0.0/24', why: 'IETF protocol assignments, RFC 6890' },
  { range: '192.0.2.0/24', why: 'documentation, RFC 5737' },
  { range: '192.88.99.0/24', why: '6to4 relay anycast, RFC 7526' },
  { range: '192.168.0.0/16', why: 'private, RFC 1918' },
  { range: '198.18.0.0/15', why: 'benchmarking, RFC 2544' },
  { range: '198.51.100.0/24', why: 'documentation, RFC 5737' },
  { range: '203.0.113.0/24', why: 'documentation, RFC 5737' },
  { range: '224.0.0.0/4', why: 'multicast, RFC 5771' },
  { range: '255.255.255.255/32', why: 'limited broadcast, RFC 919' },
  { range: '240.0.0.0/4', why: 'reserved, RFC 1112' },
  { range: '::/128', why: 'unspecified, RFC 4291' },
  { range: '::1/128', why: 'loopback, RFC 4291' },
  { range: '::/96', why: 'IPv4-compatible (deprecated), RFC 4291' },
  { range: '64:ff9b:1::/48', why: 'local-use IPv4/IPv6 translation, RFC 8215' },
  { range: '100::/64', why: 'discard-only, RFC 6666' },
  { range: '2001::/23', why: 'IETF protocol assignments (Teredo, benchmarking, ORCHID), RFC 2928' },
  { range: '2001:db8::/32', why: 'documentation, RFC 3849' },
  { range: '2002::/16', why: '6to4, RFC 3056' },
  { range: '3fff::/20', why: 'documentation, RFC 9637' },
  { range: '5f00::/16', why: 'segment routing identifiers, RFC 9602' },
  { range: 'fc00::/7', why: 'unique-local, RFC 4193' },
  { range: 'fe80::/10', why: 'link-local, RFC 4291' },
  { range: 'fec0::/10', why: 'site-local (deprecated), RFC 3879' },
  { range: 'ff00::/8', why: 'multicast, RFC 4291' },
  { range: '::/3', why: 'not global unicast (outside 2000::/3), RFC 4291' },
  { range: '4000::/2', why: 'not global unicast (outside 2000::/3), RFC 4291' },
  { range: '8000::/1', why: 'not global unicast (outside 2000::/3), RFC 4291' },
];

/** The rows as ranges, parsed once: a mistyped row fails at import, and a test holds them. */
const DENIED = DENIED_RANGES.map((row) => ({ ...parseCidr(row.range), why: row.why }));
const DENIED_IPV4 = DENIED.filter((range) => isIpv4(range.first));
const DENIED_IPV6 = DENIED.filter((range) => !isIpv4(range.first));

const NAT64 = parseCidr('64:ff9b::/96');

/**
 * The decision for one address, with a reason fit for a log line: the range
 * that decided it and why (never the URL, which is the user's).
 */
export type AddressVerdict =
  | { readonly allowed: true; readonly reason: string }
  | {
      readonly allowed: false;
      /** The row of `DENIED_RANGES` that refused it, or why nothing could be judged (`not an IP address`, `no address`): a bounded set. */
      readonly rule: string;
      readonly reason: string;
    };

/**
 * Whether a push may be sent to this address: one Node reports (a look-up
 * answer, `socket.remoteAddress`), IPv4 or IPv6 in any standard form, with
 * or without a zone (`fe80::1%eth0`). Anything that does not parse is
 * refused: this check fails closed.
 */
export function checkAddress(address: string, allowlist: readonly CidrRange[]): AddressVerdict {
  // A zone names the interface of a scoped IPv6 address; the address alone decides.
  const zone = address.indexOf('%');
  const parsed = parseIp(zone >= 0 && address.includes(':') ? address.slice(0, zone) : address);
  if (parsed === undefined) return { allowed: false, rule: 'not an IP address', reason: 'not an IP address' };
  return judge(parsed, allowlist);
}

function judge(address: bigint, allowlist: readonly CidrRange[]): AddressVerdict {
  const opened = allowlist.find((range) => inRange(range, address));
  if (opened !== undefined) {
    return { allowed: true, reason: `opened by PUSH_GATEWAY_IP_ALLOWLIST ${opened.text}` };
  }
  if (inRange(NAT64, address)) {
    const verdict = judge(IPV4_MAPPED_BASE | (address & 0xffffffffn), allowlist);
    return { ...verdict, reason: `NAT64 ${NAT64.text} of an IPv4 address: ${verdict.reason}` };
  }
  const denied = (isIpv4(address) ? DENIED_IPV4 : DENIED_IPV6).find((range) => inRange(range, address));
  if (denied !== undefined) return { allowed: false, rule: denied.text, reason: `${denied.text}: ${denied.why}` };
  return { allowed: true, reason: 'global unicast' };
}
