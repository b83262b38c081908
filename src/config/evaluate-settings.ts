import { Type } from '@sinclair/typebox';
import { named, queueType } from './setting-types.js';

/** The `evaluate` op: its own queue, limits, and the cache of compiled rulesets. */
export const EvaluateSettingsSchema = Type.Object(
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
);
