import type { PushAction } from '../push-rules/push-rule.js';
import { NOT_NOTIFIED, type RecipientOutcome } from './compiled-rule.js';
import type { CompiledRuleset } from './compiled-ruleset.js';
import { evaluateRecipient } from './evaluate-recipient.js';
import type { EvaluationEvent, EvaluationRecipient, EvaluationRoom } from './evaluation-input.js';
import { prepareEvent, type PreparedEvent } from './prepared-event.js';

/** The fields of an `evaluate` request the evaluator uses (docs/rpc-contract.md#evaluate). */
export interface EvaluateRequest {
  readonly event: EvaluationEvent;
  readonly room: EvaluationRoom;
  readonly recipients: readonly EvaluationRecipient[];
  readonly explain?: boolean;
  /** Answer with `notify_groups` (recipients grouped by identical actions) instead of `notify`. */
  readonly compact?: boolean;
  /** Answer with `notify_groups` whose recipients are runs of positions in `recipients` (`NotifyRunsGroup`). */
  readonly runs?: boolean;
}

/** The success body of an `evaluate` reply (docs/rpc-contract.md#evaluate). */
export interface EvaluateReply {
  readonly notify: Record<string, readonly PushAction[]>;
  readonly evaluated: number;
  readonly rule_ids?: Record<string, string | null>;
}

/** Recipients notified with the same actions, in the compact reply. */
export interface NotifyGroup {
  readonly actions: readonly PushAction[];
  readonly user_ids: readonly string[];
}

/**
 * Recipients notified with the same actions, in the reply asked for with
 * `runs: true`: `runs` holds pairs, the position in the request's recipient
 * list of a run's first recipient and how many follow it, in list order.
 */
export interface NotifyRunsGroup {
  readonly actions: readonly PushAction[];
  readonly runs: readonly number[];
}

/** The success body of an `evaluate` reply asked for with `compact: true` or `runs: true` (docs/rpc-contract.md#evaluate). */
export interface EvaluateCompactReply {
  readonly notify_groups: readonly (NotifyGroup | NotifyRunsGroup)[];
  readonly evaluated: number;
  readonly rule_ids?: Record<string, string | null>;
}

/**
 * A recipient's compiled rules: their stored ruleset compiled, or the shared
 * default ruleset when they have none. Called once per recipient (with its
 * position in the request's list), never for the event's sender.
 */
export type RulesetLookup = (recipient: EvaluationRecipient, index: number) => CompiledRuleset;

/**
 * One request's evaluation in progress. The worker evaluates it in slices
 * and yields to its event loop in between, so a fan-out to many recipients
 * never holds the thread for long; `evaluated` is where the next slice
 * starts.
 */
export interface Evaluation {
  readonly event: PreparedEvent;
  readonly recipients: readonly EvaluationRecipient[];
  /**
   * Each evaluated recipient's outcome, by position in `recipients`: shared
   * objects (one per rule), so a reply is assembled from a handful of
   * distinct action lists rather than one object per recipient.
   */
  readonly outcomes: RecipientOutcome[];
  readonly explain: boolean;
  readonly compact: boolean;
  readonly runs: boolean;
  evaluated: number;
}

export function startEvaluation(request: EvaluateRequest): Evaluation {
  return {
    event: prepareEvent(request.event, request.room),
    recipients: request.recipients,
    outcomes: new Array<RecipientOutcome>(request.recipients.length),
    explain: request.explain === true,
    compact: request.compact === true,
    runs: request.runs === true,
    evaluated: 0,
  };
}

function evaluateNext(evaluation: Evaluation, rulesetFor: RulesetLookup): void {
  const index = evaluation.evaluated;
  const recipient = evaluation.recipients[index];
  evaluation.evaluated += 1;
  if (recipient === undefined) return;
  const { event } = evaluation;
  evaluation.outcomes[index] =
    recipient.user_id === event.event.sender
      ? NOT_NOTIFIED
      : evaluateRecipient(event, rulesetFor(recipient, index), recipient);
}

/** Evaluates up to `count` more recipients; true when every recipient has been evaluated. */
export function evaluateSlice(evaluation: Evaluation, rulesetFor: RulesetLookup, count: number): boolean {
  const end = Math.min(evaluation.recipients.length, evaluation.evaluated + count);
  while (evaluation.evaluated < end) evaluateNext(evaluation, rulesetFor);
  return evaluation.evaluated >= evaluation.recipients.length;
}

/**
 * Evaluates recipients until all are done or `shouldPause` says so (asked
 * every `checkEvery` recipients, e.g. a clock against a 20 ms budget: the
 * cost of a recipient varies a hundredfold with their rules and the body).
 * True when every recipient has been evaluated.
 */
export function evaluateUntil(
  evaluation: Evaluation,
  rulesetFor: RulesetLookup,
  shouldPause: () => boolean,
  checkEvery = 16,
): boolean {
  while (!evaluateSlice(evaluation, rulesetFor, checkEvery)) {
    if (shouldPause()) return false;
  }
  return true;
}

/** The reply as objects (the default form, `notify`), whatever `compact` asked for. */
export function evaluationReply(evaluation: Evaluation): EvaluateReply {
  const { recipients, outcomes, evaluated, explain } = evaluation;
  const notify: Record<string, readonly PushAction[]> = {};
  const ruleIds: Record<string, string | null> = {};
  for (let index = 0; index < evaluated; index += 1) {
    const outcome = outcomes[index] ?? NOT_NOTIFIED;
    const userId = recipients[index]?.user_id ?? '';
    if (outcome.notify) notify[userId] = outcome.actions;
    if (explain) ruleIds[userId] = outcome.ruleId;
  }
  return explain ? { notify, evaluated, rule_ids: ruleIds } : { notify, evaluated };
}

/** Recipients notified so far. */
export function notifiedCount(evaluation: Evaluation): number {
  let count = 0;
  for (let index = 0; index < evaluation.evaluated; index += 1)
    if (evaluation.outcomes[index]?.notify === true) count += 1;
  return count;
}

/** A whole request at once: for callers that do not need to yield. */
export function evaluateRequest(request: EvaluateRequest, rulesetFor: RulesetLookup): EvaluateReply {
  const evaluation = startEvaluation(request);
  evaluateSlice(evaluation, rulesetFor, request.recipients.length);
  return evaluationReply(evaluation);
}
