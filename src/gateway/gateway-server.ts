import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { PushRulesError } from '../client/push-rules-client.js';
import type { Logger } from '../logging/logger.js';
import { parseUntrustedJson } from '../matrix/parse-untrusted-json.js';
import type { Authenticator } from './authenticator.js';
import { authenticate } from './bearer-authentication.js';
import { GATEWAY_ERRORS, matrixBody, rejectionBody, type GatewayError } from './gateway-errors.js';
import { API_PREFIXES, ROUTES, type Method, type Params, type PushRulesApi } from './gateway-routes.js';
import { InFlightLimit, type InFlightSlot } from './in-flight-limit.js';
import { LogThrottle } from './log-throttle.js';
import { WriteLimiter, type WriteRateLimit } from './write-limiter.js';

export interface GatewayObserver {
  /** Requests the gateway is working on now (see `InFlightLimit`): admitted, and not yet done with. */
  inFlightChanged(count: number): void;
  /**
   * A request answered. `route` is the matched pattern (never the user's
   * path), or `unmatched`. Not called for a request whose client went away
   * before its answer.
   */
  requestDone(route: string, method: string, status: number, seconds: number): void;
  /** A write refused by the per-user rate limit. */
  rateLimited(): void;
  /** A request refused at `maxInFlight`. */
  overloaded(): void;
}

export interface GatewayServerOptions {
  readonly api: PushRulesApi;
  readonly authenticator: Authenticator;
  readonly logger: Logger;
  readonly maxBodyBytes: number;
  /** Bodies nesting arrays and objects deeper get 400 M_BAD_JSON before they are parsed. */
  readonly maxJsonDepth: number;
  /** Each call's deadline for the workers; past it the client gets 503. */
  readonly requestTimeoutMs: number;
  readonly observer?: GatewayObserver;
  /** Requests in flight beyond which new ones get 503; absent: no cap. */
  readonly maxInFlight?: number;
  /** Absent: writes are not limited. */
  readonly writeRateLimit?: WriteRateLimit;
  /** Milliseconds on a clock that does not go back (rate limits, log throttling); tests pass a fake one. */
  readonly now?: () => number;
}

/** How often at most the gateway logs the same kind of refusal. */
export const REFUSAL_LOG_INTERVAL_MS = 10_000;

/** What the Matrix spec asks of every response so that browser clients work. */
export const CORS_HEADERS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, POST, PUT, DELETE, OPTIONS',
  'access-control-allow-headers': 'X-Requested-With, Content-Type, Authorization',
} as const;

/** How the body parser tells the error handler what to answer. */
interface BodyRefusal {
  readonly matrixError: GatewayError;
  readonly matrixMessage?: string;
}
/** Methods answered 405 on a known path (rather than 404). */
const OTHER_METHODS = ['GET', 'PUT', 'POST', 'DELETE', 'PATCH', 'HEAD'] as const;
const BODY_METHODS = new Set<string>(['PUT', 'POST']);
/** What the per-user rate limit counts: the requests that change a user's data. */
const WRITE_METHODS = new Set<string>(['PUT', 'POST', 'DELETE']);

/**
 * The HTTP front of the worker pool: the push-rule and pusher endpoints
 * (docs/push-rules.md#endpoints-and-operations) under `/_matrix/client/r0`
 * and `/v3`, authenticated by bearer token, each forwarded to the workers
 * with `PushRulesClient`. The user the workers act for is only ever the one
 * the token authenticates.
 */
