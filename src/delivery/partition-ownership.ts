import { partitionsOf } from './partitions.js';

/** A partition's lease as the store has it (store/partition-lease-store.ts). */
export interface LeaseView {
  readonly partition: number;
  readonly owner: string | null;
  readonly until: number;
}

export interface OwnershipView {
  readonly me: string;
  readonly count: number;
  /** The live workers as the store says (this one is counted whether or not its heartbeat was seen yet). */
  readonly workers: readonly string[];
  readonly leases: readonly LeaseView[];
  /** The partitions this worker runs now. */
  readonly running: ReadonlySet<number>;
  readonly now: number;
}

/** What this worker does with partitions this round. */
export interface OwnershipSteps {
  /** Running, but the store gives the lease to another worker (this one stalled past its lease): stop at once. */
  readonly lost: readonly number[];
  /** Running, but assigned to another worker now (one joined): hand over cleanly, then release the lease. */
  readonly release: readonly number[];
  /** Assigned to this worker and free (never claimed, released, or its holder's lease expired): claim. */
  readonly claim: readonly number[];
}

/**
 * One round of partition ownership (docs/delivery.md): every worker runs
 * it on the same view of live workers and leases, so that they agree on
 * who takes what without talking to each other. A partition moves only
 * after its holder released it or its lease expired: never two holders.
 */
export function planOwnership(view: OwnershipView): OwnershipSteps {
  const { me, now } = view;
  const workers = view.workers.includes(me) ? view.workers : [...view.workers, me];
  const mine = new Set(partitionsOf(view.count, workers, me));
  const leases = new Map(view.leases.map((lease) => [lease.partition, lease]));
  const lost: number[] = [];
  const release: number[] = [];
  const claim: number[] = [];
  for (const partition of [...view.running].sort((a, b) => a - b)) {
    const lease = leases.get(partition);
    if (lease?.owner !== me) lost.push(partition);
    else if (!mine.has(partition)) release.push(partition);
  }
  for (const partition of [...mine].sort((a, b) => a - b)) {
    if (view.running.has(partition)) continue;
    const lease = leases.get(partition);
    if (lease === undefined || lease.owner === null || lease.owner === me || lease.until < now) claim.push(partition);
  }
  return { lost, release, claim };
}
