import { sharedDefaultRuleset } from '../evaluation/compile-ruleset.js';
import type { CompiledRuleset } from '../evaluation/compiled-ruleset.js';
import { StoreUnavailableError } from '../store/push-store.js';

/**
 * The users whose rules some evaluation of this worker (or thread) is
 * reading from the store right now, so that evaluations arriving meanwhile
 * join that read instead of reading them again. A change event for a user
 * drops the user's entry (`invalidate`): the read may have been taken
 * before the change, so an evaluation that starts after the event reads
 * again; those already waiting keep it, as they began before the event.
 */
export class InFlightReads {
  readonly #reads = new Map<string, Promise<CompiledRuleset>>();

  /** The read of this user under way, to join. */
  get(userId: string): Promise<CompiledRuleset> | undefined {
    return this.#reads.get(userId);
  }

  /**
   * Registers a read of `chunk` that settles with `done`; returns what
   * unregisters it, once it is over: only its own entries, as a later read
   * of the same user may have been registered after an invalidation.
   */
  register(chunk: readonly string[], done: Promise<ReadonlyMap<string, CompiledRuleset>>): () => void {
    const registered = new Map<string, Promise<CompiledRuleset>>();
    for (const userId of chunk) {
      const forUser = done.then((compiled) => compiled.get(userId) ?? sharedDefaultRuleset());
      // Nobody may join; a failure is then reported by the evaluation that ran the read.
      forUser.catch(() => undefined);
      this.#reads.set(userId, forUser);
      registered.set(userId, forUser);
    }
    return () => {
      for (const [userId, forUser] of registered) if (this.#reads.get(userId) === forUser) this.#reads.delete(userId);
    };
  }

  invalidate(userId: string): void {
    this.#reads.delete(userId);
  }

  clear(): void {
    this.#reads.clear();
  }
}

/**
 * A read that will never run: the evaluation that was to run it stopped
 * first (its deadline, or a failure of an earlier read). Its joiners read
 * those users themselves; were it to reach a reply, it is Unavailable.
 */
export class AbandonedReadError extends StoreUnavailableError {
  constructor() {
    super('the evaluation that was to read these users stopped first');
    this.name = 'AbandonedReadError';
  }
}
