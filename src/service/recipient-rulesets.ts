import { compileUserRuleset, sharedDefaultRuleset } from '../evaluation/compile-ruleset.js';
import type { CompiledRuleset } from '../evaluation/compiled-ruleset.js';
import type { EvaluationRecipient } from '../evaluation/evaluation-input.js';
import { getPushRules } from '../push-rules/get-push-rules.js';
import type { LoadedPushRules, PushStore } from '../store/push-store.js';
import { checkDeadline, type StoreBoundsObserver } from './bounded-store.js';
import { inBatches } from './in-batches.js';
import { AbandonedReadError, InFlightReads } from './in-flight-reads.js';
import type { RulesetCache } from './ruleset-cache.js';
import { inSlices, type SliceClock } from './work-slices.js';

export interface RecipientRulesetsOptions {
  readonly cache: RulesetCache<CompiledRuleset>;
  /** Uncached recipients read per store query. */
  readonly loadChunkSize: number;
  /** Store queries of one request under way at once. */
  readonly loadConcurrency?: number;
  /** A stored ruleset that cannot be decoded: evaluated as the defaults, reported here for the log. */
  readonly onUndecodable?: (userId: string) => void;
  readonly observer?: StoreBoundsObserver;
}

/** What finding the rulesets cost, added to an evaluation's stats. */
export interface ReadStats {
  cacheHits: number;
  loaded: number;
  storeQueries: number;
}

/** What a cache entry for a user on the shared defaults costs: the map entry and its record. */
const SHARED_ENTRY_BYTES = 160;
const DEFAULT_LOAD_CONCURRENCY = 4;

/**
 * The recipients' compiled rules, as evaluations find them: the worker's
 * cache first, then a read another evaluation has under way for the same
 * user (joined, not repeated), then the store in bulk, one query per chunk
 * of recipients, compiled in slices and cached.
 */
export class RecipientRulesets {
  readonly #store: PushStore;
  readonly #options: RecipientRulesetsOptions;
  readonly #slices: SliceClock;
  /** Users being read from the store right now, by any evaluation of this worker. */
  readonly #reads = new InFlightReads();

  constructor(store: PushStore, options: RecipientRulesetsOptions, slices: SliceClock) {
    this.#store = store;
    this.#options = options;
    this.#slices = slices;
  }

  /** The user's cached rules go, and so does its read under way, for joiners (a change event). */
  invalidate(userId: string): void {
    this.#options.cache.invalidate(userId);
    this.#reads.invalidate(userId);
  }

  /** Every cached ruleset and every read under way, for joiners (change events may have been missed). */
  clear(): void {
    this.#options.cache.clear();
    this.#reads.clear();
  }

