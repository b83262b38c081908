import { parseBrokerAddresses, type BrokerAddress, type BrokerUrls } from '../config/broker-urls.js';

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
