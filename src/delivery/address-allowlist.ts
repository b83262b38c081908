import { type CidrRange, parseCidr } from './cidr.js';

/**
 * The operator's `PUSH_GATEWAY_IP_ALLOWLIST`: CIDR ranges (IPv4 or IPv6,
 * comma-separated in the variable, an array in the file) that deliveries may
 * reach although address-policy.ts refuses them by default, e.g. a gateway
 * on the operator's private network, or 127.0.0.1/32 in tests. Empty by
 * default: nothing is opened.
 *
 * A bare address is the range of that one address. Any entry that is not a
 * range refuses the whole setting, with a `RangeError` naming the entry by
 * its position and quoting it (a range is no secret): a typo must stop the
 * worker at start, not silently open or close something.
 */
export function parseAddressAllowlist(setting: string | readonly string[]): CidrRange[] {
  if (typeof setting === 'string' && setting.trim() === '') return [];
  const entries = typeof setting === 'string' ? setting.split(',') : setting;
  return entries.map((raw, index) => {
    const entry = raw.trim();
    const named = `PUSH_GATEWAY_IP_ALLOWLIST entry #${index + 1}`;
    if (entry === '') throw new RangeError(`${named} is empty (two commas in a row, or one at the end?)`);
    const quoted = JSON.stringify(entry.length > 60 ? `${entry.slice(0, 60)}…` : entry);
    try {
      return parseCidr(entry);
    } catch (error) {
      throw new RangeError(`${named} ${quoted} ${error instanceof Error ? error.message : String(error)}`, {
        cause: error,
      });
    }
  });
}
