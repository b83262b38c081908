import { AuthUnavailableError, type Authenticator, type TokenRejection } from './authenticator.js';
import type { GatewayError } from './gateway-errors.js';

/** Who a request is from (the token's user and device), or why it is refused. */
export type AuthOutcome =
  | { readonly userId: string; readonly deviceId?: string }
  | { readonly rejected: TokenRejection }
  | { readonly error: GatewayError; readonly cause?: unknown };

/** The request's bearer token, checked by the authenticator. */
export async function authenticate(authenticator: Authenticator, header: string | undefined): Promise<AuthOutcome> {
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  const token = match?.[1];
  if (token === undefined) return { error: 'missingToken' };
  try {
    const result = await authenticator.authenticate(token);
    return result;
  } catch (error) {
    if (error instanceof AuthUnavailableError) return { error: 'authUnavailable', cause: error };
    throw error;
  }
}
