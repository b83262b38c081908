import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { NotifyRequestBody } from '../contract/ops.js';
import { deliveryPusherOf } from '../delivery/delivery-pusher-of.js';
import { planIntake, pushedUserIds } from '../delivery/intake-plan.js';
import type { Logger } from '../logging/logger.js';
import type { BackoffPolicy } from '../retry/backoff.js';
import { retryUntilDone } from '../retry/retry-until-done.js';
import type { AcceptedNotify, DeliveryStore, PendingDelivery } from '../store/delivery-store.js';
import { StoreUnavailableError } from '../store/push-store.js';
import { loggable } from '../logging/loggable-error.js';
import type { PusherLookup } from './pusher-lookup.js';

/** Where the intake hands what it stored: the scheduler (delivery-scheduler.ts). */
export interface DeliveryHolder {
  hold(deliveries: readonly PendingDelivery[], plannedAt: number): void;
}

/** Whether this worker may still take a partition's messages in: it holds the lease, and the lease is not in doubt. */
export interface IntakeGate {
  takesIn(partition: number, now: number): boolean;
}

/** What makes a taken-in part safe to acknowledge (delivery-journal.ts). */
export interface PartJournal {
  admit(partition: number, notify: AcceptedNotify, deliveries: readonly PendingDelivery[]): Promise<void>;
  /** What of the part was done with here and may be missing from a progress read begun now, and until `end`. */
  watchDone(part: string): { readonly ids: ReadonlySet<string>; end(): void };
  flush(partition: number): Promise<void>;
  /** The parts a handover's flush could not secure go back to the queue (their acknowledgement refused). */
  returnUnsecured(partition: number): void;
  forget(partition: number): void;
}

export interface NotifyIntakeOptions {
  readonly store: Pick<DeliveryStore, 'findProgress'>;
  readonly journal: PartJournal;
  readonly pushers: PusherLookup;
  readonly holder: DeliveryHolder;
  readonly gate: IntakeGate;
  /** The pace of retries while the store does not answer. */
  readonly backoff: BackoffPolicy;
  /** Aborted at shutdown: an intake still waiting for the store gives up, and its message goes back to the queue. */
  readonly signal: AbortSignal;
  readonly logger: Logger;
  readonly observer?: { emailPushersSkipped(count: number): void } | undefined;
  readonly now?: () => number;
}

/** The `notify` reply's body (docs/delivery.md). */
export interface IntakeResult {
  readonly recipients: number;
  readonly devices: number;
  /** Its `messageId` was taken in before: nothing was scheduled again. */
  readonly replayed: boolean;
}

/**
 * The intake stopped (shutdown, or the partition handed over) before the
 * store took the message: it must go back to the queue.
 */
export class IntakeStoppedError extends Error {
  constructor() {
    super('delivery intake stopped before the notification was stored');
    this.name = 'IntakeStoppedError';
  }
}

/** A planned message, and when it may be acknowledged. */
type Planned = IntakeResult & { readonly secured: Promise<void> };

/** How often a message waiting for its partition's lease to hold again looks. */
const GATE_POLL_MS = 100;

/** One partition's intake order. */
interface PartitionLine {
  lastSeq: number;
  /** The previous message's work: the next is stored strictly after it. */
  tail: Promise<unknown>;
  /** Being drained: what waits for the store gives up and goes back to the queue. */
  closed: boolean;
  /** Aborted with `closed`: ends a wait between two attempts at once. */
  readonly stop: AbortController;
}

/**
 * Takes the `notify` parts of the partitions this worker holds in: reads
 * the recipients' pushers, plans the gateway requests
 * (delivery/intake-plan.ts), stores them, and hands them to the scheduler.
 * Once `accept` resolved, every request is in the store: the message may
 * be acknowledged.
 *
 * A partition's messages are stored in the order `accept` was called for
 * them (the order its queue's single active consumer receives them in),
 * each with a higher `seq` than every request of the partition stored
 * before, whoever stored it (`open` is given the highest): a message that
 * waits for the store holds back the partition's next ones, so that one
 * device's notifications never overtake each other. When one gives up
 * (shutdown, handover), every later one of its partition gives up too, and
 * they all go back to the queue in order.
 */
export class NotifyIntake {
  readonly #options: NotifyIntakeOptions;
  readonly #now: () => number;
  readonly #lines = new Map<number, PartitionLine>();

