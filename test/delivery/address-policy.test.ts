import { BlockList, isIP } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseAddressAllowlist } from '../../src/delivery/address-allowlist.js';
import { checkAddress, DENIED_RANGES } from '../../src/delivery/address-policy.js';
import { type CidrRange, inRange, parseCidr, parseIp } from '../../src/delivery/cidr.js';

const NOTHING_OPENED: readonly CidrRange[] = [];

/** The rule that refused an address, or `allowed`. */
function ruleFor(address: string, allowlist: readonly CidrRange[] = NOTHING_OPENED): string {
  const verdict = checkAddress(address, allowlist);
  return verdict.allowed ? 'allowed' : verdict.rule;
}

/**
 * Every denied row, written out by hand (not computed from the code under
 * test): the first, a middle and the last address the row itself decides,
 * and the addresses just before and after it (`null` where there is none).
 * Where a neighbour of the row is decided by another row, the row says so.
 */
const DENIED_TABLE: readonly (readonly [string, string, string, string, string | null, string | null])[] = [
  ['0.0.0.0/8', '0.0.0.0', '0.128.0.1', '0.255.255.255', null, '1.0.0.0'],
  ['10.0.0.0/8', '10.0.0.0', '10.20.30.40', '10.255.255.255', '9.255.255.255', '11.0.0.0'],
  ['100.64.0.0/10', '100.64.0.0', '100.100.100.100', '100.127.255.255', '100.63.255.255', '100.128.0.0'],
  ['127.0.0.0/8', '127.0.0.0', '127.0.0.1', '127.255.255.255', '126.255.255.255', '128.0.0.0'],
  ['169.254.0.0/16', '169.254.0.0', '169.254.169.254', '169.254.255.255', '169.253.255.255', '169.255.0.0'],
  ['172.16.0.0/12', '172.16.0.0', '172.20.1.1', '172.31.255.255', '172.15.255.255', '172.32.0.0'],
  ['192.0.0.0/24', '192.0.0.0', '192.0.0.8', '192.0.0.255', '191.255.255.255', '192.0.1.0'],
  ['192.0.2.0/24', '192.0.2.0', '192.0.2.99', '192.0.2.255', '192.0.1.255', '192.0.3.0'],
  ['192.88.99.0/24', '192.88.99.0', '192.88.99.1', '192.88.99.255', '192.88.98.255', '192.88.100.0'],
  ['192.168.0.0/16', '192.168.0.0', '192.168.1.1', '192.168.255.255', '192.167.255.255', '192.169.0.0'],
  ['198.18.0.0/15', '198.18.0.0', '198.19.0.1', '198.19.255.255', '198.17.255.255', '198.20.0.0'],
  ['198.51.100.0/24', '198.51.100.0', '198.51.100.7', '198.51.100.255', '198.51.99.255', '198.51.101.0'],
  ['203.0.113.0/24', '203.0.113.0', '203.0.113.50', '203.0.113.255', '203.0.112.255', '203.0.114.0'],
  // After multicast comes the reserved 240.0.0.0/4.
  ['224.0.0.0/4', '224.0.0.0', '232.1.2.3', '239.255.255.255', '223.255.255.255', '240.0.0.0'],
  ['255.255.255.255/32', '255.255.255.255', '255.255.255.255', '255.255.255.255', '255.255.255.254', null],
  // Its very last address is the limited broadcast, a row of its own.
  ['240.0.0.0/4', '240.0.0.0', '247.1.2.3', '255.255.255.254', '239.255.255.255', '255.255.255.255'],
  ['::/128', '::', '::', '::', null, '::1'],
  ['::1/128', '::1', '::1', '::1', '::', '::2'],
  // :: and ::1 are rows of their own; after ::/96 comes the rest of ::/3.
  ['::/96', '::2', '::1.2.3.4', '::ffff:ffff', '::1', '::1:0:0'],
  [
    '64:ff9b:1::/48',
    '64:ff9b:1::',
    '64:ff9b:1:abcd::1',
    '64:ff9b:1:ffff:ffff:ffff:ffff:ffff',
    '64:ff9b:0:ffff:ffff:ffff:ffff:ffff',
    '64:ff9b:2::',
  ],
  [
    '100::/64',
    '100::',
    '100::1234',
    '100::ffff:ffff:ffff:ffff',
    'ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    '100:0:0:1::',
  ],
  [
    '2001::/23',
    '2001::',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    '2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff',
    '2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    '2001:200::',
  ],
  [
    '2001:db8::/32',
    '2001:db8::',
    '2001:db8:85a3::8a2e:370:7334',
    '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff',
    '2001:db7:ffff:ffff:ffff:ffff:ffff:ffff',
    '2001:db9::',
  ],
  [
    '2002::/16',
    '2002::',
    '2002:c000:204::1',
    '2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    '2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    '2003::',
  ],
  [
    '3fff::/20',
    '3fff::',
    '3fff:abc::1',
    '3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff',
    '3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    '3fff:1000::',
  ],
  ['5f00::/16', '5f00::', '5f00:1::1', '5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '5eff:ffff::', '5f01::'],
  ['fc00::/7', 'fc00::', 'fd12:3456::1', 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'fbff:ffff::', 'fe00::'],
  ['fe80::/10', 'fe80::', 'fe80::1', 'febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'fe7f:ffff::', 'fec0::'],
  ['fec0::/10', 'fec0::', 'fec0::1', 'feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'febf:ffff::', 'ff00::'],
  ['ff00::/8', 'ff00::', 'ff02::1', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'feff:ffff::', null],
  // :: to ::1:0:0 are the rows above; 64:ff9b::/96 and ::ffff:0:0/96 inside it carry IPv4.
  ['::/3', '::1:0:0', '1000::1', '1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', null, '2000::'],
  ['4000::/2', '4000::', '6000::1', '7fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '3fff:ffff::', '8000::'],
  ['8000::/1', '8000::', 'a000::1', 'fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '7fff:ffff::', 'fc00::'],
];

describe('the address policy refuses by default', () => {
  it('has a test row for every denied range, and only for those', () => {
    expect(DENIED_TABLE.map(([range]) => range).sort()).toEqual(DENIED_RANGES.map(({ range }) => range).sort());
  });

  it.each(DENIED_TABLE)('%s: refuses its first %s, middle %s and last %s', (range, first, middle, last) => {
    for (const address of [first, middle, last]) {
      const verdict = checkAddress(address, NOTHING_OPENED);
      expect(verdict, address).toMatchObject({ allowed: false, rule: range });
      // The reason names the range (for the log), never anything else of the request.
      expect(verdict.reason.startsWith(`${range}: `), verdict.reason).toBe(true);
    }
  });

  it.each(DENIED_TABLE)('%s: does not decide the addresses just outside it', (range, ...addresses) => {
    const [, , , before, after] = addresses;
    for (const address of [before, after]) {
      if (address !== null) expect(ruleFor(address), address).not.toBe(range);
    }
  });

  it.each([
    '1.0.0.0',
    '1.1.1.1',
    '8.8.8.8',
    '9.255.255.255',
    '11.0.0.0',
    '100.63.255.255',
    '100.128.0.0',
    '126.255.255.255',
    '128.0.0.0',
    '169.253.255.255',
    '169.255.0.0',
    '172.15.255.255',
    '172.32.0.0',
    '191.255.255.255',
    '192.0.1.0',
    '192.0.3.0',
    '192.31.196.1',
    '192.88.100.0',
    '192.167.255.255',
    '192.169.0.0',
    '198.17.255.255',
    '198.20.0.0',
    '203.0.114.0',
    '223.255.255.255',
    '2000::',
    '2001:200::',
    '2001:db7:ffff:ffff:ffff:ffff:ffff:ffff',
    '2001:db9::',
    '2001:4860:4860::8888',
    '2003::',
    '2606:4700:4700::1111',
    '2a00:1450:4001:81c::200e',
    '3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    '3fff:1000::',
    '3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
  ])('allows the global address %s', (address) => {
    expect(checkAddress(address, NOTHING_OPENED)).toEqual({ allowed: true, reason: 'global unicast' });
  });
});

/** ::ffff:a.b.c.d with the IPv4 part as two hex groups, e.g. ::ffff:7f00:1. */
function mappedHex(ipv4: string): string {
  const [a = 0, b = 0, c = 0, d = 0] = ipv4.split('.').map(Number);
  return `::ffff:${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

describe('IPv4-mapped IPv6 addresses are judged as their IPv4 address', () => {
  const ipv4Rows = DENIED_TABLE.filter(([range]) => !range.includes(':'));

  it.each(ipv4Rows)('%s: refuses %s, %s and %s in both mapped forms', (range, first, middle, last) => {
    for (const address of [first, middle, last]) {
      expect(ruleFor(`::ffff:${address}`), `::ffff:${address}`).toBe(range);
      expect(ruleFor(mappedHex(address)), mappedHex(address)).toBe(range);
    }
  });

  it.each([
    ['::ffff:7f00:1', '127.0.0.0/8'],
    ['::FFFF:7F00:0001', '127.0.0.0/8'],
    ['0:0:0:0:0:ffff:7f00:1', '127.0.0.0/8'],
    ['0000:0000:0000:0000:0000:FFFF:7F00:0001', '127.0.0.0/8'],
    ['0:0:0:0:0:ffff:127.0.0.1', '127.0.0.0/8'],
    ['::ffff:a9fe:a9fe', '169.254.0.0/16'],
    ['::ffff:0:0', '0.0.0.0/8'],
    ['::ffff:a00:1', '10.0.0.0/8'],
    ['::ffff:ffff:ffff', '255.255.255.255/32'],
    ['::ffff:808:808', 'allowed'],
    ['::ffff:8.8.8.8', 'allowed'],
  ])('%s: %s', (address, rule) => {
    expect(ruleFor(address)).toBe(rule);
  });
});

describe('NAT64 (64:ff9b::/96) is judged by the IPv4 address it embeds', () => {
  it.each([
    ['64:ff9b::7f00:1', '127.0.0.0/8'],
    ['64:ff9b::127.0.0.1', '127.0.0.0/8'],
    ['64:ff9b:0:0:0:0:a9fe:a9fe', '169.254.0.0/16'],
    ['64:ff9b::c0a8:101', '192.168.0.0/16'],
    ['64:ff9b::', '0.0.0.0/8'],
    ['64:ff9b::808:808', 'allowed'],
    ['64:ff9b::8.8.8.8', 'allowed'],
    ['64:ff9b::ffff:ffff', '255.255.255.255/32'],
  ])('%s: %s', (address, rule) => {
    expect(ruleFor(address)).toBe(rule);
  });

  it('says in its reason that the address came through NAT64', () => {
    expect(checkAddress('64:ff9b::7f00:1', NOTHING_OPENED).reason).toBe(
      'NAT64 64:ff9b::/96 of an IPv4 address: 127.0.0.0/8: loopback, RFC 1122',
    );
  });

  it('is opened by an allowlist entry for the IPv4 address it reaches', () => {
    expect(ruleFor('64:ff9b::7f00:1', parseAddressAllowlist('127.0.0.1/32'))).toBe('allowed');
  });
});

describe('IPv6 text forms', () => {
  it.each([
    ['::1', '::1/128'],
    ['0:0:0:0:0:0:0:1', '::1/128'],
    ['0000:0000:0000:0000:0000:0000:0000:0001', '::1/128'],
    ['::', '::/128'],
    ['0:0:0:0:0:0:0:0', '::/128'],
    ['fe80::1', 'fe80::/10'],
    ['FE80:0:0:0:0:0:0:1', 'fe80::/10'],
    ['fe80::1%eth0', 'fe80::/10'],
    ['fe80::1%1', 'fe80::/10'],
    ['fd00::', 'fc00::/7'],
    ['fd00:0::0', 'fc00::/7'],
    ['2001:db8::', '2001:db8::/32'],
    ['2001:0db8:0000:0000:0000:0000:0000:0000', '2001:db8::/32'],
    ['2001:db8:0:0:1::', '2001:db8::/32'],
    ['2001:DB8::1', '2001:db8::/32'],
    ['1:2:3:4:5:6:7::', '::/3'],
    ['::2:3:4:5:6:7:8', '::/3'],
    ['2606:4700:4700:0:0:0:0:1111', 'allowed'],
  ])('%s: %s', (address, rule) => {
    expect(ruleFor(address)).toBe(rule);
  });

  it.each([
    '',
    'localhost',
    'example.org',
    '127.1',
    '0177.0.0.1',
    '0x7f.0.0.1',
    '2130706433',
    '127.0.0.1.',
    '127.0.0.1%eth0',
    '256.0.0.1',
    ' 127.0.0.1',
    '[::1]',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7',
    '1::2::3',
    ':::',
    ':1::',
    '1::2:',
    '12345::',
    'gggg::',
    '::ffff:999.0.0.1',
    '::ffff:127.0.0.01',
    '1.2.3.4::',
    '1:2:3:4:5:6:7:1.2.3.4',
  ])('refuses %j: not an IP address (it fails closed)', (address) => {
    expect(checkAddress(address, NOTHING_OPENED)).toEqual({
      allowed: false,
      rule: 'not an IP address',
      reason: 'not an IP address',
    });
  });
});

describe('the parser and the ranges agree with Node', () => {
  const anyAddress = fc.oneof(fc.ipV4(), fc.ipV6());

  it('reads exactly the texts node:net isIP reads (without a zone)', () => {
    const alphabet = fc.constantFrom(...'0123456789abcdefABCDEF:.'.split(''));
    fc.assert(
      fc.property(fc.oneof(anyAddress, fc.ipV4Extended(), fc.string({ unit: alphabet, maxLength: 45 })), (text) => {
        expect(parseIp(text) !== undefined, text).toBe(isIP(text) !== 0);
      }),
      { numRuns: 3000 },
    );
  });

  it('puts an address in a range exactly when node:net BlockList does', () => {
    fc.assert(
      fc.property(anyAddress, fc.nat({ max: 128 }), anyAddress, (network, prefixSeed, candidate) => {
        const family = isIP(network) === 4 ? 'ipv4' : 'ipv6';
        const prefix = family === 'ipv4' ? prefixSeed % 33 : prefixSeed;
        const blockList = new BlockList();
        blockList.addSubnet(network, prefix, family);
        const internalPrefix = family === 'ipv4' ? 96 + prefix : prefix;
        const hostBits = BigInt(128 - internalPrefix);
        const value = parseIp(network) ?? -1n;
        const range = { first: (value >> hostBits) << hostBits, prefix: internalPrefix, text: 'test' };
        const candidateValue = parseIp(candidate) ?? -1n;
        expect(inRange(range, candidateValue), `${candidate} in ${network}/${prefix}`).toBe(
          blockList.check(candidate, isIP(candidate) === 4 ? 'ipv4' : 'ipv6'),
        );
      }),
      { numRuns: 3000 },
    );
  });
});

describe('PUSH_GATEWAY_IP_ALLOWLIST opens ranges', () => {
  it('is empty by default and opens nothing', () => {
    expect(parseAddressAllowlist('')).toEqual([]);
    expect(parseAddressAllowlist('  ')).toEqual([]);
    expect(parseAddressAllowlist([])).toEqual([]);
  });

  it('opens 127.0.0.1/32: that address in both forms, not its neighbours nor ::1', () => {
    const allowlist = parseAddressAllowlist('127.0.0.1/32');
    expect(checkAddress('127.0.0.1', allowlist)).toEqual({
      allowed: true,
      reason: 'opened by PUSH_GATEWAY_IP_ALLOWLIST 127.0.0.1/32',
    });
    expect(ruleFor('::ffff:127.0.0.1', allowlist)).toBe('allowed');
    expect(ruleFor('::ffff:7f00:1', allowlist)).toBe('allowed');
    expect(ruleFor('127.0.0.2', allowlist)).toBe('127.0.0.0/8');
    expect(ruleFor('127.0.0.0', allowlist)).toBe('127.0.0.0/8');
    expect(ruleFor('::1', allowlist)).toBe('::1/128');
  });

  it('opens a private /8 and nothing else private', () => {
    const allowlist = parseAddressAllowlist(' 10.0.0.0/8 ');
    for (const address of ['10.0.0.0', '10.1.2.3', '10.255.255.255', '::ffff:a01:203']) {
      expect(ruleFor(address, allowlist), address).toBe('allowed');
    }
    expect(ruleFor('172.16.0.1', allowlist)).toBe('172.16.0.0/12');
    expect(ruleFor('192.168.0.1', allowlist)).toBe('192.168.0.0/16');
    expect(ruleFor('fd00::1', allowlist)).toBe('fc00::/7');
  });

  it('takes several entries, IPv6 ones, bare addresses, mapped ranges and the array form of the file', () => {
    const allowlist = parseAddressAllowlist('fd12:3456::/32, 192.168.7.7,::ffff:172.16.0.0/108');
    expect(allowlist.map(({ text }) => text)).toEqual(['fd12:3456::/32', '192.168.7.7', '::ffff:172.16.0.0/108']);
    expect(ruleFor('fd12:3456:ffff::1', allowlist)).toBe('allowed');
    expect(ruleFor('fd12:3457::1', allowlist)).toBe('fc00::/7');
    expect(ruleFor('192.168.7.7', allowlist)).toBe('allowed');
    expect(ruleFor('192.168.7.8', allowlist)).toBe('192.168.0.0/16');
    expect(ruleFor('172.31.255.255', allowlist)).toBe('allowed');
    expect(parseAddressAllowlist(['127.0.0.1/32', '::1']).map(({ text }) => text)).toEqual(['127.0.0.1/32', '::1']);
  });

  it.each([
    [
      '10.0.0.0/8, 10.0.0.0/33',
      'entry #2 "10.0.0.0/33" has a prefix length of 33, more than the 32 bits of its address',
    ],
    ['::/129', 'entry #1 "::/129" has a prefix length of 129, more than the 128 bits of its address'],
    ['10.0.0.1/8', 'entry #1 "10.0.0.1/8" has bits set after its prefix: the range it lies in is 10.0.0.0/8'],
    ['127.0.0.1/32,fd00::1/8', 'entry #2 "fd00::1/8" has bits set after its prefix: the range it lies in is fd00::/8'],
    ['::1/0', 'entry #1 "::1/0" has bits set after its prefix: the range it lies in is ::/0'],
    [
      '2001:db8:0:0:1::/64',
      'entry #1 "2001:db8:0:0:1::/64" has bits set after its prefix: the range it lies in is 2001:db8::/64',
    ],
    ['10.0.0.0/8,,127.0.0.1', 'entry #2 is empty (two commas in a row, or one at the end?)'],
    ['10.0.0.0/8,', 'entry #2 is empty'],
    ['localhost', 'entry #1 "localhost" does not start with an IPv4 address'],
    ['127.0.0.1/32,127.1/32', 'entry #2 "127.1/32" does not start with an IPv4 address'],
    ['010.0.0.0/8', 'entry #1 "010.0.0.0/8" does not start with an IPv4 address'],
    ['10.0.0.0 /8', 'entry #1 "10.0.0.0 /8" does not start'],
    ['10.0.0.0/08', 'entry #1 "10.0.0.0/08" has a prefix length that is not a whole number'],
    ['10.0.0.0/', 'entry #1 "10.0.0.0/" has a prefix length that is not a whole number'],
    ['10.0.0.0/-1', 'entry #1 "10.0.0.0/-1" has a prefix length that is not a whole number'],
    ['10.0.0.0/8/8', 'entry #1 "10.0.0.0/8/8" has more than one "/"'],
    ['/8', 'entry #1 "/8" has no address before the "/"'],
    ['fe80::1%eth0/64', 'entry #1 "fe80::1%eth0/64" does not start with an IPv4 address'],
  ])('refuses %j: PUSH_GATEWAY_IP_ALLOWLIST %s', (setting, message) => {
    expect(() => parseAddressAllowlist(setting)).toThrow(RangeError);
    expect(() => parseAddressAllowlist(setting)).toThrow(`PUSH_GATEWAY_IP_ALLOWLIST ${message}`);
  });

  it('names an entry of the array form by its position too, and cuts a long one short', () => {
    expect(() => parseAddressAllowlist(['127.0.0.1/32', 'nope'])).toThrow('entry #2 "nope" does not start');
    expect(() => parseAddressAllowlist(['x'.repeat(500)])).toThrow(`entry #1 "${'x'.repeat(60)}…" does not start`);
  });
});

describe('every denied row parses as written', () => {
  it.each(DENIED_RANGES.map(({ range }) => range))('%s', (range) => {
    expect(parseCidr(range).text).toBe(range);
  });
});