  /**
   * Every recipient's compiled rules but the sender's (the sender is never
   * evaluated), by position in `recipients` (which holds no user twice): an
   * array, so that a large room's warm path is one cache lookup per user.
   */
  async of(
    recipients: readonly EvaluationRecipient[],
    sender: string,
    stats: ReadStats,
    deadline: number | undefined,
    join = true,
  ): Promise<(CompiledRuleset | undefined)[]> {
    const { cache, loadChunkSize } = this.#options;
    const rulesets = new Array<CompiledRuleset | undefined>(recipients.length);
    const missing: string[] = [];
    /** Where each missing user is in `recipients`. */
    const missingAt = new Map<string, number>();
    // Users another evaluation is reading right now: wait for that read, do not read them again.
    const joined: Promise<void>[] = [];
    /** Where the users of joined reads that were abandoned are: read here, once, without joining again. */
    const orphans: number[] = [];
    const now = cache.now();
    let hits = 0;
    for (let index = 0; index < recipients.length; index += 1) {
      const userId = (recipients[index] as EvaluationRecipient).user_id;
      if (userId === sender) continue;
      const cached = cache.get(userId, now);
      if (cached !== undefined) {
        rulesets[index] = cached;
        hits += 1;
        continue;
      }
      const inFlight = join ? this.#reads.get(userId) : undefined;
      if (inFlight === undefined) {
        missing.push(userId);
        missingAt.set(userId, index);
      } else {
        joined.push(
          inFlight.then(
            (compiled) => {
              rulesets[index] = compiled;
            },
            (error: unknown) => {
              // Never run (its owner stopped first, at its own deadline): not this evaluation's failure.
              if (!(error instanceof AbandonedReadError)) throw error;
              orphans.push(index);
            },
          ),
        );
      }
    }
    stats.cacheHits += hits;
    const chunks: string[][] = [];
    for (let start = 0; start < missing.length; start += loadChunkSize)
      chunks.push(missing.slice(start, start + loadChunkSize));
    // Registered before the first await, so that evaluations arriving meanwhile join these reads.
    const reads = chunks.map((chunk) => this.#startLoad(chunk));
    const loadOne = async (index: number) => {
      const read = reads[index];
      if (read === undefined) return;
      // Chunks not read by the deadline are not read at all (their joiners are let go below).
      checkDeadline('loadManyPushRules', deadline, this.#slices.now, this.#options.observer);
      stats.storeQueries += 1;
      const compiled = await read.run();
      stats.loaded += compiled.size;
      for (const [userId, ruleset] of compiled) {
        const index = missingAt.get(userId);
        if (index !== undefined) rulesets[index] = ruleset;
      }
    };
    try {
      await inBatches(
        chunks.map((_, index) => index),
        this.#options.loadConcurrency ?? DEFAULT_LOAD_CONCURRENCY,
        loadOne,
      );
    } finally {
      // A read that never ran (an earlier one failed) must not keep its users waiting.
      for (const read of reads) read.abandon();
    }
    await Promise.all(joined);
    if (orphans.length > 0) {
      const again = await this.of(
        orphans.map((index) => recipients[index] as EvaluationRecipient),
        sender,
        stats,
        deadline,
        false,
      );
      orphans.forEach((index, at) => {
        rulesets[index] = again[at];
      });
    }
    return rulesets;
  }

  /**
   * One store read of `chunk`, compiled and cached, that other evaluations
   * can join while it is under way (`#loading`). `run` performs it once;
   * `abandon` settles the joiners of a read that will not run.
   */
  #startLoad(chunk: readonly string[]): { run: () => Promise<Map<string, CompiledRuleset>>; abandon: () => void } {
    const { cache } = this.#options;
    let settle:
      { resolve: (value: Map<string, CompiledRuleset>) => void; reject: (error: unknown) => void } | undefined;
    const done = new Promise<Map<string, CompiledRuleset>>((resolve, reject) => {
      settle = { resolve, reject };
    });
    // Joiners that see a failure fail their own evaluation the same way.
    done.catch(() => undefined);
    const forget = this.#reads.register(chunk, done);
    let started = false;
    const run = async () => {
      started = true;
      try {
        const ticket = cache.ticket();
        const loaded = await this.#store.loadManyPushRules(chunk);
        const compiled = new Map<string, CompiledRuleset>();
        let next = 0;
        await inSlices((shouldPause) => {
          while (next < chunk.length) {
            const userId = chunk[next] ?? '';
            next += 1;
            const ruleset = this.#compile(userId, loaded.get(userId));
            compiled.set(userId, ruleset);
            cache.set(
              userId,
              ruleset,
              ruleset.shared ? SHARED_ENTRY_BYTES : SHARED_ENTRY_BYTES + ruleset.estimatedBytes,
              ticket,
            );
            if (shouldPause()) return false;
          }
          return true;
        }, this.#slices);
        settle?.resolve(compiled);
        return compiled;
      } catch (error) {
        settle?.reject(error);
        throw error;
      } finally {
        forget();
      }
    };
    const abandon = () => {
      if (started) return;
      forget();
      // Transient: the joiner's own evaluation answers Unavailable, and its retry reads them.
      settle?.reject(new AbandonedReadError());
    };
    return { run, abandon };
  }

  /** The user's rules as `get_pushrules` would answer them now, compiled. */
  #compile(userId: string, loaded: LoadedPushRules | undefined): CompiledRuleset {
    if (loaded === undefined) return sharedDefaultRuleset();
    const decision = getPushRules(loaded.lookup, userId);
    if (!decision.ok) {
      this.#options.onUndecodable?.(userId);
      return sharedDefaultRuleset();
    }
    return compileUserRuleset(decision.value.ruleset, userId);
  }
}
