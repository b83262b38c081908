import { EventEmitter } from 'node:events';
import { isIP } from 'node:net';
import { getCACertificates } from 'node:tls';
import { Agent, buildConnector } from 'undici';
import { type AddressVerdict, checkAddress } from '../delivery/address-policy.js';
import { checkResolvedAddresses } from '../delivery/address-resolution.js';
import type { CidrRange } from '../delivery/cidr.js';
import { originOf } from '../delivery/circuit-breaker-origin.js';
import type { GatewayRequestBody } from '../delivery/gateway-payload.js';
import { addressKey, pickAddress, type ResolvedAddress } from '../delivery/name-resolution.js';
import type { GatewayExchange } from '../delivery/response-outcome.js';
import { checkedConnector } from './checked-connector.js';
import { GatewayExchangeHandler } from './gateway-exchange.js';
import { GATEWAY_CLIENT_DEFAULTS, type GatewayClientOptions, type SendContext } from './gateway-client-options.js';
import { GatewayResolver } from './gateway-resolver.js';
import { KeyedSlots, LineFullError, RequestSlots, WithdrawnError } from './request-slots.js';

/** `send` after `close` (or while waiting for a slot when `close` came): the caller's mistake, not the gateway's. */
export class GatewayClientClosedError extends Error {
  constructor() {
    super('the push gateway client is closed');
    this.name = 'GatewayClientClosedError';
  }
}

/**
 * The HTTP client that sends one push gateway request at a time per call:
 * POST the body to the pusher's URL, and say what happened as a
 * `GatewayExchange` for `classifyExchange`. A thin adapter: what to send,
 * when to retry and what an answer means are decided in src/delivery/.
 *
 * - One undici `Agent`: a keep-alive connection pool per gateway origin,
 *   reused across requests (a TLS handshake per push would cost more than
 *   the push).
 * - A request takes, in this order: its user's slot (`maxInFlightPerUser`),
 *   its origin's (`maxInFlightPerOrigin`), then resolves the origin's name
 *   (gateway-resolver.ts: c-ares, cached, never the threadpool), takes the
 *   slot of the one address it will connect to (`maxInFlightPerAddress`),
 *   and last a global one (`maxInFlight`). Each is held until the answer
 *   is read. In that order, a request waiting in one line holds none of
 *   the slots further down that others need: requests lined up for one
 *   busy gateway hold no global slot, a busy user's hold no origin's. The
 *   user and address lines are bounded (as long as their cap): past that
 *   the request is `not-sent`.
 * - A request the caller withdraws (`signal`, `sendable`) leaves its line
 *   and is never written: asked after every slot and right before the
 *   write, since a request queued behind a silent gateway may get its
 *   slot long after its partition moved to another worker.
 * - The request is sent to exactly the address whose slot it holds: undici
 *   pools connections per address and port, and the name travels in the
 *   `Host` header and as the TLS server name (certificates are verified
 *   for the name). So requests on a connection always count against the
 *   address that connection goes to.
 * - Redirects are never followed: the Agent has no redirect handling, a 3xx
 *   comes back as it is (a pusher URL must not lead to an address it does
 *   not name).
 * - SSRF: the address policy (src/delivery/address-policy.ts) is applied to
 *   the addresses actually connected to. A name is resolved once, and
 *   refused whole if any address of the answer is; the address picked
 *   from the answer (or the URL's IP literal) is checked again before
 *   connecting, and every connected socket's `remoteAddress` before a byte
 *   of the request is written. The connector refuses anything but an IP
 *   address: no name is looked up behind the policy's back. A refused
 *   address is `address-refused`, and no request was sent.
 * - TLS certificates are always verified (see `extraTrustedCas`).
 * - Both http and https URLs are sent as given: that pusher URLs are https
 *   is checked where they are set (`set_pusher`), and plain HTTP serves a
 *   gateway on loopback in tests and the bench.
 *
 * Nothing is logged here: the body carries pushkeys (device tokens) and the
 * URL is the user's. The caller logs the exchange, with `pushkeyTag`.
 */
