import type { DeliveryStore } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { StoreUnavailableError } from '../../src/store/push-store.js';

/** The part of the store the delivery journal writes through. */
export type JournalStore = Pick<DeliveryStore, 'acceptAll' | 'remove' | 'saveRetry' | 'markDone'>;

/** How one operation goes: answered, refused (nothing written), or written with its answer lost. */
export type OperationFate = 'answers' | 'fails' | 'lands-then-fails';

/** How the store treats the operations started from now: each the same way, or each its own (`flaky`). */
export type StoreMood = OperationFate | 'flaky';

export interface CrashableStoreOptions {
  /** How long one operation is out (ms, on the test's clock). */
  readonly delayMs: () => number;
  /** For the `flaky` mood: how one operation goes. */
  readonly fate: () => OperationFate;
  /** Whether an operation still out when its worker dies reaches the database all the same. */
  readonly landsAfterCrash: () => boolean;
}

/**
 * An in-memory delivery store as one worker sees it over a network: every
 * write is out for a while before it lands, and may be refused or land
 * with its answer lost. The worker can die (`crash`): it starts nothing
 * more, and what it had out may land or not, unanswered. `inner` is the
 * database itself, which the worker's successor reads.
 */
export class CrashableDeliveryStore {
  readonly inner = new InMemoryDeliveryStore();
  readonly port: JournalStore;
  mood: StoreMood = 'answers';
  /** When an operation last reported a failure (ms): the journal's retries back off for a second after one. */
  lastFailureAt = Number.NEGATIVE_INFINITY;
  readonly #options: CrashableStoreOptions;
  #out = 0;
  #crashed = false;

  constructor(options: CrashableStoreOptions) {
    this.#options = options;
    const inner = this.inner;
    this.port = {
      acceptAll: async (notifies, deliveries) => this.#operation(async () => inner.acceptAll(notifies, deliveries)),
      remove: async (ids) => this.#operation(async () => inner.remove(ids)),
      saveRetry: async (id, retry) => this.#operation(async () => inner.saveRetry(id, retry)),
      markDone: async (done) => this.#operation(async () => inner.markDone(done)),
    };
  }

  /** Operations out: none once the dead worker's have landed or been lost. */
  get out(): number {
    return this.#out;
  }

  /** The worker died. */
  crash(): void {
    this.#crashed = true;
  }

  #dead(): boolean {
    return this.#crashed;
  }

  async #operation(land: () => Promise<void>): Promise<void> {
    // A dead worker starts nothing; the journal object lingering in the test is answered never.
    if (this.#crashed) return never();
    const fate = this.mood === 'flaky' ? this.#options.fate() : this.mood;
    this.#out += 1;
    await new Promise((resolve) => setTimeout(resolve, this.#options.delayMs()));
    // Read again: it may have died while the operation was out.
    const dead = this.#dead();
    try {
      if (dead ? this.#options.landsAfterCrash() : fate !== 'fails') await land();
    } finally {
      this.#out -= 1;
    }
    if (dead) return never();
    if (fate !== 'answers') {
      this.lastFailureAt = Date.now();
      throw new StoreUnavailableError(fate === 'fails' ? 'the store cannot be reached' : 'the answer was lost');
    }
  }
}

const never = async (): Promise<void> => new Promise<void>(() => undefined);
