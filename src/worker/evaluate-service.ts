import { setImmediate as nextTurn } from 'node:timers/promises';
import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { compileUserRuleset, sharedDefaultRuleset } from '../evaluation/compile-ruleset.js';
import type { CompiledRuleset } from '../evaluation/compiled-ruleset.js';
import { evaluateUntil, evaluationReply, startEvaluation } from '../evaluation/evaluate-request.js';
import type { EvaluationRecipient } from '../evaluation/evaluation-input.js';
import { getPushRules } from '../push-rules/get-push-rules.js';
import type { EvaluateCommand } from '../rpc/evaluate-request.js';
import { StoreUnavailableError, type LoadedPushRules, type PushStore } from '../store/push-store.js';
import type { RulesetCache } from './ruleset-cache.js';
import { failure, success, type Reply } from './reply.js';

export interface EvaluateServiceOptions {
  readonly cache: RulesetCache<CompiledRuleset>;
  /** Uncached recipients read per store query. */
  readonly loadChunkSize: number;
  /** Store queries of one request under way at once. */
  readonly loadConcurrency?: number;
  /** Synchronous work (compiling, evaluating) between two yields to the event loop. */
  readonly sliceMs: number;
  /** A stored ruleset that cannot be decoded: evaluated as the defaults, reported here for the log. */
  readonly onUndecodable?: (userId: string) => void;
  readonly clock?: () => number;
}

/** What one evaluation did, for metrics and the log. */
export interface EvaluateStats {
  readonly recipients: number;
  readonly notified: number;
  readonly cacheHits: number;
  /** Recipients read from the store. */
  readonly loaded: number;
  readonly storeQueries: number;
}

export interface EvaluateOutcome {
  readonly reply: Reply;
  readonly stats: EvaluateStats;
  /** Why the store was unavailable, for the log. */
  readonly cause?: string;
  /** An unexpected failure behind a Database reply, for the log. */
  readonly failure?: unknown;
}

/** What a cache entry for a user on the shared defaults costs: the map entry and its record. */
const SHARED_ENTRY_BYTES = 160;
const DEFAULT_LOAD_CONCURRENCY = 4;

/**
 * Runs `evaluate`: finds every recipient's compiled rules (the worker's
 * cache first, then the store in bulk, one query per chunk of recipients)
 * and evaluates the event for them in slices, yielding to the event loop
 * between slices so that a large fan-out never holds up the requests of
 * the other queue. Never throws: every outcome is a reply.
 */
export class EvaluateService {
  readonly #store: PushStore;
  readonly #options: EvaluateServiceOptions;
  readonly #clock: () => number;

  constructor(store: PushStore, options: EvaluateServiceOptions) {
    this.#store = store;
    this.#options = options;
    this.#clock = options.clock ?? (() => performance.now());
  }

  async handle(command: EvaluateCommand): Promise<EvaluateOutcome> {
    const { request } = command;
    const stats = { recipients: request.recipients.length, notified: 0, cacheHits: 0, loaded: 0, storeQueries: 0 };
    try {
      const rulesets = await this.#rulesetsOf(request.recipients, request.event.sender, stats);
      const evaluation = startEvaluation(request);
      const rulesetFor = (recipient: EvaluationRecipient) => rulesets.get(recipient.user_id) ?? sharedDefaultRuleset();
      await this.#inSlices((shouldPause) => evaluateUntil(evaluation, rulesetFor, shouldPause));
      const body = evaluationReply(evaluation);
      stats.notified = Object.keys(body.notify).length;
      return { reply: success(body), stats };
    } catch (error) {
      if (error instanceof StoreUnavailableError) {
        return { reply: failure(matrixError('Unavailable', MESSAGES.storeUnavailable)), stats, cause: error.message };
      }
      return { reply: failure(matrixError('Database', MESSAGES.storageFailure)), stats, failure: error };
    }
  }

  /** Every recipient's compiled rules but the sender's (the sender is never evaluated). */
  async #rulesetsOf(
    recipients: readonly EvaluationRecipient[],
    sender: string,
    stats: { cacheHits: number; loaded: number; storeQueries: number },
  ): Promise<Map<string, CompiledRuleset>> {
    const { cache, loadChunkSize } = this.#options;
    const rulesets = new Map<string, CompiledRuleset>();
    const missing: string[] = [];
    for (const { user_id: userId } of recipients) {
      if (userId === sender) continue;
      const cached = cache.get(userId);
      if (cached === undefined) missing.push(userId);
      else rulesets.set(userId, cached);
    }
    stats.cacheHits = rulesets.size;
    const chunks: string[][] = [];
    for (let start = 0; start < missing.length; start += loadChunkSize) chunks.push(missing.slice(start, start + loadChunkSize));
    const loadOne = async (chunk: readonly string[]) => {
      const ticket = cache.ticket();
      stats.storeQueries += 1;
      const loaded = await this.#store.loadManyPushRules(chunk);
      stats.loaded += chunk.length;
      let compiledCount = 0;
      await this.#inSlices((shouldPause) => {
        while (compiledCount < chunk.length) {
          const userId = chunk[compiledCount] ?? '';
          compiledCount += 1;
          const compiled = this.#compile(userId, loaded.get(userId));
          rulesets.set(userId, compiled);
          cache.set(userId, compiled, compiled.shared ? SHARED_ENTRY_BYTES : SHARED_ENTRY_BYTES + compiled.estimatedBytes, ticket);
          if (shouldPause()) return false;
        }
        return true;
      });
    };
    await inBatches(chunks, this.#options.loadConcurrency ?? DEFAULT_LOAD_CONCURRENCY, loadOne);
    return rulesets;
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

  /** Runs `step` until it says it is done, yielding to the event loop whenever it paused at the slice's end. */
  async #inSlices(step: (shouldPause: () => boolean) => boolean): Promise<void> {
    for (;;) {
      const sliceEnd = this.#clock() + this.#options.sliceMs;
      if (step(() => this.#clock() >= sliceEnd)) return;
      await nextTurn();
    }
  }
}

/** Runs `work` on every item, at most `concurrency` at once. */
async function inBatches<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next] as T;
      next += 1;
      await work(item);
    }
  });
  await Promise.all(lanes);
}

