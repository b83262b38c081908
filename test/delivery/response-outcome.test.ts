import { describe, expect, it } from 'vitest';
import { classifyExchange, type GatewayExchange, type ResponseOutcome } from '../../src/delivery/response-outcome.js';

const NOW = Date.UTC(2025, 5, 1, 12, 0, 0);

type GatewayResponse = Extract<GatewayExchange, { kind: 'response' }>;

function aResponse(overrides: Partial<Omit<GatewayResponse, 'kind'>> = {}): GatewayResponse {
  return { kind: 'response', status: 200, body: '{"rejected":[]}', ...overrides };
}

const delivered = (...rejected: string[]): ResponseOutcome => ({ kind: 'delivered', status: 200, rejected });

describe('a gateway answer, by status', () => {
  it.each<[number, ResponseOutcome]>([
    [200, { kind: 'delivered', status: 200, rejected: [] }],
    [202, { kind: 'delivered', status: 202, rejected: [] }],
    [204, { kind: 'delivered', status: 204, rejected: [] }],
    [301, { kind: 'failed', cause: 'redirect', status: 301 }],
    [302, { kind: 'failed', cause: 'redirect', status: 302 }],
    [307, { kind: 'failed', cause: 'redirect', status: 307 }],
    [308, { kind: 'failed', cause: 'redirect', status: 308 }],
    [400, { kind: 'failed', cause: 'client-error', status: 400 }],
    [401, { kind: 'failed', cause: 'client-error', status: 401 }],
    [403, { kind: 'failed', cause: 'client-error', status: 403 }],
    [404, { kind: 'failed', cause: 'client-error', status: 404 }],
    [410, { kind: 'failed', cause: 'client-error', status: 410 }],
    [413, { kind: 'failed', cause: 'client-error', status: 413 }],
    [429, { kind: 'retry', cause: 'rate-limited', status: 429 }],
    [500, { kind: 'retry', cause: 'server-error', status: 500 }],
    [502, { kind: 'retry', cause: 'server-error', status: 502 }],
    [503, { kind: 'retry', cause: 'server-error', status: 503 }],
    [504, { kind: 'retry', cause: 'server-error', status: 504 }],
    [599, { kind: 'retry', cause: 'server-error', status: 599 }],
    [0, { kind: 'retry', cause: 'invalid-status', status: 0 }],
    [102, { kind: 'retry', cause: 'invalid-status', status: 102 }],
    [600, { kind: 'retry', cause: 'invalid-status', status: 600 }],
  ])('%i → %o', (status, outcome) => {
    const body = status >= 200 && status < 300 ? '{"rejected":[]}' : '{"errcode":"M_UNKNOWN"}';
    expect(classifyExchange(aResponse({ status, body }), NOW)).toEqual(outcome);
  });
});

describe('no answer', () => {
  it.each<[string, GatewayExchange, ResponseOutcome]>([
    [
      'a reset or refused connection is retried',
      { kind: 'connection-error' },
      { kind: 'retry', cause: 'connection-error' },
    ],
    ['a timeout is retried', { kind: 'timeout' }, { kind: 'retry', cause: 'timeout' }],
    [
      'a refused address (SSRF policy) fails for good',
      { kind: 'address-refused', rule: '127.0.0.0/8', reason: '127.0.0.0/8: loopback, RFC 1122' },
      { kind: 'failed', cause: 'address-refused' },
    ],
    [
      "not sent for the user's limit is retried (busy)",
      { kind: 'not-sent', reason: 'user-busy' },
      { kind: 'retry', cause: 'busy' },
    ],
    [
      "not sent for the address's limit is retried (busy)",
      { kind: 'not-sent', reason: 'address-busy' },
      { kind: 'retry', cause: 'busy' },
    ],
  ])('%s', (_, exchange, outcome) => {
    expect(classifyExchange(exchange, NOW)).toEqual(outcome);
  });
});

