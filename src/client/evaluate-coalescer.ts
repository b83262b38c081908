import type { Reply } from '../contract/reply.js';
import type { ErrorKind } from '../errors/error-catalogue.js';
import { nestsDeeperThan } from '../matrix/json-depth.js';
import { EncodedBody } from './encoded-body.js';
import { RpcRequestError, RpcTransportError } from './rpc-errors.js';
import type { RequestOptions } from './rpc-client-options.js';

/** How `evaluate()` calls are gathered into one message (docs/client.md#many-events-in-one-message). */
export interface EvaluateCoalescing {
  /** How long a call may wait for others to join its message while another is out, in ms (0.5). */
  readonly windowMs?: number;
  /** Events per message at most (64); the workers take `evaluate.maxBatchEvents` (256). */
  readonly maxEvents?: number;
  /** The events' JSON per message at most, in bytes (1 MiB); the workers take `evaluate.maxRequestBytes` (4 MiB). */
  readonly maxBytes?: number;
  /** Recipients of the events of one message together at most (20,000): the workers' `evaluate.maxBatchRecipients`. */
  readonly maxRecipients?: number;
  /**
   * The workers' `limits.maxJsonDepth` (32). The batch form nests an event
   * two levels deeper than the single form: an event deeper than this less
   * two goes alone, in the single form, and fails alone if it must.
   */
  readonly maxJsonDepth?: number;
}

export const DEFAULT_COALESCING: Required<EvaluateCoalescing> = {
  windowMs: 0.5,
  maxEvents: 64,
  maxBytes: 1024 * 1024,
  maxRecipients: 20_000,
  maxJsonDepth: 32,
};

/**
 * A batch refused as a whole with one of these is sent again, each event
 * alone: the refusal may be one event's doing (a depth or size the batch
 * form adds, a reply or recipient total past the workers' caps, a worker
 * that predates the batch form), and alone each gets its own answer. Other
 * refusals (Unavailable...) would meet each event alone too.
 */
const RESENT_ALONE: ReadonlySet<ErrorKind> = new Set(['TooLarge', 'BadJson']);

/** Sends one message to the evaluate queue: the transport's `request`. */
export type SendEvaluate = (body: object, options: RequestOptions) => Promise<Reply>;

export interface EvaluateCoalescerOptions extends EvaluateCoalescing {
  readonly send: SendEvaluate;
  /** A call's deadline when it gives none: the client's `timeoutMs`. */
  readonly defaultTimeoutMs: number;
  /** `Date.now`, for tests. */
  readonly now?: () => number;
}

/** One event of the batch form: the single form's fields without `op`. */
export type EvaluateItem = object;

interface Waiting {
  readonly json: string;
  /** Its event's recipients, for `maxRecipients`. */
  readonly recipients: number;
  readonly deadline: number;
  readonly resolve: (reply: Reply) => void;
  readonly reject: (error: unknown) => void;
  timer?: NodeJS.Timeout;
  settled: boolean;
}

/**
 * Gathers `evaluate` calls into messages of the batch form, and hands each
 * caller its own event's answer.
 *
 * A call made while no message is out goes at once, alone, in the single
 * form: a lone caller (c = 1) waits for nothing and sends what it always
 * sent. A call made while a message is out waits in a queue, which goes as
 * one message when the last message out has been answered (at the end of
 * that turn of the event loop, so that the callers it answered and who call
 * again at once go in it too), when it reaches `maxEvents` or `maxBytes`,
 * or `windowMs` after its first call, whichever comes first. So under load
 * the events of many callers share one message, one reply and one bulk read
 * of their recipients' rules, and a message out for long (a large room)
 * delays the others by `windowMs` at most. One queued event goes in the
 * single form too.
 *
 * Each call keeps its own deadline: it fails with `timeout` at its own time
 * even if its message is still out; a message's `expiration` is the latest
 * of its calls'.
 */
export class EvaluateCoalescer {
  readonly #send: SendEvaluate;
  readonly #defaultTimeoutMs: number;
  readonly #now: () => number;
  readonly #windowMs: number;
  readonly #maxEvents: number;
  readonly #maxBytes: number;
  readonly #maxRecipients: number;
  /** Events nested deeper than this go alone. */
  readonly #batchDepth: number;
  #queue: Waiting[] = [];
  #queuedBytes = 0;
  #queuedRecipients = 0;
  #window: NodeJS.Timeout | undefined;
  /** Messages sent and not yet answered, or answered in the current turn. */
  #outstanding = 0;

