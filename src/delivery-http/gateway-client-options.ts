import type { CidrRange } from '../delivery/cidr.js';
import type { GatewayResolverOptions } from './gateway-resolver.js';

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
