import { setImmediate as nextTurn } from 'node:timers/promises';
import { compileUserRuleset, sharedDefaultRuleset } from '../evaluation/compile-ruleset.js';
import type { CompiledRuleset } from '../evaluation/compiled-ruleset.js';
import { evaluateUntil, notifiedCount, startEvaluation } from '../evaluation/evaluate-request.js';
import { evaluationReplyJson } from '../evaluation/evaluation-reply-json.js';
import type { EvaluationRecipient } from '../evaluation/evaluation-input.js';
import { getPushRules } from '../push-rules/get-push-rules.js';
import type { EvaluateBatchCommand, EvaluateCommand } from './command.js';
import type { LoadedPushRules, PushStore } from '../store/push-store.js';
import {
  beforeDeadline,
  BoundedStore,
  checkDeadline,
  DeadlinePassedError,
  type StoreBoundsObserver,
} from './bounded-store.js';
import { failureOutcome, type FailureOutcome } from './failure-reply.js';
import type { RulesetCache } from './ruleset-cache.js';
import { successEncoded, type Reply } from '../contract/reply.js';
import { capEachResult, fitsReply, replyTooLarge } from './evaluate-reply-cap.js';
import { batchResultsJson, type BatchResult } from '../contract/batch-reply.js';
import type { Evaluation } from '../evaluation/evaluate-request.js';
import { AbandonedReadError, InFlightReads } from './in-flight-reads.js';
import { inBatches } from './in-batches.js';

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
  /**
   * Each store read is given up after this long. A read is shared by the
   * evaluations that join it, so it is not bounded by any one request's
   * deadline; each evaluation waits for its reads until its own.
   */
  readonly operationTimeoutMs?: number | undefined;
  readonly observer?: StoreBoundsObserver;
  /**
   * An evaluation's encoded reply, at most (TooLarge past it; in a batch,
   * for each event whose own answer is past it, and for the whole message
   * when the answers together are). Unbounded when absent.
   */
  readonly maxReplyBytes?: number | undefined;
  /** What slices are timed with (`performance.now`). */
  readonly clock?: () => number;
  /** What deadlines are read on (`Date.now`). */
  readonly now?: () => number;
}

/** What the transport knows about an evaluation beyond its body. */
export interface EvaluateContext {
  /** `Date.now()` by which it is answered: no store read is started for it after this. */
  readonly deadline?: number | undefined;
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
  /** Answered Unavailable because the deadline came before the store had served it. */
  readonly deadlinePassed?: true;
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
  readonly #now: () => number;
  readonly #maxReplyBytes: number;
  /** Users being read from the store right now, by any evaluation of this worker. */
  readonly #loading = new InFlightReads();

  constructor(store: PushStore, options: EvaluateServiceOptions) {
    const { operationTimeoutMs, observer } = options;
    this.#store = (operationTimeoutMs ?? 0) > 0 ? new BoundedStore(store, { operationTimeoutMs, observer }) : store;
    this.#options = options;
    this.#clock = options.clock ?? (() => performance.now());
    this.#now = options.now ?? (() => Date.now());
    this.#maxReplyBytes = options.maxReplyBytes ?? Infinity;
  }

  /**
   * A change event for this user: its cached rules go, and so does its
   * read under way, for joiners: that read may have been taken before the
   * change, so an evaluation that starts now reads the user again (the
   * evaluations already waiting for it keep it: they began before the
   * event, as if they had been answered first).
   */
  invalidate(userId: string): void {
    this.#options.cache.invalidate(userId);
    this.#loading.invalidate(userId);
  }

  /** Change events may have been missed: every cached ruleset and every read under way, for joiners. */
  clear(): void {
    this.#options.cache.clear();
    this.#loading.clear();
  }

