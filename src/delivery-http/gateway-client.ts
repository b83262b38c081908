import { isIP } from 'node:net';
import { getCACertificates } from 'node:tls';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { type AddressVerdict, checkAddress } from '../delivery/address-policy.js';
import { checkResolvedAddresses } from '../delivery/address-resolution.js';
import type { CidrRange } from '../delivery/cidr.js';
import { gatewayOrigin } from '../delivery/circuit-breaker-origin.js';
import type { GatewayRequestBody } from '../delivery/gateway-payload.js';
import { addressKey, pickAddress, type ResolvedAddress } from '../delivery/name-resolution.js';
import type { GatewayExchange } from '../delivery/response-outcome.js';
import { GatewayResolver, type GatewayResolverOptions } from './gateway-resolver.js';
import { KeyedSlots, LineFullError, RequestSlots, WithdrawnError } from './request-slots.js';

/**
 * The defaults, and why:
 *
 * - 256 requests in flight per worker. Concurrency is what hides gateway
 *   latency: at 100-200 ms a round trip, 256 sustain 1,300-2,500 requests a
 *   second from one worker (each request may carry several devices), and
 *   the pool adds workers. Each one holds a socket and, under TLS, some tens
 *   of KiB: a few MB at worst. And a worker alone stays well under the point
 *   where Sygnal, the reference gateway, starts answering 502 (512 in flight).
 * - 32 per gateway origin. A slow or dead gateway can hold at most an eighth
 *   of the worker's slots, so deliveries to every other gateway keep flowing
 *   (the circuit breaker then cuts that gateway down to probes); and one
 *   worker opens at most 32 keep-alive connections to any one host.
 * - Per address, the per-origin cap unless set: the same bound for a
 *   server as for one gateway origin, however many names point at it. Pusher URLs are user input: a hundred names of one silent server
 *   would otherwise hold a hundred origins' slots, each for up to 90 s,
 *   and each name's breaker would open only after its own failures.
 * - 16 per user: no handful of accounts (pushers on many gateways, or
 *   gateways that hang) takes the worker's slots; one user's notification
 *   is one request per gateway URL and format, so a real user has a few in
 *   flight at most.
 * - Waiting, per address and per user, holds no slot: a silent address
 *   holds its cap of slots and no more, whatever waits in its line. With
 *   `maxWaitingPerKey`, a request past that line is not sent (`not-sent`,
 *   retried on the device's backoff, and no mark against the gateway's
 *   breaker).
 * - Connect 15 s and response headers 60 s: what Synapse allows a gateway,
 *   which gateways are used to (a gateway may wait on APNs or FCM before it
 *   answers).
 * - Body 64 KiB within 15 s of the headers. The spec's answer is
 *   `{"rejected": [...]}`, a few hundred bytes; the verdict is the status,
 *   already in hand, so a gateway that sends more or drips it gets no more
 *   of the worker's memory or time.
 */
export const GATEWAY_CLIENT_DEFAULTS = {
  maxInFlight: 256,
  maxInFlightPerOrigin: 32,
  maxInFlightPerUser: 16,
  connectTimeoutMs: 15_000,
  headersTimeoutMs: 60_000,
  bodyTimeoutMs: 15_000,
  maxBodyBytes: 64 * 1024,
} as const;

