import { vi } from 'vitest';
import type { ChunkedWriteBounds } from '../../src/delivery-service/chunked-writes.js';
import { DeliveryJournal } from '../../src/delivery-service/delivery-journal.js';
import { createLogger } from '../../src/logging/logger.js';
import type { PendingDelivery } from '../../src/store/delivery-store.js';
import { CrashableDeliveryStore, type CrashableStoreOptions, type StoreMood } from './crashable-delivery-store.js';
import { aPart, aRequest } from './journal-world.js';

/** What happens next to a worker's journal, as the scheduler, the lease and the store make it happen. */
export type Step =
  | { readonly kind: 'admit'; readonly partition: number; readonly part: string; readonly devices: readonly string[] }
  /** A gateway answered: the scheduler is done with the request. */
  | { readonly kind: 'done'; readonly id: string }
  /** A gateway failed: the scheduler saves the request's backoff. */
  | { readonly kind: 'retry'; readonly id: string }
  | { readonly kind: 'lease'; readonly partition: number; readonly holds: boolean }
  | { readonly kind: 'store'; readonly mood: StoreMood }
  | { readonly kind: 'elapse'; readonly ms: number };

export interface CrashWorldOptions extends CrashableStoreOptions {
  readonly partitions: readonly number[];
  readonly persistAfterMs: number;
  readonly writes: ChunkedWriteBounds;
}

/** What the crash left, as the successor found it, and the invariants it broke. */
export interface Outcome {
  /** Parts acknowledged before the crash. */
  readonly acked: readonly string[];
  /** Requests done with and, at the crash, neither in the store nor to be planned again. */
  readonly confirmed: readonly string[];
  /** What the successor read from the store. */
  readonly stored: readonly string[];
  /** What it planned again from the parts still in the queue. */
  readonly replanned: readonly string[];
  /** Requests done with long enough before the crash, the store answering, to be judged by invariant 2b. */
  readonly settled: number;
  readonly violations: readonly string[];
}

/** After a store failure the journal's marks and deletions wait a second before their next attempt. */
const BACKOFF_MS = 1000;
/**
 * A request done with this long before the crash, the store answering for
 * a second before too, is in the store no more and noted done (or its
 * part recorded): the progress marks' 50 ms, a write out before them, the
 * chunk it waited for, each a few ms.
 */
export const SETTLED_MS = 150;

interface Part {
  readonly partition: number;
  readonly notify: ReturnType<typeof aPart>;
  readonly requests: readonly PendingDelivery[];
}

/**
 * One worker's delivery journal, the real one, over a store that is slow,
 * fails and loses answers, driven step by step until it dies (`crash`),
 * then its successor: it reads the partitions' requests from the store,
 * and plans again each part still in the queue (not acknowledged) whose
 * record is absent, minus what is noted done of it. Run on vi's fake
 * timers: a seed replays exactly.
 */
export class CrashWorld {
  readonly store: CrashableDeliveryStore;
  readonly journal: DeliveryJournal;
  /** The steps so far, for a failure to name. */
  readonly steps: string[] = [];
  readonly #options: CrashWorldOptions;
  readonly #holds = new Map<number, boolean>();
  readonly #parts = new Map<string, Part>();
  readonly #acked = new Set<string>();
  /** When each request was done with. */
  readonly #done = new Map<string, number>();
  readonly #violations: string[] = [];
  #crashed = false;

  constructor(options: CrashWorldOptions) {
    this.#options = options;
    this.store = new CrashableDeliveryStore(options);
    for (const partition of options.partitions) this.#holds.set(partition, true);
    this.journal = new DeliveryJournal({
      store: this.store.port,
      writable: (partition) => this.#holds.get(partition) === true,
      persistAfterMs: options.persistAfterMs,
      logger: createLogger('silent'),
      now: () => Date.now(),
      writes: options.writes,
    });
    this.journal.start();
  }

  get parts(): number {
    return this.#parts.size;
  }

  holds(partition: number): boolean {
    return this.#holds.get(partition) === true;
  }

