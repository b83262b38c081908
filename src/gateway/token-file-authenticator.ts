import { readFileSync } from 'node:fs';
import { ConfigError } from '../config/load-config.js';
import { isValidUserId } from '../matrix/user-id.js';
import type { Authentication, Authenticator } from './authenticator.js';
import { UNKNOWN_TOKEN } from './gateway-errors.js';

/**
 * Development and tests: a JSON file mapping access tokens to user IDs,
 * `{"secret-token": "@alice:example.org"}`, read once at start.
 */
export class TokenFileAuthenticator implements Authenticator {
  readonly #users: ReadonlyMap<string, string>;

  constructor(users: Readonly<Record<string, string>>) {
    for (const [token, userId] of Object.entries(users)) {
      if (token === '' || typeof userId !== 'string' || !isValidUserId(userId)) {
        throw new ConfigError(`token file: ${JSON.stringify(userId)} is not a valid Matrix user ID (or a token is empty)`);
      }
    }
    this.#users = new Map(Object.entries(users));
  }

  static fromFile(path: string): TokenFileAuthenticator {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path, 'utf8'));
    } catch (error) {
      throw new ConfigError(`cannot read the token file ${path}: ${(error as Error).message}`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new ConfigError(`the token file ${path} must hold a JSON object of token → user ID`);
    }
    return new TokenFileAuthenticator(parsed as Record<string, string>);
  }

  async authenticate(token: string): Promise<Authentication> {
    const userId = this.#users.get(token);
    // No expiry here: an unlisted token is simply unknown, never soft-logged-out.
    return Promise.resolve(userId === undefined ? { rejected: UNKNOWN_TOKEN } : { userId });
  }
}
