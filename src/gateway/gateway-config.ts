import { Type, type Static } from '@sinclair/typebox';
import {
  BrokerUrlsSchema,
  HealthSettingsSchema,
  LogSettingsSchema,
  ShutdownSettingsSchema,
} from '../config/process-settings.js';
import { named } from '../config/setting-types.js';
import {
  checkBrokerUrls,
  compileSettingsSchema,
  ConfigError,
  loadSettings,
  type EnvironmentList,
} from '../config/load-config.js';

/** The HTTP gateway's whole configuration; defaults come from `config/gateway.json`. */
export const GatewayConfigSchema = Type.Object(
  {
    http: Type.Object(
      {
        host: Type.String({ minLength: 1, description: 'Address the HTTP server listens on.' }),
        /** 0: any free port (logged at start). */
        port: Type.Integer({
          minimum: 0,
          maximum: 65535,
          description: 'Port of the HTTP server; 0: any free port, logged at start.',
        }),
        /** Larger request bodies get 413 M_TOO_LARGE before anything else. */
        maxBodyBytes: Type.Integer({
          minimum: 1024,
          maximum: 4 * 1024 * 1024,
          description: 'Largest request body, in bytes (413 `M_TOO_LARGE`).',
        }),
        /**
         * Bodies nesting arrays and objects deeper get 400 M_BAD_JSON before
         * they are parsed. The RPC envelope wraps a body in one more level, so
         * this stays one below the workers' `limits.maxJsonDepth`.
         */
        maxJsonDepth: Type.Integer({
          minimum: 7,
          maximum: 511,
          description:
            "Arrays and objects nested in a body, checked before it is parsed (400 `M_BAD_JSON`). Keep it one below the workers' `MAX_JSON_DEPTH`: the RPC envelope adds a level.",
        }),
        /** How long a request may wait for the workers before the client gets 503. */
        requestTimeoutMs: Type.Integer({
          minimum: 100,
          maximum: 120000,
          description: "Each request's deadline for the workers, also sent as its `expiration` (503 past it).",
        }),
        /** Requests the gateway works on at once; more get 503 at once (bounded memory, no queue in front of the workers). */
        maxInFlight: Type.Integer({
          minimum: 1,
          maximum: 1000000,
          description: 'Requests worked on at once; more get 503 at once.',
        }),
      },
      { additionalProperties: false },
    ),
    amqp: Type.Object(
      {
        /** One node, or every node of a cluster (`AMQP_URL` comma-separated). */
        url: BrokerUrlsSchema,
        queue: named("The workers' request queue."),
        /** The workers' read queue, where reads go while a worker consumes it; empty: reads go to `queue`. */
        readQueue: Type.String({
          maxLength: 255,
          description:
            "The workers' read queue: reads go there while a worker consumes it. Empty in the file: every read goes to the request queue.",
        }),
        /** The broker user of `url`, sent as `userId` for workers with trusted publishers; empty: none. */
        publisherUserId: Type.String({
          maxLength: 255,
          description:
            'The broker user of `AMQP_URL`, sent with each request, for workers with trusted publishers; empty: none.',
        }),
      },
      { additionalProperties: false },
    ),
    auth: Type.Object(
      {
        /** `homeserver`: ask the homeserver's whoami; `token-file`: a token→user JSON file (development, tests). */
        kind: Type.Union([Type.Literal('homeserver'), Type.Literal('token-file')], {
          description:
            "How tokens are checked: `homeserver` asks the homeserver's whoami (production); `token-file` reads `auth.tokenFile` (development, tests).",
        }),
        homeserverUrl: Type.String({
          pattern: '^https?://',
          description: 'The homeserver whose `/account/whoami` checks each token.',
        }),
        /** How long a token the homeserver accepted is trusted without asking again. 0: never cached. */
        cacheSeconds: Type.Integer({
          minimum: 0,
          maximum: 3600,
          description:
            'How long a token the homeserver accepted is trusted without asking again; 0: ask on every request.',
        }),
        cacheMaxEntries: Type.Integer({ minimum: 1, maximum: 1000000, description: 'Accepted tokens cached at once.' }),
        /** A homeserver slower than this counts as down (503). */
        timeoutMs: Type.Integer({
          minimum: 100,
          maximum: 60000,
          description: 'A homeserver slower than this counts as down (503).',
        }),
        tokenFile: Type.String({
          description:
            'A JSON file of token → user ID, or token → `{"user_id", "device_id"}`, read at start; required with `token-file`.',
        }),
      },
      { additionalProperties: false },
    ),
    /** Per user, on the writes that reach the workers: a token bucket per user ID. */
    rateLimit: Type.Object(
      {
        /** Writes a user regains each second; 0 turns the limit off. */
        writesPerSecond: Type.Integer({
          minimum: 0,
          maximum: 100000,
          description:
            "Writes each user regains per second (429 `M_LIMIT_EXCEEDED` past the user's bucket); 0: no limit.",
        }),
        /** Writes a user may make at once after a quiet spell. */
        burst: Type.Integer({
          minimum: 1,
          maximum: 100000,
          description: 'Writes a user may make at once after a quiet spell.',
        }),
        /** Users tracked at once (bounded memory); past it the least recently active is forgotten. */
        maxUsers: Type.Integer({
          minimum: 1,
          maximum: 10000000,
          description: 'Users whose buckets are kept at once; past it the least recently active is forgotten.',
        }),
      },
      { additionalProperties: false },
    ),
    health: HealthSettingsSchema,
    shutdown: ShutdownSettingsSchema,
    log: LogSettingsSchema,
  },
  { additionalProperties: false },
);

