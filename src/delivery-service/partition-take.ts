import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../logging/logger.js';
import { loggable } from '../logging/loggable-error.js';
import type { DeliveryStore, PendingDelivery } from '../store/delivery-store.js';
import type { FinishedWatch } from './delivery-scheduler.js';

/** Whose lease a claim took: one that ran out unreleased (this worker's or another's), or a free one. */
export type Lapsed = 'mine' | 'another' | undefined;

/** What a claimed partition is loaded into (the coordinator's options, in part). */
export interface PartitionTakeParts {
  readonly me: string;
  readonly deliveries: Pick<DeliveryStore, 'listPartition'>;
  readonly intake: { open(partition: number, highestSeq: number): void };
  readonly journal?: {
    stored(deliveries: readonly PendingDelivery[]): void;
    written(partition: number): Promise<void>;
  };
  readonly scheduler: { hold(deliveries: readonly PendingDelivery[]): void; watchFinished(): FinishedWatch };
  readonly consumer: { subscribe(partition: number): Promise<void> };
  readonly writeGraceMs: number;
  readonly logger: Logger;
}

/** The coordinator's view of the claim the take runs under. */
export interface ClaimView {
  /** Whether the claim is still the partition's, and not being let go: a take goes on after each wait only then. */
  holds(): boolean;
  /** Loaded: the partition may be taken in and sent for. */
  loaded(): void;
  /** The load failed under the claim: the partition goes back. */
  failed(): void;
}

/**
 * Claimed: loads what is pending in the partition, then takes its queue
 * in. A read that ends after the claim's lease ran out is dropped: opened,
 * held and consumed then, the partition would run outside the
 * coordinator's view (a later claim's intake line replacing this one
 * leaves its waiting parts to block that claim's handover for good).
 */
export async function takePartition(
  parts: PartitionTakeParts,
  partition: number,
  lapsed: Lapsed,
  claim: ClaimView,
): Promise<void> {
  const graceMs = parts.writeGraceMs;
  try {
    // Another worker's lease: give its last write time to land. This worker's own (taken back after its renewals
    // failed for a lease): its journal knows its writes of the partition, and they are waited for.
    if (lapsed === 'another' && graceMs > 0) await sleep(graceMs);
    if (lapsed === 'mine') await parts.journal?.written(partition);
    if (!claim.holds()) return;
    const pending = await readPending(parts, partition);
    if (!claim.holds()) return;
    const highestSeq = pending.reduce((highest, delivery) => Math.max(highest, delivery.seq), 0);
    parts.intake.open(partition, highestSeq);
    parts.journal?.stored(pending);
    parts.scheduler.hold(pending);
    claim.loaded();
    await parts.consumer.subscribe(partition);
    parts.logger.info({ partition, pending: pending.length, worker: parts.me }, 'delivering a partition');
    // Read once more: a write that failed on this side may have landed all the same, within the grace.
    if (lapsed !== undefined && graceMs > 0) void readAgain(parts, partition, claim, graceMs);
  } catch (error) {
    if (!claim.holds()) return;
    parts.logger.warn({ err: loggable(error), partition }, 'cannot take a delivery partition over yet; released');
    claim.failed();
  }
}

/**
 * Taken over from an expired lease: read once more a grace later, for a
 * write of the last holder that landed after the first read (its record
 * would make this worker skip the part as taken in already). What is
 * held already is ignored (the journal and the scheduler go by ID).
 */
async function readAgain(
  parts: PartitionTakeParts,
  partition: number,
  claim: ClaimView,
  waitMs: number,
): Promise<void> {
  await sleep(waitMs, undefined, { ref: false });
  if (!claim.holds()) return;
  try {
    const pending = await readPending(parts, partition);
    if (!claim.holds()) return;
    parts.journal?.stored(pending);
    parts.scheduler.hold(pending);
  } catch (error) {
    parts.logger.warn({ err: loggable(error), partition }, 'cannot read a delivery partition taken over a second time');
  }
}

/**
 * What the store lists of the partition, less what was done with while the
 * read was under way: a read (a page at a time) that ends after a request
 * it listed was sent and deleted is stale about it, and holding it again
 * would send it again.
 */
async function readPending(
  parts: Pick<PartitionTakeParts, 'deliveries' | 'scheduler'>,
  partition: number,
): Promise<readonly PendingDelivery[]> {
  const finished = parts.scheduler.watchFinished();
  try {
    const pending = await parts.deliveries.listPartition(partition);
    return pending.filter((delivery) => !finished.has(delivery.id));
  } finally {
    finished.end();
  }
}