export interface GatewayClientOptions {
  /** `PUSH_GATEWAY_IP_ALLOWLIST`, parsed (address-allowlist.ts): ranges opened despite the address policy. */
  readonly allowlist?: readonly CidrRange[];
  /** Requests in flight at once, all gateways together; more wait in line (first come, first served). */
  readonly maxInFlight?: number;
  /** Requests in flight at once to one gateway origin (scheme, host, port). */
  readonly maxInFlightPerOrigin?: number;
  /**
   * Requests in flight at once to one IP address (whatever the names and
   * ports), and so its connections; as many may wait. Without, the
   * per-origin cap.
   */
  readonly maxInFlightPerAddress?: number;
  /** Requests in flight at once for one user (`send`'s `userId`). */
  readonly maxInFlightPerUser?: number;
  /**
   * Requests that may wait for a slot of one address or one user; past
   * that, a request is `not-sent`. Unbounded by default: a request waiting
   * holds no slot, and the scheduler bounds how many it hands over (one
   * per device queue). A 10,000-member room whose gateways share one
   * address must wait its turn there, not be turned back to a backoff.
   */
  readonly maxWaitingPerKey?: number;
  /** From the start of connecting (TCP and TLS; the name is resolved before) to a connection ready to send on. */
  readonly connectTimeoutMs?: number;
  /** From the request sent to the response's status and headers received (undici times it to about half a second). */
  readonly headersTimeoutMs?: number;
  /** From the headers to the whole body; a body not read in time is dropped, the status stands. */
  readonly bodyTimeoutMs?: number;
  /** The most of a response body that is read; a longer one is dropped whole, the status stands. */
  readonly maxBodyBytes?: number;
  /**
   * Extra trusted CAs (PEM), added to the ones Node trusts by default, never
   * in their place. Operators trust a private CA the standard way, with
   * `NODE_EXTRA_CA_CERTS`, which this client honours without this option;
   * this one is for a process that cannot set its own environment before
   * start (a test with a throwaway CA). Certificates are always verified:
   * there is no option to turn that off.
   */
  readonly extraTrustedCas?: readonly string[];
  /** How names are resolved (gateway-resolver.ts); its defaults without. */
  readonly dns?: GatewayResolverOptions;
}

