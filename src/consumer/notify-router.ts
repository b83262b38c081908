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
  publish(queue: string, body: NotifyRequestBody, messageId: string): Promise<void>;
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
  /** Aborted at shutdown: what is not routed yet goes back to the queue. */
  readonly signal: AbortSignal;
  readonly logger: Logger;
}

/** What the parts of a routed `notify` answered, summed: the `notify` reply's body. */
export interface RoutedCounts {
  readonly recipients: number;
  readonly devices: number;
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
 * partition takes it in (docs/delivery.md). Messages are routed one after
 * the other: a message's parts are all confirmed before the next
 * message's are published, so each partition queue receives its parts in
 * the order the delivery queue gave the messages. A part the broker did
 * not confirm is published again (the partition's intake skips a part it
 * took in before, by its ID), and holds back the messages after it; at
 * shutdown, those not routed go back to the queue, in order.
 */
export class NotifyRouter {
  readonly #options: NotifyRouterOptions;
  #tail: Promise<unknown> = Promise.resolve();

  constructor(options: NotifyRouterOptions) {
    this.#options = options;
  }

  /** The part IDs of a message (`<messageId>/<partition name>`). */
  static partId(messageId: string, partition: number): string {
    return `${messageId}/${partitionName(partition)}`;
  }

  /**
   * Routes the message; with `wantCounts`, also waits until every part was
   * taken in and sums their counts. Rejects with `RouterStoppedError` only.
   */
  async route(request: NotifyRequestBody, messageId: string, wantCounts: boolean): Promise<RoutedCounts | undefined> {
    const parts = splitNotify(request, this.#options.partitions);
    const ids = parts.map((part) => NotifyRouter.partId(messageId, part.partition));
    const previous = this.#tail;
    const work = (async () => {
      // The message before went back to the queue: this one must not be routed before it.
      await previous.catch((error: unknown) => {
        if (error instanceof RouterStoppedError) throw error;
      });
      const published = await Promise.all(
        parts.map(async (part, index) =>
          retryUntilDone(
            async () => {
              await this.#options.sink.publish(
                this.#options.queueOf(part.partition),
                part.request,
                ids[index] as string,
              );
              return true;
            },
            {
              policy: this.#options.backoff,
              signal: this.#options.signal,
              onFailure: (error, attempt, retryInMs) => {
                this.#options.logger.warn(
                  { err: error, attempt, retryInMs, partition: part.partition },
                  'cannot hand a notify to its delivery partition yet; retrying',
                );
              },
            },
          ),
        ),
      );
      if (published.some((done) => done === undefined)) throw new RouterStoppedError();
    })();
    this.#tail = work;
    work.catch(() => undefined);
    await work;
    return wantCounts ? this.#counts(ids) : undefined;
  }

  /** Waits until every part's intake is recorded (the partitions' holders stored them), and sums their counts. */
  async #counts(ids: readonly string[]): Promise<RoutedCounts> {
    let waitMs = 2;
    for (;;) {
      if (this.#options.signal.aborted) throw new RouterStoppedError();
      const records = await this.#options.records.findAcceptedMany(ids).catch(() => undefined);
      if (records?.length === ids.length) {
        return {
          recipients: records.reduce((sum, record) => sum + record.recipients, 0),
          devices: records.reduce((sum, record) => sum + record.devices, 0),
        };
      }
      await sleep(waitMs, undefined, { signal: this.#options.signal }).catch(() => undefined);
      waitMs = Math.min(RECORD_POLL_MAX_MS, waitMs * 2);
    }
  }
}
