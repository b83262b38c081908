import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { PushRulesClient } from '../../../src/client/push-rules-client.js';
import type { Authenticator } from '../../../src/gateway/authenticator.js';
import { buildGatewayServer } from '../../../src/gateway/gateway-server.js';
import type { WriteRateLimit } from '../../../src/gateway/write-limiter.js';
import { TokenFileAuthenticator, type TokenFileEntry } from '../../../src/gateway/token-file-authenticator.js';
import { createLogger } from '../../../src/logging/logger.js';

export interface GatewayHarness {
  readonly url: string;
  readonly app: FastifyInstance;
  close(): Promise<void>;
}

export interface GatewayHarnessOptions {
  readonly amqpUrl: string;
  readonly queue: string;
  /** Token → user ID, or `{user_id, device_id}` (the token file's format). */
  readonly tokens?: Readonly<Record<string, TokenFileEntry>>;
  readonly authenticator?: Authenticator;
  readonly requestTimeoutMs?: number;
  readonly maxBodyBytes?: number;
  /** Absent: writes are not limited. */
  readonly writeRateLimit?: WriteRateLimit;
  readonly maxJsonDepth?: number;
}

/** The real gateway, listening on a free port, forwarding to `queue` with the package's client. */
export async function startGateway(options: GatewayHarnessOptions): Promise<GatewayHarness> {
  const requestTimeoutMs = options.requestTimeoutMs ?? 5_000;
  const client = new PushRulesClient({
    url: options.amqpUrl,
    queue: options.queue,
    readQueue: `${options.queue}.read`,
    timeoutMs: requestTimeoutMs,
  });
  const app = buildGatewayServer({
    api: client,
    authenticator: options.authenticator ?? new TokenFileAuthenticator(options.tokens ?? {}),
    logger: createLogger(process.env['TEST_LOG_LEVEL'] ?? 'silent'),
    maxBodyBytes: options.maxBodyBytes ?? 16 * 1024,
    // One below the workers' default: the RPC envelope adds a level.
    maxJsonDepth: options.maxJsonDepth ?? 31,
    requestTimeoutMs,
    ...(options.writeRateLimit === undefined ? {} : { writeRateLimit: options.writeRateLimit }),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    app,
    close: async () => {
      await app.close();
      await client.close();
    },
  };
}