export class GatewayClient {
  readonly #agent: Agent;
  readonly #resolver: GatewayResolver;
  readonly #allowlist: readonly CidrRange[];
  readonly #slots: RequestSlots;
  readonly #userSlots: KeyedSlots;
  readonly #originSlots: KeyedSlots;
  readonly #addressSlots: KeyedSlots;
  readonly #maxBodyBytes: number;
  readonly #bodyTimeoutMs: number;
  /** Aborts every request in flight (`destroy`). */
  readonly #abort = new InFlightAbort();
  #closing: Promise<void> | undefined;

  constructor(options: GatewayClientOptions = {}) {
    const defined = { ...GATEWAY_CLIENT_DEFAULTS, ...definedOnly(options) };
    const settings = {
      ...defined,
      maxInFlightPerAddress: options.maxInFlightPerAddress ?? defined.maxInFlightPerOrigin,
    };
    // A mistyped setting stops the worker at start, not at the first push.
    for (const key of [...Object.keys(GATEWAY_CLIENT_DEFAULTS), 'maxInFlightPerAddress'] as const) {
      const value = settings[key as keyof typeof GATEWAY_CLIENT_DEFAULTS | 'maxInFlightPerAddress'];
      if (!Number.isSafeInteger(value) || value < 1)
        throw new RangeError(`${key} must be a whole number ≥ 1, not ${value}`);
    }
    const allowlist = options.allowlist ?? [];
    this.#allowlist = allowlist;
    this.#slots = new RequestSlots(settings.maxInFlight);
    const line = options.maxWaitingPerKey ?? Number.POSITIVE_INFINITY;
    this.#userSlots = new KeyedSlots(settings.maxInFlightPerUser, line);
    this.#originSlots = new KeyedSlots(settings.maxInFlightPerOrigin);
    this.#addressSlots = new KeyedSlots(settings.maxInFlightPerAddress, line);
    this.#resolver = new GatewayResolver(options.dns);
    this.#maxBodyBytes = settings.maxBodyBytes;
    this.#bodyTimeoutMs = settings.bodyTimeoutMs;
    const extraCas = options.extraTrustedCas ?? [];
    const connect = checkedConnector(
      buildConnector({
        // `ca` replaces Node's trust store: the default store (bundled, NODE_EXTRA_CA_CERTS, system if enabled) goes first.
        ...(extraCas.length === 0 ? {} : { ca: [...getCACertificates('default'), ...extraCas] }),
        timeout: settings.connectTimeoutMs,
      }),
      allowlist,
    );
    this.#agent = new Agent({
      connect,
      // Pools are per address and port (see `#exchange`): one request per connection at a time (no
      // pipelining), and never more connections to an address than its slots, nor than one origin's
      // (a gateway of one name gets no more connections than before; names sharing an address share them).
      connections: Math.min(settings.maxInFlightPerOrigin, settings.maxInFlightPerAddress),
      pipelining: 1,
      headersTimeout: settings.headersTimeoutMs,
      // The whole body is bounded by `bodyTimeoutMs` below; this bounds each wait for data within it.
      bodyTimeout: settings.bodyTimeoutMs,
    });
  }

  /**
   * POSTs one notify request and says what happened. Never throws for what
   * the network or the gateway did: a refused address, a connection error, a
   * timeout or any answer at all is an exchange. Rejects only with
   * `GatewayClientClosedError` (the client is closed) or for a bug.
   */
  async send(url: string, body: GatewayRequestBody | string, context: SendContext = {}): Promise<GatewayExchange> {
    if (this.#isClosed()) throw new GatewayClientClosedError();
    const target = URL.parse(url);
    const origin = target === null ? undefined : originOf(target);
    if (target === null || origin === undefined) return NOT_A_GATEWAY_URL;
    // What this request holds, let go of in reverse whatever happens (flags, not closures: one send per device).
    let heldUser: string | undefined;
    let heldOrigin = false;
    let heldAddress: string | undefined;
    let heldGlobal = false;
    const { userId, signal, sendable } = context;
    try {
      if (withdrawn(signal, sendable)) return WITHDRAWN;
      if (userId !== undefined) {
        if (!(await taken(this.#userSlots, userId, signal))) return USER_BUSY;
        heldUser = userId;
        if (withdrawn(signal, sendable)) return WITHDRAWN;
      }
      await this.#originSlots.acquire(origin, signal);
      heldOrigin = true;
      const destination = await this.#destination(target);
      if ('kind' in destination) return destination;
      const key = addressKey(destination.address);
      // Never undefined (the address passed the policy, which parses it), but a slot needs a key.
      if (key === undefined) return refusedExchange(checkAddress(destination.address, this.#allowlist));
      if (withdrawn(signal, sendable)) return WITHDRAWN;
      if (!(await taken(this.#addressSlots, key, signal))) return ADDRESS_BUSY;
      heldAddress = key;
      if (withdrawn(signal, sendable)) return WITHDRAWN;
      await this.#slots.acquire(signal);
      heldGlobal = true;
      // `close` may have come while this request waited.
      if (this.#isClosed()) throw new GatewayClientClosedError();
      // The last moment it can be held back: `#exchange` writes it without awaiting anything first.
      if (withdrawn(signal, sendable)) return WITHDRAWN;
      return await this.#exchange(target, destination, body);
    } catch (error) {
      if (error instanceof WithdrawnError) return WITHDRAWN;
      throw error;
    } finally {
      if (heldGlobal) this.#slots.release();
      if (heldAddress !== undefined) this.#addressSlots.release(heldAddress);
      if (heldOrigin) this.#originSlots.release(origin);
      if (heldUser !== undefined) this.#userSlots.release(heldUser);
    }
  }

  /**
   * Like `close`, but requests in flight are aborted at once (each then ends
   * as a connection error): for a shutdown that cannot wait for a gateway
   * that hangs. Through their signal, not `Agent.destroy`: undici's
   * `Agent.close` lets go of its pools, and a destroy after it (an earlier
   * `close`, or the one here) aborts nothing.
   */
  async destroy(): Promise<void> {
    this.#abort.abort();
    await this.close();
  }

  /**
   * Stops taking requests: those waiting for a slot are refused
   * (`GatewayClientClosedError`), those in flight finish (each within its
   * timeouts), then the connections close. Calling it again waits for the
   * same close.
   */
  async close(): Promise<void> {
    if (this.#closing === undefined) {
      const closed = new GatewayClientClosedError();
      for (const slots of [this.#slots, this.#userSlots, this.#originSlots, this.#addressSlots])
        slots.refuseWaiting(closed);
      this.#resolver.cancel();
      this.#closing = this.#agent.close();
    }
    await this.#closing;
  }

  /** Requests holding or waiting for slots, by kind of key: for tests, which check that idle keys are forgotten. */
  get keysHeld(): { readonly users: number; readonly origins: number; readonly addresses: number } {
    return { users: this.#userSlots.keys, origins: this.#originSlots.keys, addresses: this.#addressSlots.keys };
  }

  /** A method, not a field test: the answer changes while `send` awaits. */
  #isClosed(): boolean {
    return this.#closing !== undefined;
  }

  /**
   * The one address this request will connect to, or why there is none: the
   * URL's IP literal, or its name resolved (a failed look-up is a
   * connection error), after the address policy.
   */
  async #destination(target: URL): Promise<ResolvedAddress | GatewayExchange> {
    // The URL keeps an IPv6 literal in brackets.
    const host = target.hostname.startsWith('[') ? target.hostname.slice(1, -1) : target.hostname;
    const family = isIP(host);
    if (family === 4 || family === 6) {
      const verdict = checkAddress(host, this.#allowlist);
      return verdict.allowed ? { address: host, family } : refusedExchange(verdict);
    }
    const name = await this.#resolver.resolve(host);
    if (!name.ok) return { kind: 'connection-error', reason: name.code };
    const verdict = checkResolvedAddresses(name.addresses, this.#allowlist);
    if (!verdict.allowed) return refusedExchange(verdict);
    // Never undefined: an empty answer is refused above.
    return pickAddress(name.addresses) ?? refusedExchange(verdict);
  }

  async #exchange(
    target: URL,
    destination: ResolvedAddress,
    body: GatewayRequestBody | string,
  ): Promise<GatewayExchange> {
    const literal = destination.family === 6 ? `[${destination.address}]` : destination.address;
    const byName = literal !== target.hostname;
    const limits = { maxBodyBytes: this.#maxBodyBytes, bodyTimeoutMs: this.#bodyTimeoutMs };
    return new Promise((settle, fail) => {
      this.#agent.dispatch(
        {
          // The address itself, so that undici pools connections per address; the name goes as `Host`,
          // from which undici also takes the TLS server name the certificate is verified for.
          origin: `${target.protocol}//${literal}${target.port === '' ? '' : `:${target.port}`}`,
          path: `${target.pathname}${target.search}`,
          method: 'POST',
          headers: byName ? { 'content-type': 'application/json', host: target.host } : JSON_CONTENT,
          // Pending requests are stored as the JSON text they are sent as.
          body: typeof body === 'string' ? body : JSON.stringify(body),
        },
        new GatewayExchangeHandler(settle, fail, limits, this.#abort),
      );
    });
  }
}

const JSON_CONTENT = { 'content-type': 'application/json' } as const;

const NOT_A_GATEWAY_URL: GatewayExchange = {
  kind: 'address-refused',
  rule: 'not an http(s) URL',
  reason: 'the pusher URL is not an http(s) URL with a host',
};

const USER_BUSY: GatewayExchange = { kind: 'not-sent', reason: 'user-busy' };
const ADDRESS_BUSY: GatewayExchange = { kind: 'not-sent', reason: 'address-busy' };
const WITHDRAWN: GatewayExchange = { kind: 'not-sent', reason: 'withdrawn' };

/** Asked after every wait: the caller may have let the request go meanwhile. */
function withdrawn(signal: AbortSignal | undefined, sendable: (() => boolean) | undefined): boolean {
  return signal?.aborted === true || (sendable !== undefined && !sendable());
}

/**
 * The signal of every request in flight, for `destroy`: an EventEmitter,
 * which undici takes as well as an AbortSignal, since an EventTarget
 * compares each new listener with all it holds (hundreds in flight, one
 * added per request).
 */
class InFlightAbort extends EventEmitter {
  aborted = false;
  reason: Error | undefined;

  constructor() {
    super();
    // One listener per request in flight: as many as the global cap.
    this.setMaxListeners(0);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = Object.assign(new Error('the push gateway client was destroyed'), { name: 'AbortError' });
    this.emit('abort');
  }
}

/** Takes a slot of the key; false when its line is full (nothing taken). */
async function taken(slots: KeyedSlots, key: string, signal: AbortSignal | undefined): Promise<boolean> {
  try {
    await slots.acquire(key, signal);
    return true;
  } catch (error) {
    if (error instanceof LineFullError) return false;
    throw error;
  }
}

function refusedExchange(verdict: AddressVerdict): GatewayExchange {
  return verdict.allowed
    ? { kind: 'address-refused', rule: 'not an IP address', reason: 'no address to connect to' }
    : { kind: 'address-refused', rule: verdict.rule, reason: verdict.reason };
}

/** The options without keys set to undefined, so that spreading them over the defaults keeps the defaults. */
function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}
