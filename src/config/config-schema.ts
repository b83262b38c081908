import { CloneType, Type, type Static } from '@sinclair/typebox';

const Name = Type.String({ minLength: 1, maxLength: 255 });

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

/**
 * `description` options are documentation only (annotations, which the
 * validator ignores): `npm run docs:config` writes them into
 * docs/configuration.md.
 */
const named = (description: string) => CloneType(Name, { description });
const queueType = (description: string) =>
  Type.Union([Type.Literal('quorum'), Type.Literal('classic')], { description });

/** The worker's whole configuration. Every field is required: defaults come from `config/default.json`. */
export const ConfigSchema = Type.Object(
  {
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
    /** The `evaluate` op: its own queue, limits, and the cache of compiled rulesets. */
    evaluate: Type.Object(
      {
        queue: named('The queue of the `evaluate` op.'),
        /** Classic by default: evaluate changes nothing, so a request lost with a broker node is just sent again. */
        queueType: queueType('Type of the evaluate queue.'),
        prefetch: Type.Integer({ minimum: 1, maximum: 1000, description: 'Evaluations in flight per worker.' }),
        maxRequestBytes: Type.Integer({
          minimum: 1024,
          maximum: 64 * 1024 * 1024,
          description: 'Largest `evaluate` request body, in bytes (`TooLarge`).',
        }),
        maxEventBytes: Type.Integer({
          minimum: 1024,
          maximum: 1024 * 1024,
          description: "The event's compact JSON, in bytes of UTF-8 (`TooLarge`).",
        }),
        maxRecipients: Type.Integer({
          minimum: 1,
          maximum: 1000000,
          description: 'Recipients of one event (`TooLarge`).',
        }),
        maxBatchEvents: Type.Integer({
          minimum: 1,
          maximum: 10000,
          description: 'Events of one request in the batch form (`events`; `TooLarge`).',
        }),
        /** Without it the batch form multiplies `maxRecipients` by `maxBatchEvents`: one message, seconds of a thread. */
        maxBatchRecipients: Type.Integer({
          minimum: 1,
          maximum: 1000000,
          description:
            'Recipients of all the events of one request in the batch form together (`TooLarge` for the whole message).',
        }),
        /**
         * Past RabbitMQ's `max_message_size` (128 MiB by default) the broker
         * closes the channel that publishes the reply, and the request comes
         * back: the cap answers TooLarge instead, far below it.
         */
        maxReplyBytes: Type.Integer({
          minimum: 4096,
          maximum: 64 * 1024 * 1024,
          description:
            "An `evaluate` reply's encoded bytes; past it, `TooLarge` (for one event of a batch whose own answer is past it, or for the whole message).",
        }),
        /** Uncached recipients read from the store per query. */
        loadChunkSize: Type.Integer({
          minimum: 1,
          maximum: 100000,
          description: 'Uncached recipients read per store query.',
        }),
        /** Evaluation yields to other work after this much synchronous time. */
        sliceMs: Type.Integer({
          minimum: 1,
          maximum: 1000,
          description: 'Evaluation yields to other requests after this much CPU time.',
        }),
        cacheMaxEntries: Type.Integer({
          minimum: 0,
          maximum: 100000000,
          description: 'Compiled rulesets kept (one per user), least recently used out first.',
        }),
        cacheMaxBytes: Type.Integer({
          minimum: 0,
          maximum: 64 * 1024 * 1024 * 1024,
          description: 'Estimated bytes of the compiled rulesets kept, least recently used out first.',
        }),
        /** No cached ruleset older than this is used, change event or not. */
        maxStalenessMs: Type.Integer({
          minimum: 0,
          maximum: 3600000,
          description: 'A cached ruleset read longer ago than this is read again, change event or not.',
        }),
        /**
         * Evaluation (parsing, the cache, compiling, the reply) runs in this
         * many worker threads, so that a large room never blocks the event
         * loop serving reads, writes and heartbeats. Each thread has its own
         * cache (the bounds above are shared out) and store connection.
         */
        threads: Type.Integer({
          minimum: 0,
          maximum: 64,
          description:
            'Evaluation threads (parsing, cache, compiling, reply off the event loop); 0: on the event loop itself. The cache bounds are shared out between them (and the event loop, when it evaluates small requests).',
        }),
        /**
         * A request this small is evaluated on the event loop, not handed to
         * a thread: below it the hand-off (the body posted, the thread woken,
         * the reply posted back: some 30 µs at c = 1, and 25-35 µs of the
         * event loop's own CPU) costs more than the evaluation itself
         * (bench/evaluate-handoff.ts; docs/architecture.md). Recipients are
         * counted in the raw body, before any parse; both bounds must hold.
         */
        inlineMaxRecipients: Type.Integer({
          minimum: 0,
          maximum: 10000,
          description:
            'With evaluation threads, a request naming at most this many recipients (and within `evaluate.inlineMaxBytes`) is evaluated on the event loop, the hand-off costing more than the work; 0: every request goes to a thread.',
        }),
        inlineMaxBytes: Type.Integer({
          minimum: 0,
          maximum: 1024 * 1024,
          description:
            'With evaluation threads, a request body of at most this many bytes (and within `evaluate.inlineMaxRecipients`) is evaluated on the event loop; 0: every request goes to a thread.',
        }),
        /**
         * A thread's young generation, like the main thread's (`npm start`
         * runs it with `--max-semi-space-size=8`, a 16 MB young
         * generation): without a bound V8 lets a busy thread's grow to
         * several times that, which the memory bound of issue 14 missed.
         */
        threadYoungGenerationMb: Type.Integer({
          minimum: 0,
          maximum: 1024,
          description:
            "An evaluation thread's V8 young generation, in MB (`resourceLimits.maxYoungGenerationSizeMb`); 0: V8's own.",
        }),
      },
      { additionalProperties: false },
    ),
    /** Push delivery (docs/delivery.md): the `notify` queue, the pending requests, retries and the gateway client. */
    delivery: Type.Object(
      {
        queue: named('The queue of `notify` messages.'),
        /**
         * Quorum by default: once the broker confirmed a `notify`, nothing may
         * be lost with a node. Always single-active-consumer: one worker at a
         * time takes the messages, in publish order, and routes them to the
         * partition queues (`<queue>.p000`, …, of the same type), which is
         * what keeps one device's notifications in order.
         */
        queueType: queueType('Type of the notify queue and of its partition queues.'),
        partitions: Type.Integer({
          minimum: 1,
          maximum: 1000,
          description:
            'Partitions delivery is shared out by among the workers (a user always in the same one): at most this many workers deliver. The same on every worker; changed only with the delivery queues empty.',
        }),
        prefetch: Type.Integer({ minimum: 1, maximum: 1000, description: '`notify` messages taken in at once.' }),
        maxRequestBytes: Type.Integer({
          minimum: 1024,
          maximum: 64 * 1024 * 1024,
          description: 'Largest `notify` message body, in bytes (`TooLarge`).',
        }),
        maxRecipients: Type.Integer({
          minimum: 1,
          maximum: 1000000,
          description: 'Recipients of one `notify` message (`TooLarge`).',
        }),
        /** The pushers of recently pushed users kept in memory (cached-pusher-lookup.ts), dropped on their change events. */
        pusherCacheMaxBytes: Type.Integer({
          minimum: 0,
          maximum: 16 * 1024 * 1024 * 1024,
          description:
            "Estimated bytes of recently pushed users' pushers kept in memory, so that a `notify` to users known reads nothing from the store; a user's entry goes on their pushers' change event. 0: none kept.",
        }),
        pusherCacheMaxStalenessMs: Type.Integer({
          minimum: 0,
          maximum: 3600000,
          description:
            "A user's pushers kept for delivery longer ago than this are read again before a push, change event or not: the bound when no event comes (an import with `--no-events`, a worker that died before its event was confirmed).",
        }),
        pendingCollection: named('MongoDB collection of the gateway requests not delivered yet.'),
        acceptedCollection: named('MongoDB collection recording each `notify` taken in (`messageId` idempotency).'),
        acceptedRetentionSeconds: Type.Integer({
          minimum: 60,
          maximum: 365 * 86400,
          description:
            'How long the record of a taken-in `notify` is kept: a republished message is recognised for this long.',
        }),
        derivedIdWindowSeconds: Type.Integer({
          minimum: 1,
          maximum: 86400,
          description:
            "A `notify` published without `messageId`, `timestamp` or `correlationId` is named by its body and this window of the router's clock: the same bytes again in the same window count as a redelivery (sent once), in a later window as a new message.",
        }),
        replyWaitMs: Type.Integer({
          minimum: 100,
          maximum: 600000,
          description:
            'A `notify` that asks for a reply is answered once its parts are taken in, or after this long with what is known and `pending` (the parts not taken in yet); routing never waits for it.',
        }),
        maxPendingPerDevice: Type.Integer({
          minimum: 1,
          maximum: 10000,
          description: 'Notifications a device keeps waiting while its gateway fails; older ones are dropped.',
        }),
        /** An hour by default: `DEFAULT_AGE_POLICY` in src/delivery/device-backlog.ts says why. */
        maxAgeMs: Type.Integer({
          minimum: 1000,
          maximum: 30 * 86400000,
          description:
            'A waiting notification accepted longer ago than this is dropped unsent (`expired`); the newest badge update of a device is kept.',
        }),
        retryBaseMs: Type.Integer({
          minimum: 1,
          maximum: 3600000,
          description: 'First wait before a failed request is sent again; doubles per failure.',
        }),
        retryMaxMs: Type.Integer({
          minimum: 1,
          maximum: 86400000,
          description: 'Longest wait between two attempts of a request.',
        }),
        giveUpAfterMs: Type.Integer({
          minimum: 1000,
          maximum: 30 * 86400000,
          description: 'A notification still failing this long after its first failure is given up.',
        }),
        persistAfterMs: Type.Integer({
          minimum: 10,
          maximum: 600000,
          description:
            'A `notify` part whose gateway requests are not all done this long after it was taken in has the rest stored, and is acknowledged; requests done sooner never touch the store.',
        }),
        leaseMs: Type.Integer({
          minimum: 1000,
          maximum: 3600000,
          description:
            "A worker's hold on a delivery partition, renewed every third of it: a dead worker's partitions are taken over this long after it stopped renewing.",
        }),
        maxInFlight: Type.Integer({
          minimum: 1,
          maximum: 100000,
          description: 'Gateway requests in flight at once, all gateways together.',
        }),
        maxInFlightPerHost: Type.Integer({
          minimum: 1,
          maximum: 10000,
          description: 'Gateway requests in flight at once to one gateway origin (its connections).',
        }),
        /** As high as the per-host cap by default: one server gets what one gateway origin may, whatever names point at it. */
        maxInFlightPerAddress: Type.Integer({
          minimum: 1,
          maximum: 10000,
          description:
            'Gateway requests in flight at once to one IP address, whatever names point at it; as many may wait, more are retried later.',
        }),
        maxInFlightPerUser: Type.Integer({
          minimum: 1,
          maximum: 10000,
          description:
            "Gateway requests in flight at once for one user's devices; as many may wait, more are retried later.",
        }),
        connectTimeoutMs: Type.Integer({
          minimum: 1,
          maximum: 600000,
          description: 'Connecting to a gateway (TCP and TLS; its name is resolved before, within 5 s).',
        }),
        headersTimeoutMs: Type.Integer({
          minimum: 1,
          maximum: 600000,
          description: "From a request sent to the gateway's response headers.",
        }),
        bodyTimeoutMs: Type.Integer({
          minimum: 1,
          maximum: 600000,
          description: "Reading a gateway's response body.",
        }),
        maxResponseBytes: Type.Integer({
          minimum: 1024,
          maximum: 16 * 1024 * 1024,
          description: "The most of a gateway's response body read.",
        }),
        /** CIDRs opened despite the address policy (docs/delivery.md#which-addresses): empty by default. */
        gatewayIpAllowlist: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
          maxItems: 1000,
          description:
            'Address ranges (CIDR) push gateways may be reached at although the policy denies them (private networks, tests).',
        }),
      },
      { additionalProperties: false },
    ),
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

