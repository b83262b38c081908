import type { PushAction } from '../push-rules/push-rule.js';
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
}

/** The success body of an `evaluate` reply (docs/rpc-contract.md#evaluate). */
export interface EvaluateReply {
  readonly notify: Record<string, readonly PushAction[]>;
  readonly evaluated: number;
  readonly rule_ids?: Record<string, string | null>;
}

/**
 * A recipient's compiled rules: their stored ruleset compiled, or the shared
 * default ruleset when they have none. Called once per recipient, never for
 * the event's sender.
 */
export type RulesetLookup = (recipient: EvaluationRecipient) => CompiledRuleset;

/**
 * One request's evaluation in progress. The worker evaluates it in slices
 * and yields to its event loop in between, so a fan-out to many recipients
 * never holds the thread for long; `evaluated` is where the next slice
 * starts.
 */
export interface Evaluation {
  readonly event: PreparedEvent;
  readonly recipients: readonly EvaluationRecipient[];
  readonly notify: Record<string, readonly PushAction[]>;
  readonly ruleIds: Record<string, string | null> | undefined;
  evaluated: number;
}

export function startEvaluation(request: EvaluateRequest): Evaluation {
  return {
    event: prepareEvent(request.event, request.room),
    recipients: request.recipients,
    notify: {},
    ruleIds: request.explain === true ? {} : undefined,
    evaluated: 0,
  };
}

function evaluateNext(evaluation: Evaluation, rulesetFor: RulesetLookup): void {
  const recipient = evaluation.recipients[evaluation.evaluated];
  evaluation.evaluated += 1;
  if (recipient === undefined) return;
  const { event, notify, ruleIds } = evaluation;
  const userId = recipient.user_id;
  if (userId === event.event.sender) {
    if (ruleIds !== undefined) ruleIds[userId] = null;
    return;
  }
  const outcome = evaluateRecipient(event, rulesetFor(recipient), recipient);
  if (outcome.notify) notify[userId] = outcome.actions;
  if (ruleIds !== undefined) ruleIds[userId] = outcome.ruleId;
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

export function evaluationReply(evaluation: Evaluation): EvaluateReply {
  const { notify, evaluated, ruleIds } = evaluation;
  return ruleIds === undefined ? { notify, evaluated } : { notify, evaluated, rule_ids: ruleIds };
}

/** A whole request at once: for callers that do not need to yield. */
export function evaluateRequest(request: EvaluateRequest, rulesetFor: RulesetLookup): EvaluateReply {
  const evaluation = startEvaluation(request);
  evaluateSlice(evaluation, rulesetFor, request.recipients.length);
  return evaluationReply(evaluation);
}