  /**
   * With a deadline, the evaluation answers `Unavailable` if its rulesets
   * have not all been read by then, and starts no store read after it.
   */
  async handle(command: EvaluateCommand, context: EvaluateContext = {}): Promise<EvaluateOutcome> {
    const { request } = command;
    const { deadline } = context;
    const stats = { recipients: request.recipients.length, notified: 0, cacheHits: 0, loaded: 0, storeQueries: 0 };
    try {
      const rulesets = await beforeDeadline(
        this.#rulesetsOf(request.recipients, request.event.sender, stats, deadline),
        deadline,
        this.#now,
      );
      const evaluation = startEvaluation(request);
      const rulesetFor = (_recipient: EvaluationRecipient, index: number) => rulesets[index] ?? sharedDefaultRuleset();
      await this.#inSlices((shouldPause) => evaluateUntil(evaluation, rulesetFor, shouldPause), deadline);
      stats.notified = notifiedCount(evaluation);
      // Assembled as text from the few distinct action lists (evaluation-reply-json.ts), never as one object per recipient.
      const json = evaluationReplyJson(evaluation);
      if (!fitsReply(json, this.#maxReplyBytes))
        return { reply: { ok: false, error: replyTooLarge(this.#maxReplyBytes) }, stats };
      return { reply: successEncoded({}, json), stats };
    } catch (error) {
      return { ...failureOutcome(error), stats };
    }
  }

  /**
   * The batch form: every event's answer, in order, in one reply. The
   * recipients of all its events are looked up once, as one list without
   * repeats (the cache, then one bulk read of those missing), and the
   * events are evaluated one after the other within the same slices. An
   * entry refused when parsing keeps its own error; a failure of the shared
   * read (the store, the deadline) is every other entry's answer.
   */
  async handleBatch(command: EvaluateBatchCommand, context: EvaluateContext = {}): Promise<EvaluateOutcome> {
    const { deadline } = context;
    const stats = { recipients: 0, notified: 0, cacheHits: 0, loaded: 0, storeQueries: 0 };
    const union: EvaluationRecipient[] = [];
    /** Where each user is in `union`. */
    const unionAt = new Map<string, number>();
    for (const entry of command.events) {
      if (!entry.ok) continue;
      const { recipients, event } = entry.value;
      stats.recipients += recipients.length;
      for (const recipient of recipients) {
        // A user who only ever sends needs no rules; one who sends one event and receives another does.
        if (recipient.user_id === event.sender || unionAt.has(recipient.user_id)) continue;
        unionAt.set(recipient.user_id, union.length);
        union.push(recipient);
      }
    }
    let results: BatchResult[];
    let failed: FailureOutcome | undefined;
    try {
      const rulesets = await beforeDeadline(this.#rulesetsOf(union, '', stats, deadline), deadline, this.#now);
      const rulesetFor = (recipient: EvaluationRecipient) => {
        const index = unionAt.get(recipient.user_id);
        return (index === undefined ? undefined : rulesets[index]) ?? sharedDefaultRuleset();
      };
      const evaluations = command.events.map((entry) => (entry.ok ? startEvaluation(entry.value) : undefined));
      let next = 0;
      await this.#inSlices((shouldPause) => {
        while (next < evaluations.length) {
          const evaluation = evaluations[next];
          if (evaluation !== undefined && !evaluateUntil(evaluation, rulesetFor, shouldPause)) return false;
          next += 1;
          // Between two events too: a thousand one-recipient events are a slice's worth.
          if (shouldPause()) return next >= evaluations.length;
        }
        return true;
      }, deadline);
      results = capEachResult(
        command.events.map((entry, index) => {
          if (!entry.ok) return { ok: false, error: entry.error.toBody() };
          const evaluation = evaluations[index] as Evaluation;
          stats.notified += notifiedCount(evaluation);
          return { ok: true, json: evaluationReplyJson(evaluation) };
        }),
        this.#maxReplyBytes,
      );
    } catch (error) {
      failed = failureOutcome(error);
      // failureOutcome always answers with an error.
      const shared = (failed.reply as Extract<Reply, { ok: false }>).error;
      results = command.events.map((entry) => ({ ok: false, error: entry.ok ? shared : entry.error.toBody() }));
    }
    const json = batchResultsJson(results);
    // Each answer fits, not all of them together: the caller sends them again in smaller messages.
    if (!fitsReply(json, this.#maxReplyBytes))
      return { ...failed, reply: { ok: false, error: replyTooLarge(this.#maxReplyBytes) }, stats };
    return { ...failed, reply: successEncoded({}, json), stats };
  }

  /**
   * Every recipient's compiled rules but the sender's (the sender is never
   * evaluated), by position in `recipients` (which holds no user twice): an
   * array, so that a large room's warm path is one cache lookup per user.
   */
  async #rulesetsOf(
    recipients: readonly EvaluationRecipient[],
    sender: string,
    stats: { cacheHits: number; loaded: number; storeQueries: number },
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
      const inFlight = join ? this.#loading.get(userId) : undefined;
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
      checkDeadline('loadManyPushRules', deadline, this.#now, this.#options.observer);
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
      const again = await this.#rulesetsOf(
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
    const forget = this.#loading.register(chunk, done);
    let started = false;
    const run = async () => {
      started = true;
      try {
        const ticket = cache.ticket();
        const loaded = await this.#store.loadManyPushRules(chunk);
        const compiled = new Map<string, CompiledRuleset>();
        let next = 0;
        await this.#inSlices((shouldPause) => {
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
        });
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

  /**
   * Runs `step` until it says it is done, yielding to the event loop
   * whenever it paused at the slice's end. With a deadline (an evaluation's
   * own work, never a read others joined), no slice starts after it: the
   * caller has given up, and a large message must not hold a thread longer.
   */
  async #inSlices(step: (shouldPause: () => boolean) => boolean, deadline?: number): Promise<void> {
    for (;;) {
      const sliceEnd = this.#clock() + this.#options.sliceMs;
      if (step(() => this.#clock() >= sliceEnd)) return;
      await nextTurn();
      if (deadline !== undefined && this.#now() >= deadline)
        throw new DeadlinePassedError('the deadline passed while evaluating');
    }
  }
}
