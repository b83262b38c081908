import { lookup as dnsLookup } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { getCACertificates } from 'node:tls';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { type AddressVerdict, checkAddress } from '../delivery/address-policy.js';
import { checkResolvedAddresses } from '../delivery/address-resolution.js';
import type { CidrRange } from '../delivery/cidr.js';
import { gatewayOrigin } from '../delivery/circuit-breaker-origin.js';
import type { GatewayRequestBody } from '../delivery/gateway-payload.js';
import type { GatewayExchange } from '../delivery/response-outcome.js';
import { RequestSlots } from './request-slots.js';

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
  /** Requests in flight at once to one gateway origin (scheme, host, port), and so its connections. */
  readonly maxInFlightPerOrigin?: number;
  /** From the start of connecting (DNS and TLS included) to a connection ready to send on. */
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
 * - At most `maxInFlight` requests in flight, and `maxInFlightPerOrigin` per
 *   origin; the rest wait in line. A request takes its origin's slot before
 *   a global one, so requests lined up for one busy gateway hold none of
 *   the global slots other gateways need.
 * - Redirects are never followed: the Agent has no redirect handling, a 3xx
 *   comes back as it is (a pusher URL must not lead to an address it does
 *   not name).
 * - SSRF: the address policy (src/delivery/address-policy.ts) is applied to
 *   the addresses actually connected to. A name is resolved once, by the
 *   connection's own `lookup`, and refused whole if any address of the
 *   answer is; an IP literal (which Node connects to without a look-up) is
 *   checked before connecting; and every connected socket's `remoteAddress`
 *   is checked before a byte of the request is written. A refused address
 *   is `address-refused`, and no request was sent.
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
  readonly #slots: RequestSlots;
  readonly #maxInFlightPerOrigin: number;
  /** Only origins with a request in flight or waiting: forgotten when idle, so a million pushers' hosts cost nothing. */
  readonly #originSlots = new Map<string, RequestSlots>();
  readonly #maxBodyBytes: number;
  readonly #bodyTimeoutMs: number;
  #closing: Promise<void> | undefined;

  constructor(options: GatewayClientOptions = {}) {
    const settings = { ...GATEWAY_CLIENT_DEFAULTS, ...definedOnly(options) };
    // A mistyped setting stops the worker at start, not at the first push.
    for (const key of Object.keys(GATEWAY_CLIENT_DEFAULTS) as (keyof typeof GATEWAY_CLIENT_DEFAULTS)[]) {
      const value = settings[key];
      if (!Number.isSafeInteger(value) || value < 1)
        throw new RangeError(`${key} must be a whole number ≥ 1, not ${value}`);
    }
    const allowlist = options.allowlist ?? [];
    this.#slots = new RequestSlots(settings.maxInFlight);
    this.#maxInFlightPerOrigin = settings.maxInFlightPerOrigin;
    this.#maxBodyBytes = settings.maxBodyBytes;
    this.#bodyTimeoutMs = settings.bodyTimeoutMs;
    const extraCas = options.extraTrustedCas ?? [];
    const connect = checkedConnector(
      buildConnector({
        // `ca` replaces Node's trust store: the default store (bundled, NODE_EXTRA_CA_CERTS, system if enabled) goes first.
        ...(extraCas.length === 0 ? {} : { ca: [...getCACertificates('default'), ...extraCas] }),
        timeout: settings.connectTimeoutMs,
        lookup: checkedLookup(allowlist),
      }),
      allowlist,
    );
    this.#agent = new Agent({
      connect,
      // One request per connection at a time (no pipelining), and never more connections to an origin than its slots.
      connections: settings.maxInFlightPerOrigin,
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
  async send(url: string, body: GatewayRequestBody | string): Promise<GatewayExchange> {
    if (this.#isClosed()) throw new GatewayClientClosedError();
    const target = URL.parse(url);
    const origin = gatewayOrigin(url);
    if (target === null || origin === undefined) return NOT_A_GATEWAY_URL;
    const originSlots = this.#slotsOf(origin);
    try {
      await originSlots.acquire();
      try {
        await this.#slots.acquire();
      } catch (error) {
        originSlots.release();
        throw error;
      }
      try {
        // `close` may have come while this request waited.
        if (this.#isClosed()) throw new GatewayClientClosedError();
        return await this.#exchange(target, body);
      } finally {
        this.#slots.release();
        originSlots.release();
      }
    } finally {
      if (originSlots.idle && this.#originSlots.get(origin) === originSlots) this.#originSlots.delete(origin);
    }
  }

  /**
   * Stops taking requests: those waiting for a slot are refused
   * (`GatewayClientClosedError`), those in flight finish (each within its
   * timeouts), then the connections close. Calling it again waits for the
   * same close.
   */
  /**
   * Like `close`, but requests in flight are aborted at once (each then ends
   * as a connection error): for a shutdown that cannot wait for a gateway
   * that hangs.
   */
  async destroy(): Promise<void> {
    const closing = this.close();
    await this.#agent.destroy();
    await closing;
  }

  async close(): Promise<void> {
    if (this.#closing === undefined) {
      const closed = new GatewayClientClosedError();
      this.#slots.refuseWaiting(closed);
      for (const slots of this.#originSlots.values()) slots.refuseWaiting(closed);
      this.#closing = this.#agent.close();
    }
    await this.#closing;
  }

  /** A method, not a field test: the answer changes while `send` awaits. */
  #isClosed(): boolean {
    return this.#closing !== undefined;
  }

  #slotsOf(origin: string): RequestSlots {
    let slots = this.#originSlots.get(origin);
    if (slots === undefined) {
      slots = new RequestSlots(this.#maxInFlightPerOrigin);
      this.#originSlots.set(origin, slots);
    }
    return slots;
  }

  async #exchange(target: URL, body: GatewayRequestBody | string): Promise<GatewayExchange> {
    let response: Dispatcher.ResponseData;
    try {
      response = await this.#agent.request({
        origin: target.origin,
        path: `${target.pathname}${target.search}`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // Pending requests are stored as the JSON text they are sent as.
        body: typeof body === 'string' ? body : JSON.stringify(body),
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
 * The connection's own name look-up: all the addresses of the name, checked
 * as one answer, then handed to the connection in the form it asked for
 * (with `all`, Node tries them in turn). The addresses checked are the
 * addresses connected to: there is no second look-up to disagree.
 */
function checkedLookup(allowlist: readonly CidrRange[]): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error !== null) {
        callback(error, '');
        return;
      }
      const verdict = checkResolvedAddresses(addresses, allowlist);
      if (!verdict.allowed) {
        callback(new AddressRefusedError(verdict), '');
        return;
      }
      const [first] = addresses;
      if (options.all === true) callback(null, addresses);
      // Never undefined (an empty answer is refused above), but the callback must come whatever happens.
      else if (first === undefined) callback(Object.assign(new Error('no address'), { code: 'ENOTFOUND' }), '');
      else callback(null, first.address, first.family);
    });
  };
}

/**
 * undici's connector, with the address policy around it: an IP literal is
 * refused before any connection is opened (Node does not look a literal
 * up), and a connected socket whose peer address is refused is destroyed
 * before undici writes on it, whatever led there.
 */
function checkedConnector(
  connect: buildConnector.connector,
  allowlist: readonly CidrRange[],
): buildConnector.connector {
  return (options, callback) => {
    if (isIP(options.hostname) !== 0) {
      const verdict = checkAddress(options.hostname, allowlist);
      if (!verdict.allowed) {
        // Asynchronously, as a connection attempt ends: undici does not expect its callback within the call.
        queueMicrotask(() => {
          callback(new AddressRefusedError(verdict), null);
        });
        return;
      }
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