  constructor(options: NotifyIntakeOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** The partition is taken over: its next requests are ordered after `highestSeq`, the highest stored. */
  open(partition: number, highestSeq: number): void {
    this.#lines.set(partition, {
      lastSeq: highestSeq,
      tail: Promise.resolve(),
      closed: false,
      stop: new AbortController(),
    });
  }

  /**
   * Stops taking the partition in: what waits gives up (back to the queue),
   * and what was taken in is secured (`keep`: stored where not done, then
   * acknowledged) or, when another worker took the partition over, let go
   * unacknowledged (back to the queue for it).
   */
  async drain(partition: number, keep = true): Promise<void> {
    const line = this.#lines.get(partition);
    if (line !== undefined) {
      line.closed = true;
      line.stop.abort();
      await line.tail.catch(() => undefined);
      if (this.#lines.get(partition) === line) this.#lines.delete(partition);
    }
    if (keep) {
      await this.#options.journal.flush(partition);
      // Not secured (the store down): back to the queue now. The queue's consumer is closed once every part taken
      // in is settled, and only then is the lease released: a part left waiting would hold both for good.
      this.#options.journal.returnUnsecured(partition);
    } else this.#options.journal.forget(partition);
  }

  /**
   * Resolves once the message may be acknowledged (every request it
   * planned done with or stored). `publishedAt` (ms): when the `notify`
   * was published (the part's AMQP `timestamp`), the start of its
   * requests' maximum age; now when absent. Rejects with `IntakeStoppedError` (the
   * message goes back to the queue), or with a failure the store gives for
   * good.
   */
  async accept(
    request: NotifyRequestBody,
    messageId: string | undefined,
    partition: number,
    publishedAt?: number,
  ): Promise<IntakeResult> {
    const line = this.#lines.get(partition);
    if (line === undefined || line.closed) throw new IntakeStoppedError();
    // Taken now, before any wait: the message's place in intake order.
    const acceptedAt = this.#now();
    // The maximum age counts from the publish (a part waits in queues, and may be taken in again after a crash);
    // a publisher's clock ahead of this worker's counts as now.
    const sentAt = Math.min(publishedAt ?? acceptedAt, acceptedAt);
    const seq = Math.max(line.lastSeq + 1, acceptedAt * 1000);
    line.lastSeq = seq;
    const previous = line.tail;
    // Once, outside the retries: a retry after a write that half went through stores the same IDs.
    const notifyId = messageId ?? randomUUID();
    const work = (async () => {
      // The message before gave up: this one must not be stored before it is.
      await previous.catch((error: unknown) => {
        if (error instanceof IntakeStoppedError) throw error;
      });
      return this.#retrying(line, async () => {
        // Begun before the progress read: a request of the part done with here (read from the store at a
        // takeover and sent) whose mark the read may not list is not planned again.
        const doneHere = messageId === undefined ? undefined : this.#options.journal.watchDone(messageId);
        try {
          let done: ReadonlySet<string> = new Set();
          if (messageId !== undefined) {
            const progress = await this.#options.store.findProgress(messageId);
            const found = progress.accepted;
            if (found !== undefined)
              return {
                recipients: found.recipients,
                devices: found.devices,
                replayed: true,
                secured: Promise.resolve(),
              };
            done = progress.done;
          }
          const pushers = await this.#options.pushers.listPushersOfUsers(pushedUserIds(request));
          const plan = planIntake(request, (userId) => (pushers.get(userId) ?? []).map(deliveryPusherOf), {
            notifyId,
            partition,
            seq,
            acceptedAt: sentAt,
          });
          if (plan.emailPushers > 0) this.#options.observer?.emailPushersSkipped(plan.emailPushers);
          // Checked last, right before sending starts: a worker whose lease is in doubt must not send what another
          // worker may have taken over already. It waits: the lease is renewed, or the partition handed over.
          await this.#gateOpen(line, partition);
          // Registered before the requests go, so that none is done with before the journal knows it.
          // Taken in before by a worker that died: what it delivered is not sent again.
          const skipped = doneHere?.ids;
          const deliveries =
            done.size === 0 && (skipped === undefined || skipped.size === 0)
              ? plan.deliveries
              : plan.deliveries.filter((d) => !done.has(d.id) && skipped?.has(d.id) !== true);
          const secured = this.#options.journal.admit(
            partition,
            { id: notifyId, recipients: plan.recipients, devices: plan.devices, acceptedAt },
            deliveries,
          );
          this.#options.holder.hold(deliveries, acceptedAt);
          return { recipients: plan.recipients, devices: plan.devices, replayed: false, secured };
        } finally {
          doneHere?.end();
        }
      });
    })();
    // The next message waits for this one's planning only, not for it to be secured.
    line.tail = work;
    // Observed here as well: a tail nobody waits for must not be an unhandled rejection.
    work.catch(() => undefined);
    const { secured, ...result } = await work;
    await secured;
    return result;
  }

  /** Resolves once the partition's lease holds; rejects with `IntakeStoppedError` once the partition is drained. */
  async #gateOpen(line: PartitionLine, partition: number): Promise<void> {
    while (!this.#options.gate.takesIn(partition, this.#now())) {
      if (line.closed || this.#options.signal.aborted) throw new IntakeStoppedError();
      await sleep(GATE_POLL_MS, undefined, { signal: AbortSignal.any([this.#options.signal, line.stop.signal]) }).catch(
        () => undefined,
      );
    }
  }

  /**
   * Retries while the store is unavailable (it comes back) and the
   * partition is still this worker's; any other failure (the store
   * refusing the write, a bug) would fail the same way every time and hold
   * back every message after it, so it is thrown.
   */
  async #retrying(line: PartitionLine, operation: () => Promise<Planned>): Promise<Planned> {
    let fatal: { readonly error: unknown } | undefined;
    const state = { stopped: false };
    const guarded = async (): Promise<Planned | undefined> => {
      try {
        return await operation();
      } catch (error) {
        if (error instanceof IntakeStoppedError) {
          state.stopped = true;
          return undefined;
        }
        if (error instanceof StoreUnavailableError) {
          if (line.closed) {
            state.stopped = true;
            return undefined;
          }
          throw error;
        }
        fatal = { error };
        return undefined;
      }
    };
    const result = await retryUntilDone(guarded, {
      policy: this.#options.backoff,
      signal: AbortSignal.any([this.#options.signal, line.stop.signal]),
      onFailure: (error, attempt, retryInMs) => {
        this.#options.logger.warn(
          { err: loggable(error), attempt, retryInMs },
          'cannot store a notify message yet; it waits (unacknowledged) and is retried',
        );
      },
    });
    if (fatal !== undefined) throw fatal.error;
    if (result === undefined || state.stopped) throw new IntakeStoppedError();
    return result;
  }
}
