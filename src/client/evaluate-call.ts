import type { EvaluateReplyBody, EvaluateRequestBody } from '../contract/ops.js';
import type { Reply } from '../contract/reply.js';
import type { EvaluateCompactReply } from '../evaluation/evaluate-request.js';
import type { PushAction } from '../push-rules/push-rule.js';
import type { EvaluationEvent, EvaluationRecipient, EvaluationRoom } from '../evaluation/evaluation-input.js';
import { PushRulesError } from './push-rules-error.js';

/**
 * One event's answer as `evaluate()` resolves with it: the default form,
 * whichever form the worker answered in, or the event's own error.
 */
export function evaluateAnswer(reply: Reply): EvaluateReplyBody {
  if (!reply.ok) throw new PushRulesError(reply.error);
  // The worker answers the contract's shapes.
  const body = reply.body as EvaluateReplyBody | EvaluateCompactReply;
  return 'notify_groups' in body ? expandCompactReply(body) : body;
}

/** The default form of an `evaluate` reply from its compact form; the recipients of a group share one actions array. */
function expandCompactReply(compact: EvaluateCompactReply): EvaluateReplyBody {
  const notify: Record<string, readonly PushAction[]> = {};
  for (const group of compact.notify_groups) for (const userId of group.user_ids) notify[userId] = group.actions;
  const { evaluated, rule_ids: ruleIds } = compact;
  return ruleIds === undefined ? { notify, evaluated } : { notify, evaluated, rule_ids: ruleIds };
}

/** One event of `evaluateMany`: the arguments of one `evaluate()` call. */
export interface EvaluateManyEvent {
  readonly event: EvaluationEvent;
  readonly room: EvaluationRoom;
  readonly recipients: readonly EvaluationRecipient[];
  readonly explain?: boolean;
}

/**
 * One event as the batch form's entry (the single form without `op`), in
 * the single form's key order. It asks for the compact reply: a fraction of
 * the bytes to carry and parse for a large room; `evaluateAnswer` hands
 * back the default shape.
 */
export function evaluateItem(call: EvaluateManyEvent): Omit<EvaluateRequestBody, 'op'> {
  const { event, room, recipients, explain } = call;
  // Typed by the schema the workers validate it with; the cast only drops `readonly`.
  return {
    event,
    room,
    recipients: recipients as EvaluationRecipient[],
    ...(explain === true ? { explain: true } : {}),
    compact: true,
  };
}
