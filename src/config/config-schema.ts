import { Type, type Static } from '@sinclair/typebox';
import { DeliverySettingsSchema } from './delivery-settings.js';
import { EvaluateSettingsSchema } from './evaluate-settings.js';
import {
  BrokerUrlsSchema,
  HealthSettingsSchema,
  LogSettingsSchema,
  ShutdownSettingsSchema,
} from './process-settings.js';
import { Name, named, queueType } from './setting-types.js';

/** The worker's whole configuration. Every field is required: defaults come from `config/default.json`. */
export const ConfigSchema = Type.Object(
  {
    /** Any names here: `loadConfig` checks them against the roles (worker-roles.ts) and names what is wrong. */
    worker: Type.Object(
      {
        roles: Type.Array(Type.String({ minLength: 1, maxLength: 32 }), {
          maxItems: 16,
          description:
            'What this worker runs (the variable comma-separated), one or more of: `rpc` the request queue, `read` the read queue, `evaluate` the evaluate queue, `deliver` push delivery (the `notify` router and the partitions). See docs/operations.md#running-by-role.',
        }),
      },
      { additionalProperties: false },
    ),
    amqp: Type.Object(
      {
        /** One node, or every node of a cluster (`AMQP_URL` comma-separated): see `parseBrokerAddresses`. */
        url: BrokerUrlsSchema,
        queue: named('The request queue: every push-rule and pusher op (not `evaluate`, not `notify`).'),
        queueType: queueType('Type of the request queue.'),
        deliveryLimit: Type.Integer({
          minimum: 1,
          maximum: 1000,
          description: 'Quorum only: deliveries of a request before it is dead-lettered.',
        }),
        deadLetterExchange: named(
          'The exchange (fanout) that unanswerable requests, and requests past the delivery limit, are dead-lettered to.',
        ),
        deadLetterQueue: named('The queue of the dead-letter exchange, where those requests wait for an operator.'),
        deadLetterQueueType: queueType(
          'Type of the dead-letter queue. It is not needed to serve: a worker that cannot declare it warns and serves.',
        ),
        prefetch: Type.Integer({
          minimum: 1,
          maximum: 65535,
          description: 'Requests in flight per worker from the request queue.',
        }),
        /** Read-only ops are also served from this queue (classic by default: a read lost with a node is simply asked again). */
        readQueue: named('The read queue: the read-only ops are also served from it.'),
        readQueueType: queueType('Type of the read queue.'),
        readPrefetch: Type.Integer({
          minimum: 1,
          maximum: 65535,
          description: 'Reads in flight per worker from the read queue.',
        }),
        eventsExchange: named(
          'The topic exchange that change events are published to (routing key `m.push_rules` or `m.pushers`).',
        ),
        /** AMQP users whose requests are served; empty: any publisher. */
        trustedPublishers: Type.Array(Name, {
          uniqueItems: true,
          description:
            'Broker users whose requests are served (the variable comma-separated); empty: anyone who can publish, and no homeserver ops.',
        }),
        heartbeatSeconds: Type.Integer({
          minimum: 0,
          maximum: 600,
          description: 'Heartbeat interval asked of the broker for the connection; 0: no heartbeats.',
        }),
        reconnectBaseMs: Type.Integer({
          minimum: 10,
          maximum: 60000,
          description:
            'Shortest jittered wait between two rounds over every node. The first attempt after a loss, and each next node of a round, are immediate.',
        }),
        reconnectMaxMs: Type.Integer({
          minimum: 10,
          maximum: 300000,
          description: 'Longest jittered wait between two rounds over every node; not below `amqp.reconnectBaseMs`.',
        }),
        /** One attempt at one node (TCP, AMQP handshake, declaring and consuming): past it, the next node. */
        connectTimeoutMs: Type.Integer({
          minimum: 100,
          maximum: 120000,
          description:
            'One attempt at one node (TCP, AMQP handshake, declaring and consuming); past it, the next node. Also how long a write waits for the broker to confirm its change events before the request goes back to the queue.',
        }),
        /** Work on a request stops this long before its deadline (at most a tenth of its expiration), for the reply to reach the caller in time. */
        replyMarginMs: Type.Integer({
          minimum: 0,
          maximum: 10000,
          description:
            'Work on a request stops this long before its deadline (at most a tenth of its `expiration`), so that its `Unavailable` reply reaches the caller before the caller gives up.',
        }),
      },
      { additionalProperties: false },
    ),
    mongodb: Type.Object(
      {
        url: Type.String({ pattern: '^mongodb(\\+srv)?://', description: 'The MongoDB connection string.' }),
        database: named('The database of both collections.'),
        accountDataCollection: named(
          'One document per user: push rules, pushers, versions, recorded writes. Set in the file only.',
        ),
        pushersCollection: named(
          "Pushers of the old layout (one document each), moved into the users' lists at start-up; `<name>_by_key` holds the owners of each app ID and pushkey. Set in the file only.",
        ),
        serverSelectionTimeoutMs: Type.Integer({
          minimum: 100,
          maximum: 120000,
          description:
            'How long an operation waits for a server to send it to (an unreachable database, a replica set electing a primary) before `Unavailable`.',
        }),
        /** The driver's `connectTimeoutMS`: a TCP connection and its handshake (and each monitoring check). */
        connectTimeoutMs: Type.Integer({
          minimum: 100,
          maximum: 120000,
          description:
            "The driver's `connectTimeoutMS`: a new connection's TCP connect and handshake, and each monitoring check of a server.",
        }),
        /** The driver's `socketTimeoutMS`: a connection whose server is silent this long during an operation is closed. */
        socketTimeoutMs: Type.Integer({
          minimum: 100,
          maximum: 120000,
          description:
            "The driver's `socketTimeoutMS`: a connection whose server stays silent this long during an operation is closed (`Unavailable`). Raise it for an operation that legitimately takes longer, such as building an index over a large collection at the first start.",
        }),
        /** The driver's `waitQueueTimeoutMS`: how long an operation waits for a pooled connection. */
        waitQueueTimeoutMs: Type.Integer({
          minimum: 100,
          maximum: 120000,
          description:
            "The driver's `waitQueueTimeoutMS`: how long an operation waits for a pooled connection before `Unavailable`.",
        }),
        /** Each store operation is given up after this long, or at its request's deadline if that comes first. */
        operationTimeoutMs: Type.Integer({
          minimum: 100,
          maximum: 120000,
          description:
            "Each store operation is given up after this long, or at its request's deadline if that comes first (`Unavailable`).",
        }),
        /** Characters of stored ruleset text whose parse is kept for the next read of the same text; 0: none. */
        parsedRulesCacheChars: Type.Integer({
          minimum: 0,
          maximum: 1024 * 1024 * 1024,
          description:
            'Characters of stored ruleset text whose parse is kept for the next read of the same user at the same version; 0: off.',
        }),
      },
      { additionalProperties: false },
    ),
    writes: Type.Object(
      {
        maxAttempts: Type.Integer({
          minimum: 1,
          maximum: 100,
          description: 'Compare-and-set rounds of a write before `Unavailable`.',
        }),
        backoffBaseMs: Type.Integer({
          minimum: 0,
          maximum: 10000,
          description: 'Shortest jittered wait between two compare-and-set rounds.',
        }),
        backoffMaxMs: Type.Integer({
          minimum: 0,
          maximum: 60000,
          description: 'Longest jittered wait between two compare-and-set rounds.',
        }),
        recordedWritesWindow: Type.Integer({
          minimum: 1,
          maximum: 10000,
          description:
            'Recent `messageId`s remembered per user, each with its reply, so that a retried write is applied once.',
        }),
        /** Characters of stored ruleset text that rule writes may be processing at once; 0: no bound. */
        rulesetCharsInFlight: Type.Integer({
          minimum: 0,
          maximum: 1024 * 1024 * 1024,
          description:
            'Characters of stored ruleset text that rule writes process at once: a larger ruleset waits its turn, one over the bound runs alone; 0: no bound.',
        }),
      },
      { additionalProperties: false },
    ),
    /**
     * Push-rule reads answered from memory. Each worker keeps the rules it
     * read last, dropped by the change event of every write (published and
     * confirmed before the write is answered) and by a lost subscription,
     * and never served once read longer ago than `maxStalenessMs`.
     */
    reads: Type.Object(
      {
        cacheMaxEntries: Type.Integer({
          minimum: 0,
          maximum: 10_000_000,
          description:
            'Users whose push rules a worker keeps in memory for reads (`get_pushrules`, `get_pushrule*`), least recently used out first; 0: every read goes to the store.',
        }),
        cacheMaxBytes: Type.Integer({
          minimum: 0,
          maximum: 64 * 1024 * 1024 * 1024,
          description: 'Estimated bytes of the push rules kept for reads, least recently used out first.',
        }),
        maxStalenessMs: Type.Integer({
          minimum: 0,
          maximum: 3600000,
          description:
            'Push rules kept for reads longer ago than this are read again, change event or not: the bound when no event comes (an import, a write answered `Unavailable` that went through later).',
        }),
      },
      { additionalProperties: false },
    ),
    limits: Type.Object(
      {
        maxRequestBytes: Type.Integer({
          minimum: 1024,
          maximum: 4 * 1024 * 1024,
          description: 'Largest request body, in bytes (`TooLarge`).',
        }),
        // A rule with a tweak object needs 4 levels. Past a few thousand,
        // recursive code (JSON.stringify of a stored value, say) runs out of
        // stack, so the ceiling stays far below that.
        maxJsonDepth: Type.Integer({
          minimum: 8,
          maximum: 512,
          description:
            'Arrays and objects nested in a request, the envelope counting as one; checked before the body is parsed (`BadJson`).',
        }),
        maxStringBytes: Type.Integer({
          minimum: 64,
          maximum: 1024 * 1024,
          description: 'Longest string or key in a request, in bytes of UTF-8 (`InvalidParam`).',
        }),
        maxActionsPerRule: Type.Integer({
          minimum: 1,
          maximum: 10000,
          description: 'Actions of one rule (`InvalidParam`).',
        }),
        maxConditionsPerRule: Type.Integer({
          minimum: 1,
          maximum: 10000,
          description: 'Conditions of one rule (`InvalidParam`).',
        }),
        maxUserRules: Type.Integer({
          minimum: 1,
          maximum: 100000,
          description: "A user's own rules, all kinds together (`TooLarge`).",
        }),
        // MongoDB refuses documents over 16 MiB; the ruleset shares its
        // document with the recorded writes, so it stays well below.
        maxRulesetBytes: Type.Integer({
          minimum: 64 * 1024,
          maximum: 8 * 1024 * 1024,
          description:
            "A user's stored ruleset JSON, in bytes; at most 8 MiB, half MongoDB's document limit (`TooLarge`).",
        }),
        maxPushersPerUser: Type.Integer({
          minimum: 1,
          maximum: 10000,
          description: 'Pushers of one user (`TooLarge`).',
        }),
      },
      { additionalProperties: false },
    ),
    evaluate: EvaluateSettingsSchema,
    delivery: DeliverySettingsSchema,
    /** The worker process's own runtime. */
    runtime: Type.Object(
      {
        /**
         * V8's heap growing factor as a percentage over the live heap
         * (`--heap-growing-percent`): how much garbage may pile up before a
         * full collection. 0: V8's own, which lets the heap grow up to 4×.
         */
        heapGrowingPercent: Type.Integer({
          minimum: 0,
          maximum: 1000,
          description:
            "V8's `--heap-growing-percent`: garbage let pile up before a full collection, in % of the live heap; 0: V8's own, up to 300%.",
        }),
      },
      { additionalProperties: false },
    ),
    shutdown: ShutdownSettingsSchema,
    health: HealthSettingsSchema,
    pushers: Type.Object(
      {
        allowInsecureGateways: Type.Boolean({
          description: 'Accept `http://` push gateway URLs in HTTP pushers. Development only.',
        }),
      },
      { additionalProperties: false },
    ),
    log: LogSettingsSchema,
  },
  { additionalProperties: false },
);

export type Config = Static<typeof ConfigSchema>;
