import { Type } from '@sinclair/typebox';

/**
 * One broker URL, or several comma-separated; a list is also an array. The
 * schema takes any text: `checkBrokerUrls` reads each entry when the
 * settings are loaded, and names the one that is wrong.
 */
const BrokerUrlText = Type.String({ minLength: 1, maxLength: 16384 });
export const BrokerUrlsSchema = Type.Union([BrokerUrlText, Type.Array(BrokerUrlText, { minItems: 1, maxItems: 64 })], {
  description:
    'The broker: one node, or every node of a cluster (the variable comma-separated; in the file a string or an array), each a whole `amqp://` or `amqps://` URL with its own credentials and vhost.',
});

/** Settings every process has (the worker and the gateway), defined once. */
export const ShutdownSettingsSchema = Type.Object(
  {
    timeoutMs: Type.Integer({
      minimum: 100,
      maximum: 600000,
      description: 'After a signal, exit anyway (status 1) after this long.',
    }),
  },
  { additionalProperties: false },
);

export const HealthSettingsSchema = Type.Object(
  {
    enabled: Type.Boolean({
      description: 'Serve `/healthz`, `/readyz` and `/metrics` on a listener of their own.',
    }),
    host: Type.String({ minLength: 1, description: 'Address of the health listener.' }),
    /** 0: any free port (logged at start). */
    port: Type.Integer({
      minimum: 0,
      maximum: 65535,
      description: 'Port of the health listener; 0: any free port, logged at start.',
    }),
  },
  { additionalProperties: false },
);

export const LogSettingsSchema = Type.Object(
  {
    level: Type.Union(
      ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
      { description: 'The lowest level logged.' },
    ),
  },
  { additionalProperties: false },
);
