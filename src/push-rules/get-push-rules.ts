import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { fail, ok, type Result } from '../result/result.js';
import type { Ruleset } from './push-rule.js';
import { viewPushRulesEvent, type PushRulesLookup } from './push-rules-event.js';
import { serverDefaultRuleset } from './server-default-rules.js';

/**
 * What the store should do after answering `get_pushrules`:
 * - `none`: nothing;
 * - `store`: write the returned ruleset over what is there (defaults for a
 *   missing or empty event, or an upgraded ruleset), under the usual
 *   compare-and-set;
 * - `store-if-absent`: write only if no document exists. Used when the
 *   lookup itself failed: the defaults are answered, as for an absent event
 *   (docs/push-rules.md#the-push-rules-event-and-its-states), and
 *   overwriting a ruleset we could not read would destroy the user's rules.
 */
export type GetPushRulesPersistence = 'none' | 'store' | 'store-if-absent';

export interface GetPushRulesDecision {
  readonly ruleset: Ruleset;
  readonly persist: GetPushRulesPersistence;
}

/** The lookup as `get_pushrules` sees it: it alone survives a failed lookup. */
export type GetPushRulesLookup = PushRulesLookup | { readonly found: 'failed' };

/** What `get_pushrules` answers and stores in each state: docs/push-rules.md#get_pushrules. */
export function getPushRules(lookup: GetPushRulesLookup, userId: string): Result<GetPushRulesDecision> {
  if (lookup.found === 'failed') return ok({ ruleset: serverDefaultRuleset(userId), persist: 'store-if-absent' });
  const view = viewPushRulesEvent(lookup, userId);
  switch (view.status) {
    case 'missing':
      return ok({ ruleset: serverDefaultRuleset(userId), persist: 'store' });
    case 'undecodable':
      return fail(matrixError('Database', MESSAGES.undecodableEvent));
    case 'valid':
      return ok({ ruleset: view.ruleset, persist: view.upgraded ? 'store' : 'none' });
  }
}
