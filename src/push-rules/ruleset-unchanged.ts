import { jsonEqual } from '../matrix/json-equal.js';
import type { Ruleset } from './push-rule.js';
import type { PushRulesEventView } from './push-rules-event.js';

/**
 * Whether storing `next`, the result of a rule operation on `view`, would
 * leave the user's push rules as they are. Then the write is served without
 * storing the ruleset, bumping the version or announcing a change: clients
 * that repeat the same PUT would otherwise grow every `/sync` stream.
 *
 * Decided on the whole ruleset, not per operation, so one rule covers every
 * way of changing nothing: the enabled flag or the actions a rule already
 * has, a `set_pushrule` with the rule's own body and no placement (the rule
 * stays where it is) or a placement that lands it where it is.
 *
 * Rulesets are compared as JSON values (`jsonEqual`: members in any order)
 * with the ruleset as read, not with the stored text. The worker writes
 * the text anew on every change, so its key order and layout are the
 * worker's, not the user's; a document written elsewhere (other key order,
 * a repeated rule ID, a kind left out) reads as a ruleset, and leaving that
 * ruleset as it is changes nothing a client can see. A ruleset upgraded on
 * reading (stored under older server defaults) is never unchanged: the
 * write stores the upgrade, as `get_pushrules` would.
 */
export function leavesRulesetUnchanged(view: PushRulesEventView, next: Ruleset): boolean {
  return view.status === 'valid' && !view.upgraded && jsonEqual(view.ruleset, next);
}
