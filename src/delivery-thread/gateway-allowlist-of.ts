import type { Config } from '../config/config-schema.js';
import { ConfigError } from '../config/load-config.js';
import { parseAddressAllowlist } from '../delivery/address-allowlist.js';

/**
 * The gateway address allowlist, from the configuration; a `ConfigError`
 * for a mistyped range. Checked on the worker's main thread before anything
 * starts, so that it stops the worker at start, not at the first push. In a
 * file of its own: the main thread imports this, not the delivery stack
 * (the HTTP client, the scheduler, the journal), which only the delivery
 * thread runs, and which cost the main thread ~4 MB of heap and ~11 MB
 * resident for nothing.
 */
export function gatewayAllowlistOf(delivery: Config['delivery']): ReturnType<typeof parseAddressAllowlist> {
  try {
    return parseAddressAllowlist(delivery.gatewayIpAllowlist);
  } catch (error) {
    throw new ConfigError(
      `invalid configuration: delivery.gatewayIpAllowlist (PUSH_GATEWAY_IP_ALLOWLIST): ${(error as Error).message}`,
    );
  }
}
