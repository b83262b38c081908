import { createHash } from 'node:crypto';
import { isValidUserId } from '../matrix/user-id.js';
import { AuthUnavailableError, type Authentication, type Authenticator, type TokenRejection } from './authenticator.js';
import { UNKNOWN_TOKEN } from './gateway-errors.js';

export const WHOAMI_PATH = '/_matrix/client/v3/account/whoami';

export interface HomeserverAuthenticatorOptions {
  readonly homeserverUrl: string;
  /** How long an accepted token is trusted without asking again; 0: every request asks. */
  readonly cacheSeconds: number;
  readonly cacheMaxEntries: number;
  /** A homeserver slower than this counts as down. */
  readonly timeoutMs: number;
  readonly now?: () => number;
}

interface Cached {
  readonly userId: string;
  readonly deviceId: string | undefined;
  readonly expiresAt: number;
}

/**
 * Asks the homeserver who a token belongs to (`GET /account/whoami` with the
 * caller's token), as any Matrix client would: its `user_id`, and its
 * `device_id` when the token has a device.
 *
 * - Accepted tokens are cached for `cacheSeconds`, keyed by the token's
 *   SHA-256 so the cache never holds a usable credential. Rejected tokens
 *   are not cached: a token issued a moment ago must work at once.
 * - Concurrent requests with the same token share one lookup.
 * - 401/403 from the homeserver: the token is refused, and the client is
 *   told what the homeserver said (`rejectionOf`), `soft_logout` above all:
 *   an expired token (`soft_logout: true`) must not make the client destroy
 *   its encryption keys. Anything else (unreachable, too slow, 5xx, 429, an
 *   answer without a valid user ID): `AuthUnavailableError`, so the gateway
 *   answers 503 and serves nobody.
 */
export class HomeserverAuthenticator implements Authenticator {
  readonly #options: HomeserverAuthenticatorOptions;
  readonly #url: string;
  readonly #now: () => number;
  readonly #cache = new Map<string, Cached>();
  readonly #pending = new Map<string, Promise<Authentication>>();

  constructor(options: HomeserverAuthenticatorOptions) {
    this.#options = options;
    this.#url = new URL(WHOAMI_PATH, options.homeserverUrl).toString();
    this.#now = options.now ?? Date.now;
  }

  async authenticate(token: string): Promise<Authentication> {
    const key = createHash('sha256').update(token).digest('base64url');
    const cached = this.#cache.get(key);
    if (cached !== undefined) {
      if (cached.expiresAt > this.#now()) return identityOf(cached.userId, cached.deviceId);
      this.#cache.delete(key);
    }
    let pending = this.#pending.get(key);
    if (pending === undefined) {
      pending = this.#ask(token).finally(() => this.#pending.delete(key));
      this.#pending.set(key, pending);
      const result = await pending;
      if ('userId' in result) this.#remember(key, result.userId, result.deviceId);
      return result;
    }
    return pending;
  }

  #remember(key: string, userId: string, deviceId: string | undefined): void {
    const { cacheSeconds, cacheMaxEntries } = this.#options;
    if (cacheSeconds === 0) return;
    // Maps iterate in insertion order: the first key is the oldest entry.
    while (this.#cache.size >= cacheMaxEntries) {
      const oldest = this.#cache.keys().next();
      if (oldest.done === true) break;
      this.#cache.delete(oldest.value);
    }
    this.#cache.set(key, { userId, deviceId, expiresAt: this.#now() + cacheSeconds * 1000 });
  }

  async #ask(token: string): Promise<Authentication> {
    let response: Response;
    try {
      response = await fetch(this.#url, {
        headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
        signal: AbortSignal.timeout(this.#options.timeoutMs),
      });
    } catch (error) {
      throw new AuthUnavailableError(`the homeserver did not answer whoami: ${(error as Error).message}`, {
        cause: error,
      });
    }
    const body: unknown = await response.json().catch(() => undefined);
    if (response.status === 401 || response.status === 403) return { rejected: rejectionOf(response.status, body) };
    if (response.status !== 200)
      throw new AuthUnavailableError(`the homeserver answered whoami with ${response.status}`);
    const { user_id: userId, device_id: deviceId } =
      typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
    if (typeof userId !== 'string' || !isValidUserId(userId)) {
      throw new AuthUnavailableError('the homeserver answered whoami without a valid user_id');
    }
    // A token without a device (an appservice's, say) has none; a device_id
    // that is not a non-empty string is taken as none: the pushers it
    // creates are then of an unknown device.
    return identityOf(userId, typeof deviceId === 'string' && deviceId !== '' ? deviceId : undefined);
  }
}

function identityOf(userId: string, deviceId: string | undefined): Authentication {
  return deviceId === undefined ? { userId } : { userId, deviceId };
}

/** Namespaced like `M_UNKNOWN_TOKEN` or `COM.EXAMPLE.EXPIRED` (the spec's error code convention). */
const ERRCODE = /^[A-Za-z][A-Za-z0-9_.]{0,127}$/;
/** The homeserver's message is shown to users: passed on when it is a plausible one. */
const MAX_ERROR_CHARS = 1024;

/**
 * The client is told what the homeserver would have told it for this token:
 * its status, `errcode`, `error` and `soft_logout`. A refusal that is not a
 * Matrix error (no valid `errcode`: an HTML page, say) becomes 401
 * `M_UNKNOWN_TOKEN` with `soft_logout: false`, as before. Only a literal
 * `true` is a soft logout.
 */
export function rejectionOf(status: 401 | 403, body: unknown): TokenRejection {
  if (typeof body !== 'object' || body === null) return UNKNOWN_TOKEN;
  const { errcode, error, soft_logout: softLogout } = body as Record<string, unknown>;
  if (typeof errcode !== 'string' || !ERRCODE.test(errcode)) return UNKNOWN_TOKEN;
  const message =
    typeof error === 'string' && error !== '' && error.length <= MAX_ERROR_CHARS ? error : UNKNOWN_TOKEN.error;
  return { status, errcode, error: message, softLogout: softLogout === true };
}
