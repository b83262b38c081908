import { sharedDefaultRuleset } from '../evaluation/compile-ruleset.js';
import { evaluateUntil, notifiedCount, startEvaluation } from '../evaluation/evaluate-request.js';
import { evaluationReplyJson } from '../evaluation/evaluation-reply-json.js';
import type { EvaluationRecipient } from '../evaluation/evaluation-input.js';
import type { EvaluateBatchCommand, EvaluateCommand } from './command.js';
import type { PushStore } from '../store/push-store.js';
import { beforeDeadline, BoundedStore } from './bounded-store.js';
import { failureOutcome, type FailureOutcome } from './failure-reply.js';
import { successEncoded, type Reply } from '../contract/reply.js';
import { capEachResult, fitsReply, replyTooLarge } from './evaluate-reply-cap.js';
import { batchResultsJson, type BatchResult } from '../contract/batch-reply.js';
import type { Evaluation } from '../evaluation/evaluate-request.js';
import { RecipientRulesets, type RecipientRulesetsOptions } from './recipient-rulesets.js';
import { inSlices, type SliceClock } from './work-slices.js';

export interface EvaluateServiceOptions extends RecipientRulesetsOptions {
  /** Synchronous work (compiling, evaluating) between two yields to the event loop. */
  readonly sliceMs: number;
  /**
   * Each store read is given up after this long. A read is shared by the
   * evaluations that join it, so it is not bounded by any one request's
   * deadline; each evaluation waits for its reads until its own.
   */
  readonly operationTimeoutMs?: number | undefined;
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

/**
 * Runs `evaluate`: finds every recipient's compiled rules (the worker's
 * cache first, then the store in bulk: recipient-rulesets.ts) and
 * evaluates the event for them in slices, yielding to the event loop
 * between slices so that a large fan-out never holds up the requests of
 * the other queue. Never throws: every outcome is a reply.
 */
export class EvaluateService {
  readonly #now: () => number;
  readonly #slices: SliceClock;
  readonly #maxReplyBytes: number;
  readonly #rulesets: RecipientRulesets;

  constructor(store: PushStore, options: EvaluateServiceOptions) {
    const { operationTimeoutMs, observer } = options;
    const bounded = (operationTimeoutMs ?? 0) > 0 ? new BoundedStore(store, { operationTimeoutMs, observer }) : store;
    this.#now = options.now ?? (() => Date.now());
    this.#slices = { sliceMs: options.sliceMs, clock: options.clock ?? (() => performance.now()), now: this.#now };
    this.#maxReplyBytes = options.maxReplyBytes ?? Infinity;
    this.#rulesets = new RecipientRulesets(bounded, options, this.#slices);
  }

  /**
   * A change event for this user: its cached rules go, and so does its
   * read under way, for joiners: that read may have been taken before the
   * change, so an evaluation that starts now reads the user again (the
   * evaluations already waiting for it keep it: they began before the
   * event, as if they had been answered first).
   */
  invalidate(userId: string): void {
    this.#rulesets.invalidate(userId);
  }

  /** Change events may have been missed: every cached ruleset and every read under way, for joiners. */
  clear(): void {
    this.#rulesets.clear();
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
        this.#rulesets.of(request.recipients, request.event.sender, stats, deadline),
        deadline,
        this.#now,
      );
      const evaluation = startEvaluation(request);
      const rulesetFor = (_recipient: EvaluationRecipient, index: number) => rulesets[index] ?? sharedDefaultRuleset();
      await inSlices((shouldPause) => evaluateUntil(evaluation, rulesetFor, shouldPause), this.#slices, deadline);
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
      const rulesets = await beforeDeadline(this.#rulesets.of(union, '', stats, deadline), deadline, this.#now);
      const rulesetFor = (recipient: EvaluationRecipient) => {
        const index = unionAt.get(recipient.user_id);
        return (index === undefined ? undefined : rulesets[index]) ?? sharedDefaultRuleset();
      };
      const evaluations = command.events.map((entry) => (entry.ok ? startEvaluation(entry.value) : undefined));
      let next = 0;
      await inSlices(
        (shouldPause) => {
          while (next < evaluations.length) {
            const evaluation = evaluations[next];
            if (evaluation !== undefined && !evaluateUntil(evaluation, rulesetFor, shouldPause)) return false;
            next += 1;
            // Between two events too: a thousand one-recipient events are a slice's worth.
            if (shouldPause()) return next >= evaluations.length;
          }
          return true;
        },
        this.#slices,
        deadline,
      );
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
}
