import { lookup } from 'node:dns/promises';
import { describe, expect, it } from 'vitest';
import { parseAddressAllowlist } from '../../src/delivery/address-allowlist.js';
import { checkResolvedAddresses } from '../../src/delivery/address-resolution.js';

/**
 * The policy is applied to what a look-up answered, i.e. to the addresses
 * that will be connected to, not to the name in the URL.
 */
describe('the address policy on a look-up answer', () => {
  it('refuses localhost as dns.lookup answers it: the name says nothing, its address decides', async () => {
    const answer = await lookup('localhost', { all: true });
    expect(answer.length).toBeGreaterThan(0);
    const verdict = checkResolvedAddresses(answer, []);
    expect(verdict.allowed).toBe(false);
    expect(verdict.reason).toMatch(/^the name resolved to a refused address: (127\.0\.0\.0\/8|::1\/128): loopback/);
  });

  it('lets a test reach localhost once the allowlist opens both loopback addresses', async () => {
    const answer = await lookup('localhost', { all: true });
    expect(checkResolvedAddresses(answer, parseAddressAllowlist('127.0.0.1/32,::1/128')).allowed).toBe(true);
  });

  it.each([
    [[{ address: '127.0.0.1', family: 4 }], '127.0.0.0/8'],
    [[{ address: '::ffff:169.254.169.254', family: 6 }], '169.254.0.0/16'],
    // One bad address refuses the name whole: the connection might try any of them.
    [
      [
        { address: '2606:4700:4700::1111', family: 6 },
        { address: '10.0.0.5', family: 4 },
      ],
      '10.0.0.0/8',
    ],
    [
      [
        { address: '8.8.8.8', family: 4 },
        { address: 'fe80::1%eth0', family: 6 },
      ],
      'fe80::/10',
    ],
    [[], 'no address'],
    [[{ address: 'not-an-address', family: 4 }], 'not an IP address'],
  ])('refuses the answer %j (%s)', (answer, rule) => {
    expect(checkResolvedAddresses(answer, [])).toMatchObject({ allowed: false, rule });
  });

  it('allows an answer of global addresses only', () => {
    const answer = [
      { address: '8.8.8.8', family: 4 },
      { address: '2001:4860:4860::8888', family: 6 },
    ];
    expect(checkResolvedAddresses(answer, [])).toEqual({
      allowed: true,
      reason: 'every address of the name is allowed',
    });
  });
});
