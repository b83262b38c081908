/**
 * Why a token was refused, as the client is to be told. `softLogout` is the
 * Matrix `soft_logout` flag: `true` lets the client keep its session data
 * (its encryption keys above all) and log in again to the same device;
 * `false` tells it to destroy them.
 */
export interface TokenRejection {
  /** 401, or 403 when the homeserver answered so with a Matrix error. */
  readonly status: 401 | 403;
  readonly errcode: string;
  readonly error: string;
  readonly softLogout: boolean;
}

/**
 * Who a token belongs to — its user and, when the token has one, its device
 * (recorded with the pushers it creates, so that the device's logout can
 * remove them) — or why it is refused.
 */
export type Authentication =
  { readonly userId: string; readonly deviceId?: string } | { readonly rejected: TokenRejection };

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
