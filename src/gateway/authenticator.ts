/** Who a token belongs to, or that it belongs to nobody. */
export type Authentication = { readonly userId: string } | { readonly unknownToken: true };

/**
 * Turns a client's access token into the user it authenticates. Throws
 * `AuthUnavailableError` when it cannot tell (the homeserver is down): the
 * request is then refused with 503, never served as somebody else.
 */
export interface Authenticator {
  authenticate(token: string): Promise<Authentication>;
}

export class AuthUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AuthUnavailableError';
  }
}