  constructor(options: EvaluateCoalescerOptions) {
    this.#send = options.send;
    this.#defaultTimeoutMs = options.defaultTimeoutMs;
    this.#now = options.now ?? (() => Date.now());
    this.#windowMs = options.windowMs ?? DEFAULT_COALESCING.windowMs;
    this.#maxEvents = Math.max(1, options.maxEvents ?? DEFAULT_COALESCING.maxEvents);
    this.#maxBytes = options.maxBytes ?? DEFAULT_COALESCING.maxBytes;
    this.#maxRecipients = options.maxRecipients ?? DEFAULT_COALESCING.maxRecipients;
    this.#batchDepth = (options.maxJsonDepth ?? DEFAULT_COALESCING.maxJsonDepth) - 2;
  }

  /**
   * One event's answer: the reply envelope of its own evaluation. Rejects
   * with `RpcTransportError` (no reply for it) or `RpcRequestError` (the
   * event cannot be serialized; nothing was sent).
   */
  async evaluate(item: EvaluateItem, timeoutMs?: number): Promise<Reply> {
    if (this.#outstanding === 0 && this.#queue.length === 0) {
      // Sent as the object it is: byte for byte what the client sent before it coalesced.
      return this.#tracked(this.#send({ op: 'evaluate', ...item }, timeoutOption(timeoutMs)), 1);
    }
    const json = serialize(item);
    // Never in a batch: the single form takes it, or refuses it alone.
    if (nestsDeeperThan(json, this.#batchDepth))
      return this.#tracked(this.#send({ op: 'evaluate', ...item }, timeoutOption(timeoutMs)), 1);
    return new Promise<Reply>((resolve, reject) => {
      const deadline = this.#now() + (timeoutMs ?? this.#defaultTimeoutMs);
      const recipients = recipientCount(item);
      const waiting: Waiting = { json, recipients, deadline, resolve, reject, settled: false };
      const bytes = Buffer.byteLength(json);
      if (
        this.#queue.length > 0 &&
        (this.#queuedBytes + bytes > this.#maxBytes || this.#queuedRecipients + recipients > this.#maxRecipients)
      )
        this.#flush();
      this.#queue.push(waiting);
      this.#queuedBytes += bytes;
      this.#queuedRecipients += recipients;
      waiting.timer = setTimeout(
        () => {
          settle(waiting, () => {
            waiting.reject(
              new RpcTransportError('timeout', `no reply within ${timeoutMs ?? this.#defaultTimeoutMs} ms`),
            );
          });
        },
        Math.max(1, deadline - this.#now()),
      );
      if (
        this.#queue.length >= this.#maxEvents ||
        this.#queuedBytes >= this.#maxBytes ||
        this.#queuedRecipients >= this.#maxRecipients
      )
        this.#flush();
      else
        this.#window ??= setTimeout(() => {
          this.#flush();
        }, this.#windowMs);
    });
  }

  /**
   * Several events sent now, in as few messages as the caps allow (not
   * waiting for other calls): each event's answer in order, or why it has
   * none.
   */
  async evaluateMany(items: readonly EvaluateItem[], timeoutMs?: number): Promise<PromiseSettledResult<Reply>[]> {
    const deadline = this.#now() + (timeoutMs ?? this.#defaultTimeoutMs);
    const answers = new Array<Promise<Reply>>(items.length);
    let batch: Waiting[] = [];
    let bytes = 0;
    let recipients = 0;
    const sendBatch = () => {
      if (batch.length > 0) this.#sendMessage(batch);
      batch = [];
      bytes = 0;
      recipients = 0;
    };
    items.forEach((item, index) => {
      let json: string;
      try {
        json = serialize(item);
      } catch (error) {
        answers[index] = Promise.reject(error instanceof Error ? error : new RpcRequestError(String(error)));
        return;
      }
      const size = Buffer.byteLength(json);
      const count = recipientCount(item);
      if (nestsDeeperThan(json, this.#batchDepth)) {
        // A message of its own, at once (see `evaluate`).
        answers[index] = new Promise<Reply>((resolve, reject) => {
          this.#sendMessage([{ json, recipients: count, deadline, resolve, reject, settled: false }]);
        });
        return;
      }
      if (
        batch.length > 0 &&
        (batch.length >= this.#maxEvents || bytes + size > this.#maxBytes || recipients + count > this.#maxRecipients)
      )
        sendBatch();
      answers[index] = new Promise<Reply>((resolve, reject) => {
        batch.push({ json, recipients: count, deadline, resolve, reject, settled: false });
      });
      bytes += size;
      recipients += count;
    });
    sendBatch();
    return Promise.allSettled(answers);
  }

  /** Fails the calls still waiting with `closed` (the messages out fail with the transport's close). */
  close(): void {
    clearTimeout(this.#window);
    this.#window = undefined;
    const queued = this.#queue;
    this.#queue = [];
    this.#queuedBytes = 0;
    this.#queuedRecipients = 0;
    for (const waiting of queued)
      settle(waiting, () => {
        waiting.reject(new RpcTransportError('closed', 'the client was closed'));
      });
  }

  #flush(): void {
    clearTimeout(this.#window);
    this.#window = undefined;
    const queued = this.#queue.filter((waiting) => !waiting.settled);
    this.#queue = [];
    this.#queuedBytes = 0;
    this.#queuedRecipients = 0;
    if (queued.length > 0) this.#sendMessage(queued);
  }

  /** One message for `waiting`: the single form for one event, else the batch form. */
  #sendMessage(waiting: readonly Waiting[]): void {
    const only = waiting.length === 1 ? waiting[0] : undefined;
    // `{"event":…}` becomes `{"op":"evaluate","event":…}`: the text JSON.stringify gives the single form.
    const body = new EncodedBody(
      only === undefined
        ? `{"op":"evaluate","events":[${waiting.map((w) => w.json).join(',')}]}`
        : `{"op":"evaluate",${only.json.slice(1)}`,
    );
    const latest = Math.max(...waiting.map((w) => w.deadline));
    const sent = this.#tracked(this.#send(body, { timeoutMs: Math.max(1, latest - this.#now()) }), waiting.length);
    sent.then(
      (reply) => {
        if (only !== undefined) {
          settle(only, () => {
            only.resolve(reply);
          });
          return;
        }
        if (!reply.ok && RESENT_ALONE.has(reply.error.kind)) {
          // Each with its own deadline; one whose time is up has been failed by its timer.
          for (const w of waiting) if (!w.settled) this.#sendMessage([w]);
          return;
        }
        const results = reply.ok ? resultsOf(reply.body, waiting.length) : undefined;
        waiting.forEach((w, index) => {
          settle(w, () => {
            // The envelope refused for a reason each event would meet alone: every event's answer.
            if (!reply.ok) w.resolve(reply);
            else if (results === undefined)
              w.reject(new RpcTransportError('bad-reply', 'the reply does not hold one result per event'));
            else w.resolve(results[index] as Reply);
          });
        });
      },
      (error: unknown) => {
        for (const w of waiting)
          settle(w, () => {
            w.reject(error);
          });
      },
    );
  }

  /**
   * Counts `sent` as out until it settles; a message of several events
   * until the end of that turn, so that the calls its callers make at once
   * when answered queue up and go together. A message of one event frees
   * the way at once: its caller calling again goes alone, as at c = 1.
   */
  async #tracked(sent: Promise<Reply>, events: number): Promise<Reply> {
    this.#outstanding += 1;
    const release = () => {
      this.#outstanding -= 1;
      if (this.#outstanding === 0 && this.#queue.length > 0) this.#flush();
    };
    const done = () => {
      if (events > 1) {
        setImmediate(release);
        return;
      }
      this.#outstanding -= 1;
      // Calls queued behind it go at the end of this turn, with whatever its caller sends next.
      if (this.#outstanding === 0 && this.#queue.length > 0) {
        this.#outstanding += 1;
        setImmediate(release);
      }
    };
    sent.then(done, done);
    return sent;
  }
}

function timeoutOption(timeoutMs: number | undefined): RequestOptions {
  return timeoutMs === undefined ? {} : { timeoutMs };
}

function settle(waiting: Waiting, how: () => void): void {
  if (waiting.settled) return;
  waiting.settled = true;
  clearTimeout(waiting.timer);
  how();
}

function serialize(item: EvaluateItem): string {
  try {
    return JSON.stringify(item);
  } catch (error) {
    throw new RpcRequestError(`the request body cannot be serialized as JSON: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** The recipients an item names, in either form (0 for what the workers will refuse anyway). */
function recipientCount(item: EvaluateItem): number {
  const { recipients, recipients_by_server: byServer } = item as {
    recipients?: unknown;
    recipients_by_server?: unknown;
  };
  if (Array.isArray(recipients)) return recipients.length;
  if (!Array.isArray(byServer)) return 0;
  let count = 0;
  for (const group of byServer) {
    const localparts = (group as { localparts?: unknown } | null)?.localparts;
    if (Array.isArray(localparts)) count += localparts.length;
  }
  return count;
}

/** The batch reply's `results`, when it holds one envelope per event. */
function resultsOf(body: unknown, count: number): readonly Reply[] | undefined {
  const results = (body as { results?: unknown } | null)?.results;
  if (!Array.isArray(results) || results.length !== count) return undefined;
  return results.every((r) => typeof r === 'object' && r !== null && 'ok' in r) ? (results as Reply[]) : undefined;
}
