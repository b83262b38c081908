import { PushRulesClient } from './client/push-rules-client.js';
import type { Authenticator } from './gateway/authenticator.js';
import { loadGatewayConfig, type GatewayConfig } from './gateway/gateway-config.js';
import { GatewayMetrics } from './gateway/gateway-metrics.js';
import { buildGatewayServer } from './gateway/gateway-server.js';
import { HomeserverAuthenticator } from './gateway/homeserver-authenticator.js';
import { TokenFileAuthenticator } from './gateway/token-file-authenticator.js';
import { runProcess, type ServiceProcess } from './lifecycle/run-process.js';
import type { Logger } from './logging/logger.js';
import { HealthServer } from './observability/health-server.js';

/**
 * `npm run gateway`: the HTTP front. Serves the push-rule and pusher
 * endpoints of the client-server API and forwards each request to the
 * worker pool.
 *
 * SIGTERM/SIGINT: stop accepting connections, answer every request in
 * flight, close the broker connection, exit 0; a second signal or
 * `shutdown.timeoutMs` exits 1 at once.
 */
runProcess({
  name: 'matrix-push-gateway',
  loadConfig: () => loadGatewayConfig(),
  logLevel: (config) => config.log.level,
  shutdownTimeoutMs: (config) => config.shutdown.timeoutMs,
  create: createGatewayProcess,
});

function createGatewayProcess(config: Readonly<GatewayConfig>, log: Logger): ServiceProcess {
  const metrics = new GatewayMetrics();
  const client = new PushRulesClient({
    url: config.amqp.url,
    queue: config.amqp.queue,
    readQueue: config.amqp.readQueue === '' ? null : config.amqp.readQueue,
    onReadFallback: (reason) => {
      metrics.readFallback(reason);
    },
    timeoutMs: config.http.requestTimeoutMs,
    observer: metrics.broker,
    logger: log,
    ...(config.amqp.publisherUserId === '' ? {} : { publisherUserId: config.amqp.publisherUserId }),
  });
  const state = { listening: false };
  const app = buildGatewayServer({
    api: client,
    authenticator: authenticatorOf(config.auth),
    logger: log,
    maxBodyBytes: config.http.maxBodyBytes,
    maxJsonDepth: config.http.maxJsonDepth,
    requestTimeoutMs: config.http.requestTimeoutMs,
    observer: metrics,
    maxInFlight: config.http.maxInFlight,
    writeRateLimit: {
      perSecond: config.rateLimit.writesPerSecond,
      burst: config.rateLimit.burst,
      maxUsers: config.rateLimit.maxUsers,
    },
  });
  const health = config.health.enabled
    ? new HealthServer({
        host: config.health.host,
        port: config.health.port,
        probes: { listening: () => state.listening },
        metrics: async () => ({ contentType: metrics.registry.contentType, body: await metrics.registry.metrics() }),
      })
    : undefined;
  return {
    health,
    healthHost: config.health.host,
    inFlight: () => metrics.inFlight,
    close: async () => {
      state.listening = false;
      // Stops accepting and waits for the requests in flight to be answered.
      await app.close();
      await client.close();
      await health?.close();
    },
    start: async () => {
      await app.listen({ host: config.http.host, port: config.http.port });
      state.listening = true;
      const address = app.server.address();
      const port = typeof address === 'object' && address !== null ? address.port : config.http.port;
      log.info(
        {
          host: config.http.host,
          port,
          queue: config.amqp.queue,
          auth: config.auth.kind,
          maxInFlight: config.http.maxInFlight,
          rateLimit: config.rateLimit,
        },
        'gateway listening',
      );
    },
  };
}

function authenticatorOf(auth: GatewayConfig['auth']): Authenticator {
  if (auth.kind === 'token-file') return TokenFileAuthenticator.fromFile(auth.tokenFile);
  return new HomeserverAuthenticator(auth);
}
