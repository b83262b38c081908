/**
 * The `host` label of the delivery metrics. Pusher URLs are user input, so
 * the set of gateway hosts is unbounded, and each label value is a time
 * series kept for the life of the process: the first `max` hosts seen get
 * their own value, every later one shares `other`. A homeserver's pushers
 * overwhelmingly point at a handful of gateways (the apps' own), which are
 * among the first seen.
 */
export class HostLabels {
  readonly #max: number;
  readonly #known = new Set<string>();

  constructor(max: number) {
    this.#max = max;
  }

  /** The label for a gateway URL's host (`host:port` as the URL gives it), `invalid` for a URL that does not parse. */
  labelOf(url: string): string {
    const host = URL.parse(url)?.host;
    if (host === undefined || host === '') return 'invalid';
    if (this.#known.has(host)) return host;
    if (this.#known.size >= this.#max) return 'other';
    this.#known.add(host);
    return host;
  }
}