/** What the caller knows of a request besides its URL and body. */
export interface SendContext {
  /** The user the request is for: their requests share `maxInFlightPerUser`. Without, no per-user cap. */
  readonly userId?: string | undefined;
  /**
   * Ends the request's wait in any line at once: it is then `not-sent`
   * (`withdrawn`). The scheduler aborts it when the request's partition
   * is handed over or lost.
   */
  readonly signal?: AbortSignal | undefined;
  /**
   * Whether the request may still go out, asked after every slot taken and
   * right before the request is written: false makes it `not-sent`
   * (`withdrawn`). The scheduler's answer is its partition's lease (not in
   * doubt), so that nothing waiting in a line goes out once another worker
   * may send for that partition.
   */
  readonly sendable?: (() => boolean) | undefined;
}

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
  readonly #abort = new AbortController();
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
    const origin = gatewayOrigin(url);
    if (target === null || origin === undefined) return NOT_A_GATEWAY_URL;
    // What this request holds, let go of in reverse whatever happens.
    const held: (() => void)[] = [];
    const { userId, signal, sendable } = context;
    // Asked after every wait: the caller may have let the request go meanwhile.
    const withdrawn = () => signal?.aborted === true || (sendable !== undefined && !sendable());
    try {
      if (withdrawn()) return WITHDRAWN;
      if (userId !== undefined) {
        if (!(await taken(this.#userSlots, userId, signal))) return USER_BUSY;
        held.push(() => {
          this.#userSlots.release(userId);
        });
        if (withdrawn()) return WITHDRAWN;
      }
      await this.#originSlots.acquire(origin, signal);
      held.push(() => {
        this.#originSlots.release(origin);
      });
      const destination = await this.#destination(target);
      if ('kind' in destination) return destination;
      const key = addressKey(destination.address);
      // Never undefined (the address passed the policy, which parses it), but a slot needs a key.
      if (key === undefined) return refusedExchange(checkAddress(destination.address, this.#allowlist));
      if (withdrawn()) return WITHDRAWN;
      if (!(await taken(this.#addressSlots, key, signal))) return ADDRESS_BUSY;
      held.push(() => {
        this.#addressSlots.release(key);
      });
      if (withdrawn()) return WITHDRAWN;
      await this.#slots.acquire(signal);
      held.push(() => {
        this.#slots.release();
      });
      // `close` may have come while this request waited.
      if (this.#isClosed()) throw new GatewayClientClosedError();
      // The last moment it can be held back: `#exchange` writes it without awaiting anything first.
      if (withdrawn()) return WITHDRAWN;
      return await this.#exchange(target, destination, body);
    } catch (error) {
      if (error instanceof WithdrawnError) return WITHDRAWN;
      throw error;
    } finally {
      for (const release of held.reverse()) release();
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
    let response: Dispatcher.ResponseData;
    try {
      response = await this.#agent.request({
        // The address itself, so that undici pools connections per address; the name goes as `Host`,
        // from which undici also takes the TLS server name the certificate is verified for.
        origin: `${target.protocol}//${literal}${target.port === '' ? '' : `:${target.port}`}`,
        path: `${target.pathname}${target.search}`,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(byName ? { host: target.host } : {}) },
        // Pending requests are stored as the JSON text they are sent as.
        body: typeof body === 'string' ? body : JSON.stringify(body),
        signal: this.#abort.signal,
      });
    } catch (error) {
      return failedExchange(error);
    }
    const retryAfter = firstValue(response.headers['retry-after']);
    const status = response.statusCode;
    // Only a 2xx body means anything (its `rejected`); any other is read to its end and thrown away.
    const read =
      status >= 200 && status < 300
        ? await readBody(response.body, this.#maxBodyBytes, this.#bodyTimeoutMs)
        : await discardBody(response.body, this.#maxBodyBytes, this.#bodyTimeoutMs);
    return { kind: 'response', status, ...(retryAfter === undefined ? {} : { retryAfter }), ...read };
  }
}

const NOT_A_GATEWAY_URL: GatewayExchange = {
  kind: 'address-refused',
  rule: 'not an http(s) URL',
  reason: 'the pusher URL is not an http(s) URL with a host',
};

const USER_BUSY: GatewayExchange = { kind: 'not-sent', reason: 'user-busy' };
const ADDRESS_BUSY: GatewayExchange = { kind: 'not-sent', reason: 'address-busy' };
const WITHDRAWN: GatewayExchange = { kind: 'not-sent', reason: 'withdrawn' };

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

/** A connection the address policy refused; carried through Node and undici to `failedExchange`. */
class AddressRefusedError extends Error {
  readonly rule: string;
  readonly reason: string;

  constructor(verdict: Extract<AddressVerdict, { allowed: false }>) {
    super(`address refused: ${verdict.reason}`);
    this.name = 'AddressRefusedError';
    this.rule = verdict.rule;
    this.reason = verdict.reason;
  }
}

/**
 * undici's connector, with the address policy around it: the address (the
 * client only ever connects to IP addresses, see `#exchange`) is checked
 * before any connection is opened, anything else refused, so that no name
 * is ever looked up here; and a connected socket whose peer address is
 * refused is destroyed before undici writes on it, whatever led there.
 */
function checkedConnector(
  connect: buildConnector.connector,
  allowlist: readonly CidrRange[],
): buildConnector.connector {
  return (options, callback) => {
    // undici takes an IPv6 origin's brackets off before it calls here; not a promise this check should rest on.
    const host = options.hostname.startsWith('[') ? options.hostname.slice(1, -1) : options.hostname;
    const verdict = checkAddress(host, allowlist);
    if (!verdict.allowed) {
      // Asynchronously, as a connection attempt ends: undici does not expect its callback within the call.
      queueMicrotask(() => {
        callback(new AddressRefusedError(verdict), null);
      });
      return;
    }
    connect(options, (error, socket) => {
      if (error !== null) {
        callback(error, null);
        return;
      }
      const peer = socket.remoteAddress;
      if (peer === undefined) {
        // Closed as soon as it opened: nothing to check, nothing sent, worth another try.
        socket.destroy();
        const closed = Object.assign(new Error('the connection closed before its address could be checked'), {
          code: 'ERR_SOCKET_CLOSED',
        });
        callback(closed, null);
        return;
      }
      const verdict = checkAddress(peer, allowlist);
      if (!verdict.allowed) {
        socket.destroy();
        callback(new AddressRefusedError(verdict), null);
        return;
      }
      callback(null, socket);
    });
  };
}

/** undici's errors that are not the network's or the gateway's doing: a closed client, a bad argument. */
const NOT_A_NETWORK_FAILURE = new Set([
  'UND_ERR_INVALID_ARG',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  'UND_ERR_NOT_SUPPORTED',
  'UND_ERR_INVALID_RETURN_VALUE',
]);

/** A request that got no response, as an exchange. */
function failedExchange(error: unknown): GatewayExchange {
  const refused = refusal(error);
  if (refused !== undefined) return { kind: 'address-refused', rule: refused.rule, reason: refused.reason };
  const code = errorCode(error);
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return { kind: 'timeout', phase: 'connect' };
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return { kind: 'timeout', phase: 'headers' };
  if (code !== undefined && NOT_A_NETWORK_FAILURE.has(code)) throw error;
  return code === undefined ? { kind: 'connection-error' } : { kind: 'connection-error', reason: code };
}

/** The refusal that ended a connection attempt, wherever Node or undici put it (the error or one of its causes). */
function refusal(error: unknown): AddressRefusedError | undefined {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth += 1) {
    if (cause instanceof AddressRefusedError) return cause;
  }
  return undefined;
}

function errorCode(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code } = error as { code?: unknown };
  return typeof code === 'string' ? code : error.name;
}

/**
 * At most `maxBytes` of a response body, within `timeoutMs`. Over the cap,
 * too slow, or broken off: the body is dropped whole (and the connection
 * with it, since the rest was not read), never a prefix, which could parse
 * as a different `rejected` list than the whole body says.
 */
async function readBody(
  body: Dispatcher.ResponseData['body'],
  maxBytes: number,
  timeoutMs: number,
): Promise<{ body?: string; bodyDropped?: 'too-large' | 'timeout' | 'connection-error' }> {
  const chunks: Buffer[] = [];
  let size = 0;
  // An object, not a let: the timer sets it while the loop below awaits.
  const deadline = { passed: false };
  const timer = setTimeout(() => {
    deadline.passed = true;
    body.destroy(new Error('the response body took too long'));
  }, timeoutMs);
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      size += chunk.length;
      // Leaving the loop destroys the stream: the rest is never read.
      if (size > maxBytes) return { bodyDropped: 'too-large' };
      chunks.push(chunk);
    }
  } catch (error) {
    const timeout = deadline.passed || errorCode(error) === 'UND_ERR_BODY_TIMEOUT';
    return { bodyDropped: timeout ? 'timeout' : 'connection-error' };
  } finally {
    clearTimeout(timer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? {} : { body: text };
}

/**
 * Reads a body nobody needs to its end, keeping none of it, so that its
 * connection can carry the next request; one longer than `maxBytes`, or
 * slower than `timeoutMs`, is cut off with its connection instead. A
 * gateway failing with large bodies (a 503 page per request) thus costs a
 * bounded read, never memory.
 */
async function discardBody(
  body: Dispatcher.ResponseData['body'],
  maxBytes: number,
  timeoutMs: number,
): Promise<Record<string, never>> {
  try {
    await body.dump({ limit: maxBytes, signal: AbortSignal.timeout(timeoutMs) });
  } catch {
    // Too slow, or broken off: the connection goes with it, the status stands.
  }
  return {};
}

function firstValue(header: string | string[] | undefined): string | undefined {
  return Array.isArray(header) ? header[0] : header;
}

/** The options without keys set to undefined, so that spreading them over the defaults keeps the defaults. */
function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}
