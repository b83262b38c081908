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
  authUnavailable: { errcode: 'M_UNKNOWN', status: 503, message: 'Cannot check the access token now; try again.' },
  internal: { errcode: 'M_UNKNOWN', status: 500, message: 'Internal server error.' },
} as const satisfies Record<string, { errcode: `M_${string}`; status: number; message: string }>;

export type GatewayError = keyof typeof GATEWAY_ERRORS;

/** The standard Matrix error body; `M_UNKNOWN_TOKEN` also says the session is not merely soft-logged-out. */
export function matrixBody(error: GatewayError, message?: string): Record<string, unknown> {
  const { errcode, message: fixed } = GATEWAY_ERRORS[error];
  return { errcode, error: message ?? fixed, ...(error === 'unknownToken' ? { soft_logout: false } : {}) };
}
