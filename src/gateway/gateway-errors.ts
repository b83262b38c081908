import type { TokenRejection } from './authenticator.js';

/**
 * The errors the gateway answers itself, before or instead of the workers
 * (whose errors come from the RPC contract's catalogue). Codes and statuses
 * are the Matrix client-server spec's; messages are our wording.
 */
export const GATEWAY_ERRORS = {
  unrecognized: { errcode: 'M_UNRECOGNIZED', status: 404, message: 'Unrecognized request.' },
  methodNotAllowed: { errcode: 'M_UNRECOGNIZED', status: 405, message: 'Method not allowed on this endpoint.' },
  badPath: { errcode: 'M_UNRECOGNIZED', status: 400, message: 'The request path is not valid percent-encoding.' },
  notJson: { errcode: 'M_NOT_JSON', status: 400, message: 'Content not JSON.' },
  badJson: { errcode: 'M_BAD_JSON', status: 400, message: 'The JSON body is not acceptable.' },
  tooLarge: { errcode: 'M_TOO_LARGE', status: 413, message: 'Request body too large.' },
  badRequest: { errcode: 'M_UNKNOWN', status: 400, message: 'Bad request.' },
  missingToken: { errcode: 'M_MISSING_TOKEN', status: 401, message: 'Missing access token.' },
  unknownToken: { errcode: 'M_UNKNOWN_TOKEN', status: 401, message: 'Unknown access token.' },
  limitExceeded: {
    errcode: 'M_LIMIT_EXCEEDED',
    status: 429,
    message: 'Too many changes to push rules and pushers; try again later.',
  },
  authUnavailable: { errcode: 'M_UNKNOWN', status: 503, message: 'Cannot check the access token now; try again.' },
  internal: { errcode: 'M_UNKNOWN', status: 500, message: 'Internal server error.' },
  /**
   * Too many requests in flight in the gateway as a whole. 503, not 429
   * M_LIMIT_EXCEEDED: the spec's 429 tells a client that it sent too much,
   * and this client may have sent one request; the gateway is the one out
   * of capacity, which HTTP says with 503 (with `Retry-After`), as the
   * gateway already does when no worker answers. Proxies and monitoring
   * read 503 as an overloaded upstream.
   */
  overloaded: { errcode: 'M_UNKNOWN', status: 503, message: 'The server is busy; try again.' },
} as const satisfies Record<string, { errcode: `M_${string}`; status: number; message: string }>;

export type GatewayError = keyof typeof GATEWAY_ERRORS;

/** The standard Matrix error body. */
export function matrixBody(error: GatewayError, message?: string): Record<string, unknown> {
  const { errcode, message: fixed } = GATEWAY_ERRORS[error];
  return { errcode, error: message ?? fixed };
}

/**
 * A token nobody vouches for: the token file's answer, and the homeserver's
 * when its refusal is not a Matrix error. `soft_logout: false` because
 * nothing says the session can come back.
 */
export const UNKNOWN_TOKEN: TokenRejection = {
  status: 401,
  errcode: GATEWAY_ERRORS.unknownToken.errcode,
  error: GATEWAY_ERRORS.unknownToken.message,
  softLogout: false,
};

/** The body of a refused token: `soft_logout` always, so clients never have to guess. */
export function rejectionBody(rejection: TokenRejection): Record<string, unknown> {
  return { errcode: rejection.errcode, error: rejection.error, soft_logout: rejection.softLogout };
}
