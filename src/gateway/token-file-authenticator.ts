import { readFileSync } from 'node:fs';
import { ConfigError } from '../config/load-config.js';
import { isValidUserId } from '../matrix/user-id.js';
import type { Authentication, Authenticator } from './authenticator.js';
import { UNKNOWN_TOKEN } from './gateway-errors.js';

/** A token's entry: a user ID, or the user and the device of the token. */
export type TokenFileEntry = string | { readonly user_id: string; readonly device_id?: string };

/**
 * Development and tests: a JSON file mapping access tokens to who they
 * belong to, read once at start. An entry is a user ID, or an object with
 * the user ID and the token's device:
 *
 * ```json
 * {"old-style-token": "@alice:example.org",
 *  "phone-token": {"user_id": "@alice:example.org", "device_id": "PHONE"}}
 * ```
 */
export class TokenFileAuthenticator implements Authenticator {
  readonly #identities: ReadonlyMap<string, Authentication>;

  constructor(entries: Readonly<Record<string, TokenFileEntry>>) {
    const identities = new Map<string, Authentication>();
    for (const [token, entry] of Object.entries(entries)) {
      if (token === '') throw new ConfigError('token file: a token is empty');
      identities.set(token, identityOf(entry));
    }
    this.#identities = identities;
  }

  static fromFile(path: string): TokenFileAuthenticator {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path, 'utf8'));
    } catch (error) {
      throw new ConfigError(`cannot read the token file ${path}: ${(error as Error).message}`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new ConfigError(
        `the token file ${path} must hold a JSON object of token → user ID (or {user_id, device_id})`,
      );
    }
    return new TokenFileAuthenticator(parsed as Record<string, TokenFileEntry>);
  }

  async authenticate(token: string): Promise<Authentication> {
    const identity = this.#identities.get(token);
    // No expiry here: an unlisted token is simply unknown, never soft-logged-out.
    return Promise.resolve(identity ?? { rejected: UNKNOWN_TOKEN });
  }
}

function identityOf(entry: unknown): Authentication {
  if (typeof entry === 'string') {
    if (!isValidUserId(entry))
      throw new ConfigError(`token file: ${JSON.stringify(entry)} is not a valid Matrix user ID`);
    return { userId: entry };
  }
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    throw new ConfigError(`token file: ${JSON.stringify(entry)} is neither a user ID nor {"user_id", "device_id"}`);
  }
  const { user_id: userId, device_id: deviceId } = entry as Record<string, unknown>;
  if (typeof userId !== 'string' || !isValidUserId(userId)) {
    throw new ConfigError(`token file: user_id ${JSON.stringify(userId)} is not a valid Matrix user ID`);
  }
  if (deviceId === undefined) return { userId };
  if (typeof deviceId !== 'string' || deviceId === '') {
    throw new ConfigError(`token file: device_id ${JSON.stringify(deviceId)} of ${userId} is not a non-empty string`);
  }
  return { userId, deviceId };
}