describe('the rejected pushkeys of a 2xx body', () => {
  it.each<[string, string | undefined, ResponseOutcome]>([
    ['the spec body, nothing rejected', '{"rejected":[]}', delivered()],
    ['the spec body, two rejected', '{"rejected":["key-1","key-2"]}', delivered('key-1', 'key-2')],
    ['other keys beside rejected', '{"rejected":["key-1"],"extra":{"a":[1]}}', delivered('key-1')],
    ['no body', undefined, delivered()],
    ['an empty body', '', delivered()],
    ['a body that is not JSON', '<html>OK</html>', delivered()],
    ['truncated JSON', '{"rejected":["key-1"', delivered()],
    ['a JSON array', '["key-1"]', delivered()],
    ['an object without rejected', '{}', delivered()],
    ['rejected not an array', '{"rejected":"key-1"}', delivered()],
    ['rejected holding a non-string: nothing removed on a doubtful list', '{"rejected":["key-1",2]}', delivered()],
    ['rejected null', '{"rejected":null}', delivered()],
    [
      'nesting far deeper than the spec body',
      `{"rejected":["key-1"],"x":${'['.repeat(100)}${']'.repeat(100)}}`,
      delivered(),
    ],
  ])('%s', (_, body, outcome) => {
    const response: GatewayResponse = body === undefined ? { kind: 'response', status: 200 } : aResponse({ body });
    expect(classifyExchange(response, NOW)).toEqual(outcome);
  });
});

describe('a 2xx whose body the client did not read whole', () => {
  it.each(['too-large', 'timeout', 'connection-error'] as const)(
    'dropped (%s): delivered, nothing rejected, the status stands',
    (bodyDropped) => {
      expect(classifyExchange({ kind: 'response', status: 200, bodyDropped }, NOW)).toEqual(delivered());
      expect(classifyExchange({ kind: 'response', status: 503, bodyDropped }, NOW)).toEqual({
        kind: 'retry',
        cause: 'server-error',
        status: 503,
      });
    },
  );
});

describe('Retry-After, read on 429 and 503 only', () => {
  const inTwoMinutes = 'Sun, 01 Jun 2025 12:02:00 GMT';
  it.each<[string, Partial<GatewayResponse>, ResponseOutcome]>([
    [
      '429 with seconds',
      { status: 429, retryAfter: '120' },
      { kind: 'retry', cause: 'rate-limited', status: 429, retryAfterMs: 120_000 },
    ],
    [
      '429 with an HTTP-date',
      { status: 429, retryAfter: inTwoMinutes },
      { kind: 'retry', cause: 'rate-limited', status: 429, retryAfterMs: 120_000 },
    ],
    [
      '503 with seconds',
      { status: 503, retryAfter: '30' },
      { kind: 'retry', cause: 'server-error', status: 503, retryAfterMs: 30_000 },
    ],
    [
      '503 with an HTTP-date',
      { status: 503, retryAfter: inTwoMinutes },
      { kind: 'retry', cause: 'server-error', status: 503, retryAfterMs: 120_000 },
    ],
    [
      '503 with a date already past: no wait',
      { status: 503, retryAfter: 'Sat, 31 May 2025 12:00:00 GMT' },
      { kind: 'retry', cause: 'server-error', status: 503, retryAfterMs: 0 },
    ],
    [
      '429 with garbage: ignored',
      { status: 429, retryAfter: 'later' },
      { kind: 'retry', cause: 'rate-limited', status: 429 },
    ],
    [
      '503 with garbage: ignored',
      { status: 503, retryAfter: '-5' },
      { kind: 'retry', cause: 'server-error', status: 503 },
    ],
    ['500: ignored', { status: 500, retryAfter: '120' }, { kind: 'retry', cause: 'server-error', status: 500 }],
    ['502: ignored', { status: 502, retryAfter: '120' }, { kind: 'retry', cause: 'server-error', status: 502 }],
    [
      '301: still failed for good',
      { status: 301, retryAfter: '120' },
      { kind: 'failed', cause: 'redirect', status: 301 },
    ],
    ['200: still delivered', { status: 200, retryAfter: '120' }, delivered()],
  ])('%s', (_, overrides, outcome) => {
    expect(classifyExchange(aResponse({ body: '{"rejected":[]}', ...overrides }), NOW)).toEqual(outcome);
  });
});
