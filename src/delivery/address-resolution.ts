import { type AddressVerdict, checkAddress } from './address-policy.js';
import type { CidrRange } from './cidr.js';

/**
 * The address policy applied to a DNS answer, i.e. to what will actually be
 * connected to: the HTTP client resolves the gateway's name once, passes
 * the answer through here, and connects only to an address of that answer
 * (name-resolution.ts's `pickAddress`). No second, separate look-up: a
 * name whose answer changes between a check and the connection (DNS
 * rebinding) would walk around it.
 *
 * A name is refused whole when any of its addresses is refused, not
 * filtered down to the good ones: a name that points into the operator's
 * network is a mistake or an attack either way, and which address is
 * picked must not decide whether it gets through.
 *
 * The client also checks the address it connects to before connecting and
 * the connected socket's `remoteAddress` with `checkAddress`; that check
 * alone would be enough, this one refuses a name before a slot is taken
 * for it.
 */
export function checkResolvedAddresses(
  answer: readonly { readonly address: string }[],
  allowlist: readonly CidrRange[],
): AddressVerdict {
  if (answer.length === 0) return { allowed: false, rule: 'no address', reason: 'the name resolved to no address' };
  for (const { address } of answer) {
    const verdict = checkAddress(address, allowlist);
    if (!verdict.allowed) return { ...verdict, reason: `the name resolved to a refused address: ${verdict.reason}` };
  }
  return { allowed: true, reason: 'every address of the name is allowed' };
}
