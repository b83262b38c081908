import { parseUntrustedJson } from '../matrix/parse-untrusted-json.js';
import { isJsonObject } from '../matrix/json.js';
import { parseRetryAfter } from './retry-after.js';

/** What happened to one request to a push gateway, as the HTTP client saw it. */
export type GatewayExchange =
  | {
      readonly kind: 'response';
      readonly status: number;
      /** The `Retry-After` header's value, when the gateway sent one. */
      readonly retryAfter?: string;
      /** The body, read whole: undefined when there was none, or when it was not read whole (`bodyDropped`). */
      readonly body?: string;
      /**
       * Why a body the gateway sent is missing: longer than the client reads
       * (`too-large`), too slow (`timeout`), or the connection broke while it
       * came (`connection-error`). The status is the gateway's verdict all the
       * same: a 2xx is delivered, with nothing rejected, since only a body
       * read whole may remove pushers.
       */
      readonly bodyDropped?: 'too-large' | 'timeout' | 'connection-error';
    }
  /** No response: refused, reset, DNS failure, TLS failure; `reason` is the error's code, for the log. */
  | { readonly kind: 'connection-error'; readonly reason?: string }
  /** Connecting or the response headers took longer than allowed. */
  | { readonly kind: 'timeout'; readonly phase?: 'connect' | 'headers' }
  /**
   * The address the gateway's name resolved to (or the URL's IP literal) is
   * one we do not connect to: no request was sent. `rule` is the refusing
   * row of the address policy (a bounded set, fit for a label), `reason`
   * says why in words (never the URL).
   */
  | { readonly kind: 'address-refused'; readonly rule: string; readonly reason: string }
  /**
   * Not sent: the user's or the gateway address's requests in flight were
   * at their cap with as many already waiting (the client's own limits,
   * delivery-http/gateway-client.ts), or the caller withdrew it before it
   * went out (`withdrawn`: its partition's lease came into doubt or moved
   * while it waited for a slot). Nothing reached the gateway.
   */
  | { readonly kind: 'not-sent'; readonly reason: 'user-busy' | 'address-busy' | 'withdrawn' };

/** `busy`: not sent for the worker's own limits; it says nothing about the gateway (circuit-breaker.ts). */
export type RetryCause = 'connection-error' | 'timeout' | 'server-error' | 'rate-limited' | 'invalid-status' | 'busy';
export type FailureCause = 'redirect' | 'client-error' | 'address-refused';

export type ResponseOutcome =
  /** The gateway took the notification; `rejected` are the pushkeys it says it will never deliver to. */
  | { readonly kind: 'delivered'; readonly status: number; readonly rejected: readonly string[] }
  /** Worth trying again later; `retryAfterMs` is the gateway's own wait, when it gave a readable one. */
  | {
      readonly kind: 'retry';
      readonly cause: RetryCause;
      readonly status?: number;
      readonly retryAfterMs?: number;
    }
  /** Trying again would get the same answer: this request fails for good (the pusher is kept). */
  | { readonly kind: 'failed'; readonly cause: FailureCause; readonly status?: number };

/** The spec's `{"rejected": [...]}` is tiny: anything nested deeper is not that. */
const MAX_BODY_DEPTH = 16;

/**
 * Sorts one gateway exchange into delivered, retry or failed for good.
 *
 * - 2xx: delivered. The spec's body is `{"rejected": [pushkey, ...]}`; a
 *   body that is not JSON, or whose `rejected` is missing or not an array of
 *   strings, still means delivered, with nothing rejected: removing a pusher
 *   is destructive, so only a well-formed list may cause it.
 * - No response, a timeout, 5xx or 429: the gateway (or the path to it) may
 *   be back later, so retry. Not sent for the worker's own limits: retry
 *   (`busy`). A final status outside 200-599 (a 1xx as the
 *   answer, or no HTTP status at all) is a broken server, no verdict on our
 *   request: retry as well.
 * - 3xx: redirects are never followed (a pusher URL must not lead us to an
 *   address it does not name), and the gateway will answer the same way
 *   next time: failed for good. So are the other 4xx (our request is wrong
 *   for this gateway, repeating it changes nothing) and a refused address.
 *
 * `Retry-After` is read on 429 and 503 only, the two statuses RFC 9110
 * gives it a meaning for on a refused request; `now` places an HTTP-date.
 */
export function classifyExchange(exchange: GatewayExchange, now: number): ResponseOutcome {
  switch (exchange.kind) {
    case 'connection-error':
    case 'timeout':
      return { kind: 'retry', cause: exchange.kind };
    case 'address-refused':
      return { kind: 'failed', cause: 'address-refused' };
    case 'not-sent':
      return { kind: 'retry', cause: 'busy' };
    case 'response':
      return classifyResponse(exchange, now);
  }
}

function classifyResponse(response: Extract<GatewayExchange, { kind: 'response' }>, now: number): ResponseOutcome {
  const { status } = response;
  if (!Number.isInteger(status) || status < 200 || status > 599)
    return { kind: 'retry', cause: 'invalid-status', status };
  if (status >= 200 && status < 300) return { kind: 'delivered', status, rejected: rejectedPushkeys(response.body) };
  if (status === 429 || status >= 500) {
    const cause = status === 429 ? 'rate-limited' : 'server-error';
    const retryAfterMs =
      (status === 429 || status === 503) && response.retryAfter !== undefined
        ? parseRetryAfter(response.retryAfter, now)
        : undefined;
    return retryAfterMs === undefined
      ? { kind: 'retry', cause, status }
      : { kind: 'retry', cause, status, retryAfterMs };
  }
  if (status < 400) return { kind: 'failed', cause: 'redirect', status };
  return { kind: 'failed', cause: 'client-error', status };
}

/** What a gateway answers nearly every time (Sygnal's exact text): nothing to parse. */
const NOTHING_REJECTED = '{"rejected":[]}';

function rejectedPushkeys(body: string | undefined): readonly string[] {
  if (body === undefined || body === NOTHING_REJECTED) return [];
  const parsed = parseUntrustedJson(body, { maxDepth: MAX_BODY_DEPTH });
  if (!parsed.ok || !isJsonObject(parsed.value)) return [];
  const rejected = parsed.value['rejected'];
  if (!Array.isArray(rejected) || !rejected.every((key): key is string => typeof key === 'string')) return [];
  return rejected;
}
