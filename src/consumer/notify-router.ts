import { setTimeout as sleep } from 'node:timers/promises';
import type { NotifyRequestBody } from '../contract/ops.js';
import { splitNotify } from '../delivery/notify-parts.js';
import { partitionName } from '../delivery/partitions.js';
import type { Logger } from '../logging/logger.js';
import type { BackoffPolicy } from '../retry/backoff.js';
import { retryUntilDone } from '../retry/retry-until-done.js';
import type { AcceptedNotify } from '../store/delivery-store.js';

/** Publishes one part, persistent, resolved on the broker's confirm (the RPC client's `publish`). */
export interface PartSink {
  /** `publishedAt`: when the `notify` was published (ms), the part's AMQP `timestamp`: its maximum age counts from it. */
  publish(queue: string, body: NotifyRequestBody, messageId: string, publishedAt: number): Promise<void>;
}

/** The intake records of parts (the delivery store's). */
export interface PartRecords {
  findAcceptedMany(ids: readonly string[]): Promise<readonly AcceptedNotify[]>;
}

export interface NotifyRouterOptions {
  readonly partitions: number;
  readonly queueOf: (partition: number) => string;
  readonly sink: PartSink;
  readonly records: PartRecords;
  /** The pace of retries while the broker or the store does not answer. */
  readonly backoff: BackoffPolicy;
  /** How long a reply waits for the parts to be taken in (`delivery.replyWaitMs`). */
  readonly replyWaitMs: number;
  /** Aborted at shutdown: what is not routed yet goes back to the queue. */
  readonly signal: AbortSignal;
  readonly logger: Logger;
  readonly now?: () => number;
}

/** What the parts of a routed `notify` answered, summed: the `notify` reply's body. */
export interface RoutedCounts {
  readonly recipients: number;
  readonly devices: number;
  /** Parts not taken in yet when the reply stopped waiting (`replyWaitMs`): their counts are not in the sums. */
  readonly pending: number;
}

/** Shutdown came before a message's parts were all confirmed: it goes back to the queue. */
export class RouterStoppedError extends Error {
  constructor() {
    super('delivery routing stopped before the notification was routed');
    this.name = 'RouterStoppedError';
  }
}

/** The longest wait between two looks at the parts' intake records. */
const RECORD_POLL_MAX_MS = 200;

/**
 * The delivery queue's consumer (one at a time: single active consumer)
 * splits each `notify` by the partitions of its recipients and publishes
 * one part to each partition's queue, where the worker holding that
 * partition takes it in (docs/delivery.md). Order is kept per partition:
 * a message's part for a partition is published once the previous
 * message's part for that partition is confirmed, so each partition queue
 * receives its parts in the order the delivery queue gave the messages.
 * A part the broker did not confirm is published again (the partition's
 * intake skips a part it took in before, by its ID), and holds back only
 * the later parts of its own partition (and the messages they belong to,
 * up to the delivery queue's prefetch); at shutdown, those not routed go
 * back to the queue, in order.
 */
export class NotifyRouter {
  readonly #options: NotifyRouterOptions;
  readonly #now: () => number;
  /** Per partition, the last part handed to the sink: the next one of that partition goes after it. */
  readonly #tails = new Map<number, Promise<void>>();

  constructor(options: NotifyRouterOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** The part IDs of a message (`<messageId>/<partition name>`). */
  static partId(messageId: string, partition: number): string {
    return `${messageId}/${partitionName(partition)}`;
  }

  /**
   * Routes the message; with `wantCounts`, also waits (at most
   * `replyWaitMs`) until every part was taken in and sums their counts.
   * `publishedAt` (ms) goes with every part. Rejects with
   * `RouterStoppedError` only.
   */
  async route(
    request: NotifyRequestBody,
    messageId: string,
    wantCounts: boolean,
    publishedAt: number = this.#now(),
  ): Promise<RoutedCounts | undefined> {
    const parts = splitNotify(request, this.#options.partitions);
    const ids = parts.map((part) => NotifyRouter.partId(messageId, part.partition));
    const published = parts.map(async (part, index) =>
      this.#publishInOrder(part.partition, part.request, ids[index] as string, publishedAt),
    );
    const settled = await Promise.allSettled(published);
    if (settled.some((result) => result.status === 'rejected')) throw new RouterStoppedError();
    return wantCounts ? this.#counts(ids) : undefined;
  }

  /** Publishes a part after the partition's previous one; rejects with `RouterStoppedError` when either stopped. */
  async #publishInOrder(partition: number, body: NotifyRequestBody, id: string, publishedAt: number): Promise<void> {
    const previous = this.#tails.get(partition) ?? Promise.resolve();
    const work = (async () => {
      // The partition's part before went back to the queue: this one must not overtake it.
      await previous;
      const done = await retryUntilDone(
        async () => {
          await this.#options.sink.publish(this.#options.queueOf(partition), body, id, publishedAt);
          return true;
        },
        {
          policy: this.#options.backoff,
          signal: this.#options.signal,
          onFailure: (error, attempt, retryInMs) => {
            this.#options.logger.warn(
              { err: error, attempt, retryInMs, partition },
              'cannot hand a notify to its delivery partition yet; retrying (later parts of this partition wait)',
            );
          },
        },
      );
      if (done === undefined) throw new RouterStoppedError();
    })();
    this.#tails.set(partition, work);
    // Observed here as well: a tail nobody waits for must not be an unhandled rejection.
    work
      .finally(() => {
        if (this.#tails.get(partition) === work) this.#tails.delete(partition);
      })
      .catch(() => undefined);
    return work;
  }

  /**
   * Waits until every part's intake is recorded (the partitions' holders
   * stored them), at most `replyWaitMs`, and sums the counts of those
   * recorded; `pending` counts the others. A part that is never taken in
   * (dead-lettered, or its partition stalled) costs its reply the wait and
   * nothing else: routing goes on meanwhile.
   */
  async #counts(ids: readonly string[]): Promise<RoutedCounts> {
    const until = this.#now() + this.#options.replyWaitMs;
    let records: readonly AcceptedNotify[] = [];
    let waitMs = 2;
    for (;;) {
      if (this.#options.signal.aborted) throw new RouterStoppedError();
      records = (await this.#options.records.findAcceptedMany(ids).catch(() => undefined)) ?? records;
      const left = until - this.#now();
      if (records.length >= ids.length || left <= 0)
        return {
          recipients: records.reduce((sum, record) => sum + record.recipients, 0),
          devices: records.reduce((sum, record) => sum + record.devices, 0),
          pending: Math.max(0, ids.length - records.length),
        };
      await sleep(Math.min(waitMs, left), undefined, { signal: this.#options.signal }).catch(() => undefined);
      waitMs = Math.min(RECORD_POLL_MAX_MS, waitMs * 2);
    }
  }
}