/**
 * Environment variables, each overriding one setting. The kind says how the
 * text is read; the value is then validated with everything else.
 */
export type EnvironmentKind = 'string' | 'integer' | 'boolean' | 'list';

export const ENVIRONMENT: readonly {
  readonly name: string;
  readonly path: readonly [keyof Config, string];
  readonly kind: EnvironmentKind;
}[] = [
  { name: 'AMQP_URL', path: ['amqp', 'url'], kind: 'list' },
  { name: 'RPC_QUEUE', path: ['amqp', 'queue'], kind: 'string' },
  { name: 'RPC_QUEUE_TYPE', path: ['amqp', 'queueType'], kind: 'string' },
  { name: 'RPC_DELIVERY_LIMIT', path: ['amqp', 'deliveryLimit'], kind: 'integer' },
  { name: 'RPC_DEAD_LETTER_EXCHANGE', path: ['amqp', 'deadLetterExchange'], kind: 'string' },
  { name: 'RPC_DEAD_LETTER_QUEUE', path: ['amqp', 'deadLetterQueue'], kind: 'string' },
  { name: 'RPC_DEAD_LETTER_QUEUE_TYPE', path: ['amqp', 'deadLetterQueueType'], kind: 'string' },
  { name: 'RPC_PREFETCH', path: ['amqp', 'prefetch'], kind: 'integer' },
  { name: 'RPC_READ_QUEUE', path: ['amqp', 'readQueue'], kind: 'string' },
  { name: 'RPC_READ_QUEUE_TYPE', path: ['amqp', 'readQueueType'], kind: 'string' },
  { name: 'RPC_READ_PREFETCH', path: ['amqp', 'readPrefetch'], kind: 'integer' },
  { name: 'EVENTS_EXCHANGE', path: ['amqp', 'eventsExchange'], kind: 'string' },
  { name: 'TRUSTED_PUBLISHERS', path: ['amqp', 'trustedPublishers'], kind: 'list' },
  { name: 'AMQP_HEARTBEAT_SECONDS', path: ['amqp', 'heartbeatSeconds'], kind: 'integer' },
  { name: 'AMQP_RECONNECT_BASE_MS', path: ['amqp', 'reconnectBaseMs'], kind: 'integer' },
  { name: 'AMQP_RECONNECT_MAX_MS', path: ['amqp', 'reconnectMaxMs'], kind: 'integer' },
  { name: 'AMQP_CONNECT_TIMEOUT_MS', path: ['amqp', 'connectTimeoutMs'], kind: 'integer' },
  { name: 'RPC_REPLY_MARGIN_MS', path: ['amqp', 'replyMarginMs'], kind: 'integer' },
  { name: 'MONGODB_URL', path: ['mongodb', 'url'], kind: 'string' },
  { name: 'MONGODB_DATABASE', path: ['mongodb', 'database'], kind: 'string' },
  { name: 'MONGODB_SERVER_SELECTION_TIMEOUT_MS', path: ['mongodb', 'serverSelectionTimeoutMs'], kind: 'integer' },
  { name: 'MONGODB_CONNECT_TIMEOUT_MS', path: ['mongodb', 'connectTimeoutMs'], kind: 'integer' },
  { name: 'MONGODB_SOCKET_TIMEOUT_MS', path: ['mongodb', 'socketTimeoutMs'], kind: 'integer' },
  { name: 'MONGODB_WAIT_QUEUE_TIMEOUT_MS', path: ['mongodb', 'waitQueueTimeoutMs'], kind: 'integer' },
  { name: 'MONGODB_OPERATION_TIMEOUT_MS', path: ['mongodb', 'operationTimeoutMs'], kind: 'integer' },
  { name: 'MONGODB_PARSED_RULES_CACHE_CHARS', path: ['mongodb', 'parsedRulesCacheChars'], kind: 'integer' },
  { name: 'WRITE_MAX_ATTEMPTS', path: ['writes', 'maxAttempts'], kind: 'integer' },
  { name: 'WRITE_BACKOFF_BASE_MS', path: ['writes', 'backoffBaseMs'], kind: 'integer' },
  { name: 'WRITE_BACKOFF_MAX_MS', path: ['writes', 'backoffMaxMs'], kind: 'integer' },
  { name: 'WRITE_RECORDED_WINDOW', path: ['writes', 'recordedWritesWindow'], kind: 'integer' },
  { name: 'WRITE_RULESET_CHARS_IN_FLIGHT', path: ['writes', 'rulesetCharsInFlight'], kind: 'integer' },
  { name: 'READ_CACHE_MAX_ENTRIES', path: ['reads', 'cacheMaxEntries'], kind: 'integer' },
  { name: 'READ_CACHE_MAX_BYTES', path: ['reads', 'cacheMaxBytes'], kind: 'integer' },
  { name: 'READ_CACHE_MAX_STALENESS_MS', path: ['reads', 'maxStalenessMs'], kind: 'integer' },
  { name: 'HEAP_GROWING_PERCENT', path: ['runtime', 'heapGrowingPercent'], kind: 'integer' },
  { name: 'MAX_REQUEST_BYTES', path: ['limits', 'maxRequestBytes'], kind: 'integer' },
  { name: 'MAX_JSON_DEPTH', path: ['limits', 'maxJsonDepth'], kind: 'integer' },
  { name: 'MAX_STRING_BYTES', path: ['limits', 'maxStringBytes'], kind: 'integer' },
  { name: 'MAX_ACTIONS_PER_RULE', path: ['limits', 'maxActionsPerRule'], kind: 'integer' },
  { name: 'MAX_CONDITIONS_PER_RULE', path: ['limits', 'maxConditionsPerRule'], kind: 'integer' },
  { name: 'MAX_USER_RULES', path: ['limits', 'maxUserRules'], kind: 'integer' },
  { name: 'MAX_RULESET_BYTES', path: ['limits', 'maxRulesetBytes'], kind: 'integer' },
  { name: 'MAX_PUSHERS_PER_USER', path: ['limits', 'maxPushersPerUser'], kind: 'integer' },
  { name: 'EVALUATE_QUEUE', path: ['evaluate', 'queue'], kind: 'string' },
  { name: 'EVALUATE_QUEUE_TYPE', path: ['evaluate', 'queueType'], kind: 'string' },
  { name: 'EVALUATE_PREFETCH', path: ['evaluate', 'prefetch'], kind: 'integer' },
  { name: 'EVALUATE_MAX_REQUEST_BYTES', path: ['evaluate', 'maxRequestBytes'], kind: 'integer' },
  { name: 'EVALUATE_MAX_EVENT_BYTES', path: ['evaluate', 'maxEventBytes'], kind: 'integer' },
  { name: 'EVALUATE_MAX_RECIPIENTS', path: ['evaluate', 'maxRecipients'], kind: 'integer' },
  { name: 'EVALUATE_MAX_BATCH_EVENTS', path: ['evaluate', 'maxBatchEvents'], kind: 'integer' },
  { name: 'EVALUATE_MAX_BATCH_RECIPIENTS', path: ['evaluate', 'maxBatchRecipients'], kind: 'integer' },
  { name: 'EVALUATE_MAX_REPLY_BYTES', path: ['evaluate', 'maxReplyBytes'], kind: 'integer' },
  { name: 'EVALUATE_LOAD_CHUNK_SIZE', path: ['evaluate', 'loadChunkSize'], kind: 'integer' },
  { name: 'EVALUATE_SLICE_MS', path: ['evaluate', 'sliceMs'], kind: 'integer' },
  { name: 'EVALUATE_CACHE_MAX_ENTRIES', path: ['evaluate', 'cacheMaxEntries'], kind: 'integer' },
  { name: 'EVALUATE_CACHE_MAX_BYTES', path: ['evaluate', 'cacheMaxBytes'], kind: 'integer' },
  { name: 'EVALUATE_MAX_STALENESS_MS', path: ['evaluate', 'maxStalenessMs'], kind: 'integer' },
  { name: 'DELIVERY_QUEUE', path: ['delivery', 'queue'], kind: 'string' },
  { name: 'DELIVERY_QUEUE_TYPE', path: ['delivery', 'queueType'], kind: 'string' },
  { name: 'DELIVERY_PREFETCH', path: ['delivery', 'prefetch'], kind: 'integer' },
  { name: 'DELIVERY_MAX_REQUEST_BYTES', path: ['delivery', 'maxRequestBytes'], kind: 'integer' },
  { name: 'DELIVERY_MAX_RECIPIENTS', path: ['delivery', 'maxRecipients'], kind: 'integer' },
  { name: 'DELIVERY_PUSHER_CACHE_MAX_BYTES', path: ['delivery', 'pusherCacheMaxBytes'], kind: 'integer' },
  {
    name: 'DELIVERY_PUSHER_CACHE_MAX_STALENESS_MS',
    path: ['delivery', 'pusherCacheMaxStalenessMs'],
    kind: 'integer',
  },
  { name: 'DELIVERY_PENDING_COLLECTION', path: ['delivery', 'pendingCollection'], kind: 'string' },
  { name: 'DELIVERY_ACCEPTED_COLLECTION', path: ['delivery', 'acceptedCollection'], kind: 'string' },
  { name: 'DELIVERY_ACCEPTED_RETENTION_SECONDS', path: ['delivery', 'acceptedRetentionSeconds'], kind: 'integer' },
  { name: 'DELIVERY_DERIVED_ID_WINDOW_SECONDS', path: ['delivery', 'derivedIdWindowSeconds'], kind: 'integer' },
  { name: 'DELIVERY_REPLY_WAIT_MS', path: ['delivery', 'replyWaitMs'], kind: 'integer' },
  { name: 'DELIVERY_MAX_PENDING_PER_DEVICE', path: ['delivery', 'maxPendingPerDevice'], kind: 'integer' },
  { name: 'DELIVERY_MAX_AGE_MS', path: ['delivery', 'maxAgeMs'], kind: 'integer' },
  { name: 'DELIVERY_RETRY_BASE_MS', path: ['delivery', 'retryBaseMs'], kind: 'integer' },
  { name: 'DELIVERY_RETRY_MAX_MS', path: ['delivery', 'retryMaxMs'], kind: 'integer' },
  { name: 'DELIVERY_GIVE_UP_AFTER_MS', path: ['delivery', 'giveUpAfterMs'], kind: 'integer' },
  { name: 'DELIVERY_LEASE_MS', path: ['delivery', 'leaseMs'], kind: 'integer' },
  { name: 'DELIVERY_PARTITIONS', path: ['delivery', 'partitions'], kind: 'integer' },
  { name: 'DELIVERY_PERSIST_AFTER_MS', path: ['delivery', 'persistAfterMs'], kind: 'integer' },
  { name: 'PUSH_GATEWAY_MAX_IN_FLIGHT', path: ['delivery', 'maxInFlight'], kind: 'integer' },
  { name: 'PUSH_GATEWAY_MAX_IN_FLIGHT_PER_HOST', path: ['delivery', 'maxInFlightPerHost'], kind: 'integer' },
  { name: 'PUSH_GATEWAY_MAX_IN_FLIGHT_PER_ADDRESS', path: ['delivery', 'maxInFlightPerAddress'], kind: 'integer' },
  { name: 'PUSH_GATEWAY_MAX_IN_FLIGHT_PER_USER', path: ['delivery', 'maxInFlightPerUser'], kind: 'integer' },
  { name: 'PUSH_GATEWAY_CONNECT_TIMEOUT_MS', path: ['delivery', 'connectTimeoutMs'], kind: 'integer' },
  { name: 'PUSH_GATEWAY_HEADERS_TIMEOUT_MS', path: ['delivery', 'headersTimeoutMs'], kind: 'integer' },
  { name: 'PUSH_GATEWAY_BODY_TIMEOUT_MS', path: ['delivery', 'bodyTimeoutMs'], kind: 'integer' },
  { name: 'PUSH_GATEWAY_MAX_RESPONSE_BYTES', path: ['delivery', 'maxResponseBytes'], kind: 'integer' },
  { name: 'PUSH_GATEWAY_IP_ALLOWLIST', path: ['delivery', 'gatewayIpAllowlist'], kind: 'list' },
  { name: 'EVALUATE_THREADS', path: ['evaluate', 'threads'], kind: 'integer' },
  { name: 'EVALUATE_THREAD_YOUNG_GENERATION_MB', path: ['evaluate', 'threadYoungGenerationMb'], kind: 'integer' },
  { name: 'EVALUATE_INLINE_MAX_RECIPIENTS', path: ['evaluate', 'inlineMaxRecipients'], kind: 'integer' },
  { name: 'EVALUATE_INLINE_MAX_BYTES', path: ['evaluate', 'inlineMaxBytes'], kind: 'integer' },
  { name: 'SHUTDOWN_TIMEOUT_MS', path: ['shutdown', 'timeoutMs'], kind: 'integer' },
  { name: 'HEALTH_ENABLED', path: ['health', 'enabled'], kind: 'boolean' },
  { name: 'HEALTH_HOST', path: ['health', 'host'], kind: 'string' },
  { name: 'HEALTH_PORT', path: ['health', 'port'], kind: 'integer' },
  { name: 'ALLOW_INSECURE_PUSH_GATEWAYS', path: ['pushers', 'allowInsecureGateways'], kind: 'boolean' },
  { name: 'LOG_LEVEL', path: ['log', 'level'], kind: 'string' },
];
