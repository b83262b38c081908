import { Type, type Static } from '@sinclair/typebox';

const Name = Type.String({ minLength: 1, maxLength: 255 });

/** The worker's whole configuration. Every field is required: defaults come from `config/default.json`. */
export const ConfigSchema = Type.Object(
  {
    amqp: Type.Object(
      {
        url: Type.String({ pattern: '^amqps?://' }),
        queue: Name,
        queueType: Type.Union([Type.Literal('quorum'), Type.Literal('classic')]),
        deliveryLimit: Type.Integer({ minimum: 1, maximum: 1000 }),
        deadLetterExchange: Name,
        deadLetterQueue: Name,
        prefetch: Type.Integer({ minimum: 1, maximum: 65535 }),
        eventsExchange: Name,
      },
      { additionalProperties: false },
    ),
    mongodb: Type.Object(
      {
        url: Type.String({ pattern: '^mongodb(\\+srv)?://' }),
        database: Name,
        accountDataCollection: Name,
        pushersCollection: Name,
        serverSelectionTimeoutMs: Type.Integer({ minimum: 100, maximum: 120000 }),
      },
      { additionalProperties: false },
    ),
    writes: Type.Object(
      {
        maxAttempts: Type.Integer({ minimum: 1, maximum: 100 }),
        backoffBaseMs: Type.Integer({ minimum: 0, maximum: 10000 }),
        backoffMaxMs: Type.Integer({ minimum: 0, maximum: 60000 }),
        recordedWritesWindow: Type.Integer({ minimum: 1, maximum: 10000 }),
      },
      { additionalProperties: false },
    ),
    limits: Type.Object(
      { maxRequestBytes: Type.Integer({ minimum: 1024, maximum: 16 * 1024 * 1024 }) },
      { additionalProperties: false },
    ),
    pushers: Type.Object({ allowInsecureGateways: Type.Boolean() }, { additionalProperties: false }),
    log: Type.Object(
      {
        level: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export type Config = Static<typeof ConfigSchema>;

/**
 * Environment variables, each overriding one setting. The kind says how the
 * text is read; the value is then validated with everything else.
 */
export const ENVIRONMENT: readonly { readonly name: string; readonly path: readonly [keyof Config, string]; readonly kind: 'string' | 'integer' | 'boolean' }[] = [
  { name: 'AMQP_URL', path: ['amqp', 'url'], kind: 'string' },
  { name: 'RPC_QUEUE', path: ['amqp', 'queue'], kind: 'string' },
  { name: 'RPC_QUEUE_TYPE', path: ['amqp', 'queueType'], kind: 'string' },
  { name: 'RPC_DELIVERY_LIMIT', path: ['amqp', 'deliveryLimit'], kind: 'integer' },
  { name: 'RPC_DEAD_LETTER_EXCHANGE', path: ['amqp', 'deadLetterExchange'], kind: 'string' },
  { name: 'RPC_DEAD_LETTER_QUEUE', path: ['amqp', 'deadLetterQueue'], kind: 'string' },
  { name: 'RPC_PREFETCH', path: ['amqp', 'prefetch'], kind: 'integer' },
  { name: 'EVENTS_EXCHANGE', path: ['amqp', 'eventsExchange'], kind: 'string' },
  { name: 'MONGODB_URL', path: ['mongodb', 'url'], kind: 'string' },
  { name: 'MONGODB_DATABASE', path: ['mongodb', 'database'], kind: 'string' },
  { name: 'MONGODB_SERVER_SELECTION_TIMEOUT_MS', path: ['mongodb', 'serverSelectionTimeoutMs'], kind: 'integer' },
  { name: 'WRITE_MAX_ATTEMPTS', path: ['writes', 'maxAttempts'], kind: 'integer' },
  { name: 'WRITE_BACKOFF_BASE_MS', path: ['writes', 'backoffBaseMs'], kind: 'integer' },
  { name: 'WRITE_BACKOFF_MAX_MS', path: ['writes', 'backoffMaxMs'], kind: 'integer' },
  { name: 'WRITE_RECORDED_WINDOW', path: ['writes', 'recordedWritesWindow'], kind: 'integer' },
  { name: 'MAX_REQUEST_BYTES', path: ['limits', 'maxRequestBytes'], kind: 'integer' },
  { name: 'ALLOW_INSECURE_PUSH_GATEWAYS', path: ['pushers', 'allowInsecureGateways'], kind: 'boolean' },
  { name: 'LOG_LEVEL', path: ['log', 'level'], kind: 'string' },
];
