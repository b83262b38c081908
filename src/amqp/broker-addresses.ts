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
  if (/[,\s]/.test(entry)) throw new RangeError(`${position} contains a comma or a space: give each node as a URL of its own`);
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

/**
 * Which node to try next. The list is shuffled once per process, so that
 * a pool of workers given the same list spreads over the nodes instead of
 * all landing on the first. After a loss the next node is tried at once,
 * round-robin; only when a whole round (every node once, in a row) failed
 * does the caller wait before the next round.
 */
export class AddressRotation {
  readonly #addresses: readonly BrokerAddress[];
  #next = 0;
  #failuresInARow = 0;
  #rounds = 0;

  constructor(addresses: readonly BrokerAddress[], random: () => number = Math.random) {
    if (addresses.length === 0) throw new RangeError('no broker address to rotate over');
    this.#addresses = shuffle(addresses, random);
  }

  /** Every address, in the order this process tries them. */
  get order(): readonly BrokerAddress[] {
    return this.#addresses;
  }

  /** The address of the next attempt (and moves past it). */
  take(): BrokerAddress {
    const address = this.#addresses[this.#next % this.#addresses.length];
    this.#next = (this.#next + 1) % this.#addresses.length;
    // The constructor refuses an empty list, so there always is one.
    return address as BrokerAddress;
  }

  /**
   * The attempt at the address last taken failed. Returns the number of
   * whole rounds failed so far when this failure completed one (wait before
   * the next attempt), `undefined` when another node of this round is
   * still to be tried (try it at once).
   */
  failed(): number | undefined {
    this.#failuresInARow += 1;
    if (this.#failuresInARow < this.#addresses.length) return undefined;
    this.#failuresInARow = 0;
    this.#rounds += 1;
    return this.#rounds;
  }

  /** Connected: the next loss starts a fresh round, at the node after this one. */
  succeeded(): void {
    this.#failuresInARow = 0;
    this.#rounds = 0;
  }
}

/** Fisher–Yates over a copy. */
function shuffle<T>(items: readonly T[], random: () => number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    const a = copy[i] as T;
    copy[i] = copy[j] as T;
    copy[j] = a;
  }
  return copy;
}

/** The first node's URL, for a tool that talks to one node (a benchmark's echo consumer, a test's inspection). */
export function firstBrokerUrl(urls: BrokerUrls): string {
  const [first] = parseBrokerAddresses(urls);
  return (first as BrokerAddress).url;
}
