import type { EvaluateReplyBody, EvaluateRequestBody } from '../contract/ops.js';
import type { Reply } from '../contract/reply.js';
import type { EvaluateCompactReply } from '../evaluation/evaluate-request.js';
import type { PushAction } from '../push-rules/push-rule.js';
import type { EvaluationEvent, EvaluationRecipient, EvaluationRoom } from '../evaluation/evaluation-input.js';
import { groupRecipientsByServer } from './group-recipients.js';
import { PushRulesError } from './push-rules-error.js';

/**
 * One event's answer as `evaluate()` resolves with it: the default form,
 * whichever form the worker answered in, or the event's own error. `order`:
 * the recipients in the order the request named them, which a reply's
 * `runs` count in.
 */
export function evaluateAnswer(reply: Reply, order: readonly EvaluationRecipient[]): EvaluateReplyBody {
  if (!reply.ok) throw new PushRulesError(reply.error);
  // The worker answers the contract's shapes.
  const body = reply.body as EvaluateReplyBody | EvaluateCompactReply;
  return 'notify_groups' in body ? expandCompactReply(body, order) : body;
}

/** The default form of an `evaluate` reply from its compact form; the recipients of a group share one actions array. */
function expandCompactReply(compact: EvaluateCompactReply, order: readonly EvaluationRecipient[]): EvaluateReplyBody {
  const notify: Record<string, readonly PushAction[]> = {};
  for (const group of compact.notify_groups) {
    const { actions } = group;
    if (!('runs' in group)) {
      for (const userId of group.user_ids) notify[userId] = actions;
      continue;
    }
    const { runs } = group;
    for (let pair = 0; pair + 1 < runs.length; pair += 2) {
      const first = runs[pair] as number;
      const end = Math.min(order.length, first + (runs[pair + 1] as number));
      for (let index = Math.max(0, first); index < end; index += 1)
        notify[(order[index] as EvaluationRecipient).user_id] = actions;
    }
  }
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

/** Recipients from which `evaluateItem` groups them by server. */
export const GROUP_RECIPIENTS_FROM = 100;

/**
 * One event as the batch form's entry (the single form without `op`), in
 * the single form's key order, and the recipients in the order it names
 * them. It asks for the compact reply by positions (`runs`): a few bytes
 * for a large room; `evaluateAnswer` hands back the default shape. From
 * `GROUP_RECIPIENTS_FROM` recipients they go grouped by server
 * (`recipients_by_server`), less than half the bytes to send and parse.
 */
export function evaluateItem(call: EvaluateManyEvent): {
  readonly item: Omit<EvaluateRequestBody, 'op'>;
  readonly order: readonly EvaluationRecipient[];
} {
  const { event, room, recipients, explain } = call;
  const reply = { ...(explain === true ? { explain: true } : {}), compact: true, runs: true };
  const grouped = recipients.length >= GROUP_RECIPIENTS_FROM ? groupRecipientsByServer(recipients) : undefined;
  // Typed by the schema the workers validate it with; the cast only drops `readonly`.
  if (grouped === undefined)
    return { item: { event, room, recipients: recipients as EvaluationRecipient[], ...reply }, order: recipients };
  return { item: { event, room, recipients_by_server: grouped.groups, ...reply }, order: grouped.order };
}
