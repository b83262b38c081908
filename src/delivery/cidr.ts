/**
 * IP addresses and CIDR ranges as numbers, without DNS or sockets.
 *
 * Every address lives in one 128-bit space: an IPv6 address is itself, and
 * an IPv4 address a.b.c.d is its IPv4-mapped IPv6 form ::ffff:a.b.c.d
 * (RFC 4291 §2.5.5.2). So `127.0.0.1`, `::ffff:127.0.0.1` and
 * `::ffff:7f00:1` are the same number, and a rule written for one form
 * cannot be walked around with another: that is how a socket's
 * `remoteAddress` on a dual-stack listener or connection may report an
 * IPv4 peer. An IPv4 range a.b.c.d/n is the IPv6 range ::ffff:a.b.c.d/(96+n).
 *
 * Parsing is strict on purpose: these functions judge where a push is sent
 * and read the operator's allowlist, and a lenient parser (octal `0177.1`,
 * short forms like `127.1`) is a classic way around such a check.
 */

/** How many bits an address has in the shared space. */
const BITS = 128;
const IPV4_BITS = 32;

/** ::ffff:0:0, the start of the IPv4-mapped block every IPv4 address is put in. */
export const IPV4_MAPPED_BASE = 0xffffn << 32n;

/** A CIDR range in the shared space, with the text it was written as (for logs and errors). */
export interface CidrRange {
  /** The first address of the range (its host bits are zero). */
  readonly first: bigint;
  /** The prefix length in the 128-bit space (an IPv4 /8 is 104 here). */
  readonly prefix: number;
  /** As written, e.g. `10.0.0.0/8`. */
  readonly text: string;
}

/** Whether an address (from `parseIp`) is an IPv4 address, i.e. in ::ffff:0:0/96. */
export function isIpv4(address: bigint): boolean {
  return address >> 32n === 0xffffn;
}

/** Whether the range holds the address. */
export function inRange(range: CidrRange, address: bigint): boolean {
  const hostBits = BigInt(BITS - range.prefix);
  return address >> hostBits === range.first >> hostBits;
}

/**
 * An IPv4 (dotted quad) or IPv6 address as a number, or `undefined` when the
 * text is not exactly one. No zone (`%eth0`), no brackets, no port: callers
 * take those off first.
 */
export function parseIp(text: string): bigint | undefined {
  if (text.includes(':')) return parseIpv6(text);
  const ipv4 = parseIpv4(text);
  return ipv4 === undefined ? undefined : IPV4_MAPPED_BASE | BigInt(ipv4);
}

/**
 * A CIDR range such as `10.0.0.0/8` or `fc00::/7`; an address alone is the
 * range of that one address (/32 or /128). Throws a `RangeError` saying what
 * is wrong with the text (without echoing it: the caller names the entry).
 * Host bits set after the prefix (`10.0.0.1/8`) are refused rather than
 * cleared: the operator may have meant a different prefix, and the error
 * names the range that was probably meant.
 */
export function parseCidr(text: string): CidrRange {
  const parts = text.split('/');
  if (parts.length > 2) throw new RangeError('has more than one "/"');
  const [addressText = '', prefixText] = parts;
  const address = parseIp(addressText);
  if (address === undefined) {
    throw new RangeError(
      addressText === ''
        ? 'has no address before the "/"'
        : 'does not start with an IPv4 address (four decimal numbers 0-255 without leading zeros) or an IPv6 address',
    );
  }
  // The prefix is counted in the family the address was written in.
  const writtenBits = addressText.includes(':') ? BITS : IPV4_BITS;
  let writtenPrefix = writtenBits;
  if (prefixText !== undefined) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(prefixText)) {
      throw new RangeError('has a prefix length that is not a whole number without leading zeros');
    }
    writtenPrefix = Number(prefixText);
    if (writtenPrefix > writtenBits) {
      throw new RangeError(`has a prefix length of ${writtenPrefix}, more than the ${writtenBits} bits of its address`);
    }
  }
  const prefix = writtenPrefix + (BITS - writtenBits);
  const hostBits = BigInt(BITS - prefix);
  const first = (address >> hostBits) << hostBits;
  if (first !== address) {
    throw new RangeError(
      `has bits set after its prefix: the range it lies in is ${formatIp(first, writtenBits === IPV4_BITS)}/${writtenPrefix}`,
    );
  }
  return { first, prefix, text };
}

/** Four decimal numbers 0-255, no leading zeros (an octal reading would be another address). */
function parseIpv4(text: string): number | undefined {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (match === null) return undefined;
  let value = 0;
  for (const octet of match.slice(1)) {
    if (octet.length > 1 && octet.startsWith('0')) return undefined;
    const number = Number(octet);
    if (number > 255) return undefined;
    value = value * 256 + number;
  }
  return value;
}

/**
 * RFC 4291 §2.2 text: eight groups of 1-4 hex digits, at most one `::`
 * standing for one or more zero groups, and optionally a dotted IPv4
 * address as the last 32 bits.
 */
function parseIpv6(text: string): bigint | undefined {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const head = parseGroups(halves[0] ?? '', halves.length === 1);
  const tail = halves.length === 2 ? parseGroups(halves[1] ?? '', true) : [];
  if (head === undefined || tail === undefined) return undefined;
  const groups =
    halves.length === 1
      ? head
      : head.length + tail.length <= 7
        ? [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail]
        : undefined;
  if (groups?.length !== 8) return undefined;
  return groups.reduce((value, group) => (value << 16n) | BigInt(group), 0n);
}

/** The groups of one side of a `::`; an IPv4 tail is allowed only at the very end of the address. */
function parseGroups(text: string, endsAddress: boolean): number[] | undefined {
  if (text === '') return [];
  const pieces = text.split(':');
  const groups: number[] = [];
  for (const [index, piece] of pieces.entries()) {
    if (endsAddress && index === pieces.length - 1 && piece.includes('.')) {
      const ipv4 = parseIpv4(piece);
      if (ipv4 === undefined) return undefined;
      groups.push(ipv4 >>> 16, ipv4 & 0xffff);
    } else if (/^[0-9a-fA-F]{1,4}$/.test(piece)) {
      groups.push(Number.parseInt(piece, 16));
    } else {
      return undefined;
    }
  }
  return groups;
}

/** An address as text, for error messages: dotted for IPv4, RFC 5952's compressed form for IPv6. */
function formatIp(address: bigint, asIpv4: boolean): string {
  if (asIpv4) {
    return [24n, 16n, 8n, 0n].map((shift) => String((address >> shift) & 0xffn)).join('.');
  }
  const groups = [...Array(8).keys()].map((index) => Number((address >> BigInt(16 * (7 - index))) & 0xffffn));
  // The longest run of two or more zero groups becomes `::` (the first one on a tie).
  let bestStart = -1;
  let bestLength = 1;
  for (let start = 0; start < 8; start += 1) {
    let length = 0;
    while (start + length < 8 && groups[start + length] === 0) length += 1;
    if (length > bestLength) [bestStart, bestLength] = [start, length];
  }
  const hex = groups.map((group) => group.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}
