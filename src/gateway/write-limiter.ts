import type { FastifyReply, FastifyRequest } from 'fastify';
import { GATEWAY_ERRORS } from './gateway-errors.js';
import { LogThrottle } from './log-throttle.js';
import { TokenBucketLimiter } from './token-bucket-limiter.js';

/** Writes each user may make: a token bucket per user ID (`TokenBucketLimiter`). */
export interface WriteRateLimit {
  /** Writes regained per second; 0: no limit. */
  readonly perSecond: number;
  /** Writes a user may make at once after a quiet spell. */
  readonly burst: number;
  /** Users tracked at once; past it the least recently active one is forgotten. */
  readonly maxUsers: number;
}

/**
 * The per-user write rate limit as the gateway applies it: a write spends
 * one of its user's, or is answered 429; refusals and forgotten users are
 * logged at most once per `logIntervalMs`.
 */
export class WriteLimiter {
  readonly #writes: TokenBucketLimiter;
  readonly #rateLimitLog: LogThrottle;
  readonly #evictionLog: LogThrottle;
  readonly #observer: { rateLimited(): void } | undefined;
  #evictionsLogged = 0;

  /** `limit` absent: writes are not limited. */
  constructor(
    limit: WriteRateLimit | undefined,
    options: {
      readonly now: () => number;
      readonly logIntervalMs: number;
      readonly observer?: { rateLimited(): void };
    },
  ) {
    const { now, logIntervalMs } = options;
    this.#writes = new TokenBucketLimiter({
      perSecond: limit?.perSecond ?? 0,
      burst: limit?.burst ?? 1,
      maxKeys: limit?.maxUsers ?? 1,
      now,
    });
    this.#rateLimitLog = new LogThrottle(logIntervalMs, now);
    this.#evictionLog = new LogThrottle(logIntervalMs, now);
    this.#observer = options.observer;
  }

  /**
   * Spends one of the user's writes, or answers 429 M_LIMIT_EXCEEDED with
   * the exact wait, in the body (`retry_after_ms`, which clients of spec
   * versions before v1.10 read) and as `Retry-After` in whole seconds,
   * rounded up, as Synapse does. False: answered, the write goes no further.
   */
  async take(request: FastifyRequest, reply: FastifyReply, userId: string): Promise<boolean> {
    const writes = this.#writes;
    const outcome = writes.take(userId);
    if (writes.evictions > this.#evictionsLogged) {
      const heldBack = this.#evictionLog.note();
      if (heldBack !== undefined) {
        request.log.info(
          { evictions: writes.evictions - this.#evictionsLogged, tracked: writes.size },
          'write rate limit: tracking rateLimit.maxUsers users; forgot the least recently active',
        );
        this.#evictionsLogged = writes.evictions;
      }
    }
    if (outcome.allowed) return true;
    this.#observer?.rateLimited();
    const heldBack = this.#rateLimitLog.note();
    if (heldBack !== undefined)
      request.log.info(
        { userId, retryAfterMs: outcome.retryAfterMs, heldBack },
        'write rate limit reached: answering 429',
      );
    const { errcode, status, message } = GATEWAY_ERRORS.limitExceeded;
    await reply
      .code(status)
      // Browsers show a script only the safelisted response headers.
      .headers({
        'retry-after': String(Math.ceil(outcome.retryAfterMs / 1000)),
        'access-control-expose-headers': 'Retry-After',
      })
      .send({ errcode, error: message, retry_after_ms: outcome.retryAfterMs });
    return false;
  }
}
