import { Type } from '@sinclair/typebox';
import { named, queueType } from './setting-types.js';

/** Push delivery (docs/delivery.md): the `notify` queue, the pending requests, retries and the gateway client. */
export const DeliverySettingsSchema = Type.Object(
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
);
