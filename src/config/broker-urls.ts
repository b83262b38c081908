/**
 * The broker URL setting (`amqp.url`, AMQP_URL) read into the nodes it names:
 * part of the configuration, so that an invalid list is refused at start.
 */

/** One broker node the service may connect to. */
export interface BrokerAddress {
  /** The URL to connect with, credentials included: never log it. */
  readonly url: string;
  /** `host:port`, safe to log and to put in a metric label. */
  readonly label: string;
}

/** The configured broker URL(s): one URL, a comma-separated list of them, or an array. */
export type BrokerUrls = string | readonly string[];

const DEFAULT_PORTS: Readonly<Record<string, string>> = { 'amqp:': '5672', 'amqps:': '5671' };

/**
 * The broker addresses of a setting, in the order given. Each entry is a
 * whole `amqp://` or `amqps://` URL (credentials, vhost and query of its
 * own: nodes of one cluster usually share them, but nothing here assumes
 * it). Throws a `RangeError` naming the entry that is not one; the same
 * node twice is refused too, since it would get twice the share of a pool.
 */
export function parseBrokerAddresses(urls: BrokerUrls): BrokerAddress[] {
  const entries = (typeof urls === 'string' ? urls.split(',') : [...urls]).map((entry) => entry.trim());
  if (entries.length === 0 || entries.every((entry) => entry === '')) throw new RangeError('no broker URL is given');
  const addresses = entries.map((entry, index) => parseOne(entry, index));
  const labels = new Set<string>();
  for (const { label } of addresses) {
    if (labels.has(label)) throw new RangeError(`broker ${label} is listed twice`);
    labels.add(label);
  }
  return addresses;
}

/**
 * One entry. Errors name the entry by its position and never echo it: an
 * entry that does not parse may carry its password anywhere.
 */
function parseOne(entry: string, index: number): BrokerAddress {
  const position = `broker URL #${index + 1}`;
  if (entry === '') throw new RangeError(`${position} is empty (two commas in a row, or one at the end?)`);
  if (/[,\s]/.test(entry))
    throw new RangeError(`${position} contains a comma or a space: give each node as a URL of its own`);
  let parsed: URL;
  try {
    parsed = new URL(entry);
  } catch {
    throw new RangeError(`${position} is not a URL`);
  }
  const defaultPort = DEFAULT_PORTS[parsed.protocol];
  if (defaultPort === undefined || !entry.toLowerCase().startsWith(`${parsed.protocol}//`)) {
    throw new RangeError(`${position} must start with amqp:// or amqps://`);
  }
  if (parsed.hostname === '') throw new RangeError(`${position} names no host`);
  return { url: entry, label: `${parsed.hostname}:${parsed.port === '' ? defaultPort : parsed.port}` };
}