export type GatewayConfig = Static<typeof GatewayConfigSchema>;

export const GATEWAY_ENVIRONMENT: EnvironmentList = [
  { name: 'GATEWAY_HOST', path: ['http', 'host'], kind: 'string' },
  { name: 'GATEWAY_PORT', path: ['http', 'port'], kind: 'integer' },
  { name: 'GATEWAY_MAX_BODY_BYTES', path: ['http', 'maxBodyBytes'], kind: 'integer' },
  { name: 'GATEWAY_MAX_JSON_DEPTH', path: ['http', 'maxJsonDepth'], kind: 'integer' },
  { name: 'GATEWAY_REQUEST_TIMEOUT_MS', path: ['http', 'requestTimeoutMs'], kind: 'integer' },
  { name: 'GATEWAY_MAX_IN_FLIGHT', path: ['http', 'maxInFlight'], kind: 'integer' },
  { name: 'AMQP_URL', path: ['amqp', 'url'], kind: 'list' },
  { name: 'RPC_QUEUE', path: ['amqp', 'queue'], kind: 'string' },
  { name: 'RPC_READ_QUEUE', path: ['amqp', 'readQueue'], kind: 'string' },
  { name: 'AMQP_PUBLISHER_USER_ID', path: ['amqp', 'publisherUserId'], kind: 'string' },
  { name: 'AUTH_KIND', path: ['auth', 'kind'], kind: 'string' },
  { name: 'HOMESERVER_URL', path: ['auth', 'homeserverUrl'], kind: 'string' },
  { name: 'AUTH_CACHE_SECONDS', path: ['auth', 'cacheSeconds'], kind: 'integer' },
  { name: 'AUTH_CACHE_MAX_ENTRIES', path: ['auth', 'cacheMaxEntries'], kind: 'integer' },
  { name: 'AUTH_TIMEOUT_MS', path: ['auth', 'timeoutMs'], kind: 'integer' },
  { name: 'AUTH_TOKEN_FILE', path: ['auth', 'tokenFile'], kind: 'string' },
  { name: 'GATEWAY_RATE_LIMIT_WRITES_PER_SECOND', path: ['rateLimit', 'writesPerSecond'], kind: 'integer' },
  { name: 'GATEWAY_RATE_LIMIT_BURST', path: ['rateLimit', 'burst'], kind: 'integer' },
  { name: 'GATEWAY_RATE_LIMIT_MAX_USERS', path: ['rateLimit', 'maxUsers'], kind: 'integer' },
  { name: 'HEALTH_ENABLED', path: ['health', 'enabled'], kind: 'boolean' },
  { name: 'HEALTH_HOST', path: ['health', 'host'], kind: 'string' },
  { name: 'HEALTH_PORT', path: ['health', 'port'], kind: 'integer' },
  { name: 'SHUTDOWN_TIMEOUT_MS', path: ['shutdown', 'timeoutMs'], kind: 'integer' },
  { name: 'LOG_LEVEL', path: ['log', 'level'], kind: 'string' },
];

const DEFAULT_FILE = new URL('../../config/gateway.json', import.meta.url);
const validate = compileSettingsSchema<GatewayConfig>(GatewayConfigSchema);

/** `config/gateway.json` (or `CONFIG_FILE`) and `GATEWAY_ENVIRONMENT`, validated once and frozen. */
export function loadGatewayConfig(env: NodeJS.ProcessEnv = process.env): Readonly<GatewayConfig> {
  const config = loadSettings({ defaultFile: DEFAULT_FILE, validate, environment: GATEWAY_ENVIRONMENT }, env);
  checkBrokerUrls(config.amqp.url);
  if (config.auth.kind === 'token-file' && config.auth.tokenFile === '') {
    throw new ConfigError(
      'invalid configuration: auth.tokenFile (AUTH_TOKEN_FILE) is required when auth.kind (AUTH_KIND) is token-file',
    );
  }
  return config;
}
