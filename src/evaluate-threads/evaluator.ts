import type { Config } from '../config/config-schema.js';
import { evaluateInProcess, evaluateLimits, type EvaluateRunner } from '../consumer/evaluate-queue.js';
import { splitEvaluateRunner, type EvaluatedOnObserver } from '../consumer/split-evaluate-runner.js';
import type { InlineBounds } from '../consumer/small-evaluate.js';
import type { CompiledRuleset } from '../evaluation/compiled-ruleset.js';
import type { Logger } from '../logging/logger.js';
import type { StoreBoundsObserver } from '../service/bounded-store.js';
import { EvaluateService } from '../service/evaluate-service.js';
import { RulesetCache } from '../service/ruleset-cache.js';
import type { PushStore } from '../store/push-store.js';
import { cacheShares } from './cache-shares.js';
import { summedCacheView, type CacheView } from './cache-view.js';
import { EvaluatePool, type EvaluatePoolOptions } from './evaluate-pool.js';

/** What the evaluator needs of the pool: requests, invalidations, its caches' counts, closing. */
export type ThreadPool = Pick<EvaluatePool, 'run' | 'invalidate' | 'clear' | 'cache' | 'close'>;

export interface EvaluatorOptions {
  readonly evaluate: Config['evaluate'];
  /** The threads' own store connections are made from it. */
  readonly mongodb: Config['mongodb'];
  readonly maxJsonDepth: number;
  /** The event loop's store, read by the evaluations that run on the event loop. */
  readonly store: PushStore;
  readonly logger: Logger;
  readonly observer?: StoreBoundsObserver & EvaluatedOnObserver;
  /** Makes the pool (an `EvaluatePool` unless given: tests give a fake). */
  readonly createPool?: (options: EvaluatePoolOptions) => ThreadPool;
}

/**
 * Where a worker evaluates (docs/architecture.md#evaluation-off-the-event-loop):
 * small requests on the event loop, in a service and cache of its own, the
 * rest in the pool of `evaluate.threads` threads; with `evaluate.threads` 0,
 * everything on the event loop. Every change event reaches the event loop's
 * cache and, in the same turn, every thread's, so a small evaluation never
 * answers from older rules than a large one taken after it.
 */
export class Evaluator {
  /** The queue's runner: see `splitEvaluateRunner`. */
  readonly run: EvaluateRunner;
  /** The cache of the evaluations on the event loop, if it evaluates any. */
  readonly #cache: RulesetCache<CompiledRuleset> | undefined;
  readonly #pool: ThreadPool | undefined;
  /** The evaluations on the event loop, if it evaluates any. */
  readonly #service: EvaluateService | undefined;
  /** The event loop's cache and the threads' as one, for the metrics. */
  readonly cache: CacheView = summedCacheView(() => {
    const parts: CacheView[] = [];
    if (this.#cache !== undefined) parts.push(this.#cache);
    if (this.#pool !== undefined) parts.push(this.#pool.cache);
    return parts;
  });

  constructor(options: EvaluatorOptions) {
    const { evaluate, mongodb, maxJsonDepth, store, logger, observer } = options;
    const bounds: InlineBounds = { maxBytes: evaluate.inlineMaxBytes, maxRecipients: evaluate.inlineMaxRecipients };
    const threads = evaluate.threads;
    const onEventLoop = threads === 0 || (bounds.maxBytes > 0 && bounds.maxRecipients > 0);
    const shares = cacheShares(
      { maxEntries: evaluate.cacheMaxEntries, maxBytes: evaluate.cacheMaxBytes },
      threads,
      onEventLoop,
    );
    if (threads > 0) {
      const poolOptions: EvaluatePoolOptions = {
        threads,
        data: {
          evaluate,
          mongodb,
          maxJsonDepth,
          // The pool shares these out again, one part per thread.
          cacheMaxEntries: shares.perThread.maxEntries * threads,
          cacheMaxBytes: shares.perThread.maxBytes * threads,
        },
        ...(evaluate.threadYoungGenerationMb > 0
          ? { resourceLimits: { maxYoungGenerationSizeMb: evaluate.threadYoungGenerationMb } }
          : {}),
        logger,
        ...(observer === undefined ? {} : { observer }),
      };
      this.#pool = (options.createPool ?? ((o) => new EvaluatePool(o)))(poolOptions);
    }
    let inline: EvaluateRunner = refuseInline;
    if (shares.eventLoop !== undefined) {
      this.#cache = new RulesetCache<CompiledRuleset>({
        ...shares.eventLoop,
        maxStalenessMs: evaluate.maxStalenessMs,
      });
      const service: EvaluateService = new EvaluateService(store, {
        cache: this.#cache,
        loadChunkSize: evaluate.loadChunkSize,
        sliceMs: evaluate.sliceMs,
        maxReplyBytes: evaluate.maxReplyBytes,
        operationTimeoutMs: mongodb.operationTimeoutMs,
        ...(observer === undefined ? {} : { observer }),
        onUndecodable: (userId) => {
          logger.warn({ userId }, 'stored push rules cannot be decoded: evaluated as the server defaults');
        },
      });
      this.#service = service;
      inline = evaluateInProcess(service, evaluateLimits(evaluate, maxJsonDepth));
    }
    this.run = splitEvaluateRunner({ inline, thread: this.#pool?.run, bounds, observer });
  }

  /**
   * A change event for this user: its entry leaves every cache, the event
   * loop's and each thread's, and no evaluation taken from now on joins a
   * read of it started before (`EvaluateService.invalidate`).
   */
  invalidate(userId: string): void {
    this.#service?.invalidate(userId);
    this.#pool?.invalidate(userId);
  }

  /** Change events may have been missed: every cache is emptied, and no read under way is joined. */
  clear(): void {
    this.#service?.clear();
    this.#pool?.clear();
  }

  /** Stops the threads; call it once the evaluate queue is drained. */
  async close(): Promise<void> {
    await this.#pool?.close();
  }
}

/** Never called: with threads and no inline bounds, `splitEvaluateRunner` sends every body to the pool. */
const refuseInline: EvaluateRunner = async () =>
  Promise.reject(
    new Error('evaluation on the event loop is off (evaluate.inlineMaxRecipients or inlineMaxBytes is 0)'),
  );