export function buildGatewayServer(options: GatewayServerOptions): FastifyInstance {
  // Typed as fastify's logger, so that the instance has fastify's default type.
  const loggerInstance: FastifyBaseLogger = options.logger;
  const app = Fastify({
    loggerInstance,
    // The gateway logs what it decides itself; fastify's per-request lines would double them.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.maxBodyBytes,
    exposeHeadRoutes: false,
    routerOptions: { ignoreTrailingSlash: true },
    // The front proxy terminates TLS and may keep connections open for long.
    keepAliveTimeout: 65_000,
    // A path that does not decode fails before routing and before any hook,
    // so it gets its Matrix error and CORS headers here.
    frameworkErrors: (_error, _request, reply) => {
      // Typed with the route generics of a route that was never found.
      const answer = reply as unknown as FastifyReply;
      void answer.headers(CORS_HEADERS).code(GATEWAY_ERRORS.badPath.status).send(matrixBody('badPath'));
    },
  });
  const send = (reply: FastifyReply, error: GatewayError, message?: string) =>
    reply.code(GATEWAY_ERRORS[error].status).send(matrixBody(error, message));

  const now = options.now ?? (() => performance.now());
  const inFlight = new InFlightLimit(options.maxInFlight ?? Number.POSITIVE_INFINITY, (count) =>
    options.observer?.inFlightChanged(count),
  );
  const overloadLog = new LogThrottle(REFUSAL_LOG_INTERVAL_MS, now);
  const writes = new WriteLimiter(options.writeRateLimit, {
    now,
    logIntervalMs: REFUSAL_LOG_INTERVAL_MS,
    ...(options.observer === undefined ? {} : { observer: options.observer }),
  });

  // Any content type: Matrix clients send JSON, some without saying so.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, text, done) => {
    // An empty body is no body (a DELETE with a content type, say); the
    // endpoints that need one answer M_NOT_JSON themselves.
    if (text === '') {
      done(null, undefined);
      return;
    }
    // The depth is checked before the parse: a few KB of `[` would
    // otherwise overflow the stack of whatever walks the body next (the
    // client's JSON.stringify, for one).
    const parsed = parseUntrustedJson(text as string, { maxDepth: options.maxJsonDepth });
    if (parsed.ok) {
      done(null, parsed.value);
      return;
    }
    const refusal: BodyRefusal =
      parsed.problem === 'not-json'
        ? { matrixError: 'notJson' }
        : { matrixError: 'badJson', matrixMessage: parsed.message };
    done(Object.assign(new Error(parsed.message), { statusCode: 400 }, refusal), undefined);
  });

  // Every request counts against the cap, before authentication: at the
  // cap the gateway does no work at all, the homeserver's whoami included.
  app.addHook('onRequest', async (request, reply) => {
    void reply.headers(CORS_HEADERS);
    const slot = inFlight.tryEnter();
    if (slot === undefined) {
      options.observer?.overloaded();
      const heldBack = overloadLog.note();
      if (heldBack !== undefined)
        request.log.info(
          { inFlight: inFlight.count, maxInFlight: inFlight.max, heldBack },
          'too many requests in flight: answering 503',
        );
      // See GATEWAY_ERRORS.overloaded for why 503 and not 429.
      await reply.code(GATEWAY_ERRORS.overloaded.status).header('retry-after', '1').send(matrixBody('overloaded'));
      return;
    }
    slots.set(request, slot);
    // 'close' comes once the response is over, and also when the client
    // goes away first (then fastify's onResponse never runs).
    reply.raw.once('close', slot.release);
  });
  app.addHook('onResponse', async (request, reply) => {
    options.observer?.requestDone(
      request.routeOptions.url ?? 'unmatched',
      request.method,
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
  });

  app.setNotFoundHandler(async (_request, reply) => send(reply, 'unrecognized'));
  app.setErrorHandler(async (error: Error & { statusCode?: number } & Partial<BodyRefusal>, request, reply) => {
    if (error.matrixError !== undefined) return send(reply, error.matrixError, error.matrixMessage);
    if (error.statusCode === 413) return send(reply, 'tooLarge');
    if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500)
      return send(reply, 'badRequest', error.message);
    request.log.error({ err: error }, 'gateway request failed');
    return send(reply, 'internal');
  });

  // Preflight on any path, known or not: browsers ask before every request.
  app.options('*', async (_request, reply) => reply.code(200).send({}));

  for (const prefix of API_PREFIXES) {
    for (const route of ROUTES) {
      app.route<{ Params: Params; Querystring: Record<string, unknown> }>({
        method: [...OTHER_METHODS],
        url: `${prefix}${route.path}`,
        // Authentication first, before the body is read: a client without a
        // valid token learns nothing about its request.
        onRequest: async (request: FastifyRequest, reply) => {
          if (route.handlers[request.method as Method] === undefined) return;
          const outcome = await authenticate(options.authenticator, request.headers.authorization);
          if ('rejected' in outcome) {
            await reply.code(outcome.rejected.status).send(rejectionBody(outcome.rejected));
            return;
          }
          if ('error' in outcome) {
            if (outcome.error === 'authUnavailable')
              request.log.warn({ err: outcome.cause }, 'cannot authenticate: the homeserver is unavailable');
            await send(reply, outcome.error);
            return;
          }
          authenticated.set(request, { userId: outcome.userId, deviceId: outcome.deviceId });
        },
        handler: async (request, reply) => {
          const handler = route.handlers[request.method as Method];
          if (handler === undefined) return send(reply, 'methodNotAllowed');
          const identity = authenticated.get(request);
          if (identity === undefined) return send(reply, 'missingToken');
          const { userId, deviceId } = identity;
          if (BODY_METHODS.has(request.method) && request.body === undefined) return send(reply, 'notJson');
          // Only what would reach the workers counts; after authentication, so it is per user.
          if (WRITE_METHODS.has(request.method) && !(await writes.take(request, reply, userId))) return reply;
          // The call to the workers keeps the request in flight, even if its client goes away.
          const slot = slots.get(request);
          slot?.hold();
          let body: unknown;
          try {
            body = await handler(options.api, {
              userId,
              deviceId,
              params: request.params,
              query: request.query,
              body: request.body,
              timeoutMs: options.requestTimeoutMs,
            });
          } catch (error) {
            if (!(error instanceof PushRulesError)) throw error;
            if (error.reason !== undefined) request.log.warn({ reason: error.reason }, 'the workers did not answer');
            return await reply.code(error.status).send(error.toMatrixBody());
          } finally {
            slot?.release();
          }
          return reply.code(200).send(body);
        },
      });
    }
  }
  return app;
}

/** The user each authenticated request acts for, and the token's device, set by its `onRequest` hook. */
const authenticated = new WeakMap<FastifyRequest, { readonly userId: string; readonly deviceId: string | undefined }>();
/** Each admitted request's place in the in-flight count. */
const slots = new WeakMap<FastifyRequest, InFlightSlot>();