  /** Requests admitted and not done with yet. */
  open(): string[] {
    return [...this.#parts.values()]
      .flatMap((part) => part.requests.map((r) => r.id))
      .filter((id) => !this.#done.has(id));
  }

  async play(step: Step): Promise<void> {
    this.steps.push(describe(step));
    switch (step.kind) {
      case 'admit': {
        const requests = step.devices.map((device) =>
          aRequest(`${step.part}/${device}`, { partition: step.partition, key: `${String(step.partition)}-${device}` }),
        );
        const part = { partition: step.partition, notify: aPart(step.part), requests };
        this.#parts.set(step.part, part);
        this.journal.admit(step.partition, part.notify, requests).then(
          () => void this.#acknowledged(step.part),
          () => undefined,
        );
        return;
      }
      case 'done':
        this.#done.set(step.id, Date.now());
        void this.#remove(step.id);
        return;
      case 'retry': {
        const now = Date.now();
        const retry = { failures: 1, firstFailedAt: now, retryAt: now + 1000 };
        // Not awaited, as the scheduler does not: the store's answer comes as the clock moves on.
        this.journal.saveRetry(step.id, retry).catch(() => undefined);
        return;
      }
      case 'lease':
        this.#holds.set(step.partition, step.holds);
        return;
      case 'store':
        this.store.mood = step.mood;
        return;
      case 'elapse':
        await vi.advanceTimersByTimeAsync(step.ms);
    }
  }

  /** The worker dies now: what the store holds is judged at this instant, then its successor takes over. */
  async crash(): Promise<Outcome> {
    this.steps.push('crash');
    this.#crashed = true;
    this.store.crash();
    this.journal.close();
    const crashedAt = Date.now();
    const done = new Map(this.#done);
    const confirmed = new Set<string>();
    let settled = 0;
    for (const [id, at] of done) {
      const part = this.#partOf(id);
      const inStore = (await this.store.inner.listPartition(part.partition)).some((d) => d.id === id);
      const progress = await this.store.inner.findProgress(part.notify.id);
      // A failure before it was done with only delays it: every mark and deletion is tried again a second later.
      const isSettled = crashedAt - at >= SETTLED_MS && crashedAt - this.store.lastFailureAt > BACKOFF_MS + SETTLED_MS;
      if (isSettled) settled += 1;
      if (!inStore && (progress.accepted !== undefined || progress.done.has(id))) confirmed.add(id);
      else if (isSettled)
        this.#violations.push(`2b. ${id}, done with ${String(crashedAt - at)} ms before the crash, is not confirmed`);
    }
    // What the dead worker had out lands, or is lost, before its lease lapses and the successor reads.
    await vi.advanceTimersByTimeAsync(SETTLED_MS);
    if (this.store.out > 0) this.#violations.push(`the dead worker still has ${String(this.store.out)} writes out`);
    const { stored, replanned } = await this.#succeed();
    for (const part of this.#parts.values())
      for (const { id } of part.requests) {
        const kept = stored.has(id) || replanned.has(id);
        if (!done.has(id) && !kept) this.#violations.push(`1. ${id}, never done with, is lost`);
        if (confirmed.has(id) && stored.has(id)) this.#violations.push(`2. ${id}, confirmed, is in the store again`);
        if (confirmed.has(id) && replanned.has(id)) this.#violations.push(`2. ${id}, confirmed, is planned again`);
      }
    return {
      acked: [...this.#acked].sort(),
      confirmed: [...confirmed].sort(),
      stored: [...stored].sort(),
      replanned: [...replanned].sort(),
      settled,
      violations: this.#violations,
    };
  }

  /** The next holder: a fresh journal holding what the store has, and the parts of the queue planned again. */
  async #succeed(): Promise<{ stored: Set<string>; replanned: Set<string> }> {
    const successor = new DeliveryJournal({
      store: this.store.inner,
      // It only takes over here; writing is not what is judged.
      writable: () => false,
      persistAfterMs: this.#options.persistAfterMs,
      logger: createLogger('silent'),
    });
    const stored = new Set<string>();
    for (const partition of this.#options.partitions) {
      const deliveries = await this.store.inner.listPartition(partition);
      successor.stored(deliveries);
      for (const delivery of deliveries) stored.add(delivery.id);
    }
    const replanned = new Set<string>();
    for (const [id, part] of this.#parts) {
      if (this.#acked.has(id)) continue;
      const progress = await this.store.inner.findProgress(id);
      if (progress.accepted !== undefined) continue;
      const planned = part.requests.filter((request) => !progress.done.has(request.id));
      for (const request of planned) replanned.add(request.id);
      successor.admit(part.partition, part.notify, planned).catch(() => undefined);
    }
    const held = new Set([...stored, ...replanned]).size;
    if (successor.tracking() !== held)
      this.#violations.push(`the successor tracks ${String(successor.tracking())} requests, not ${String(held)}`);
    successor.close();
    return { stored, replanned };
  }

  /** As the scheduler's removal batches: tried again a second after a failure, until the worker dies. */
  async #remove(id: string): Promise<void> {
    while (!this.#crashed) {
      try {
        await this.journal.remove([id]);
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, BACKOFF_MS));
      }
    }
  }

  /** Invariant 3, judged as the part is acknowledged: its requests not done with, and its record, are stored. */
  async #acknowledged(id: string): Promise<void> {
    if (this.#crashed) return;
    this.#acked.add(id);
    const done = new Set(this.#done.keys());
    const part = this.#partOf(id);
    const stored = new Set((await this.store.inner.listPartition(part.partition)).map((d) => d.id));
    const missing = part.requests.filter((r) => !done.has(r.id) && !stored.has(r.id)).map((r) => r.id);
    if (missing.length > 0) this.#violations.push(`3. ${id} acknowledged, ${missing.join(' ')} not stored`);
    if ((await this.store.inner.findAccepted(id)) === undefined)
      this.#violations.push(`3. ${id} acknowledged before its record is stored`);
  }

  #partOf(id: string): Part {
    const part = this.#parts.get(id.split('/')[0] ?? id);
    if (part === undefined) throw new Error(`no part for ${id}`);
    return part;
  }
}

function describe(step: Step): string {
  switch (step.kind) {
    case 'admit':
      return `admit ${step.part}@${String(step.partition)} [${step.devices.join(' ')}]`;
    case 'done':
      return `done ${step.id}`;
    case 'retry':
      return `retry ${step.id}`;
    case 'lease':
      return `lease ${String(step.partition)} ${step.holds ? 'holds' : 'in doubt'}`;
    case 'store':
      return `store ${step.mood}`;
    case 'elapse':
      return `+${String(step.ms)} ms`;
  }
}
