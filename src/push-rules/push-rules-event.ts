import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { isJsonObject } from '../matrix/json.js';
import { fail, ok, type Result } from '../result/result.js';
import { decodeRulesetContent } from './decode-ruleset.js';
import type { Ruleset } from './push-rule.js';
import { DEFAULT_RULES_REVISION } from './server-default-rules.js';
import { upgradeRuleset } from './upgrade-ruleset.js';

/** What the store found for a user's `m.push_rules` account data. */
export type PushRulesLookup =
  | { readonly found: false }
  | {
      readonly found: true;
      /** The stored account-data event, e.g. `{"content": {"global": …}}`. */
      readonly event: unknown;
      /** The server-default revision the stored ruleset was built from. */
      readonly defaultsRevision: string | undefined;
    };

/**
 * The states of docs/push-rules.md#the-push-rules-event-and-its-states,
 * decided from a lookup. "Missing" covers the three states that every
 * operation but `get_pushrules` treats as an absent event (and
 * `get_pushrules` replaces with the defaults).
 */
export type PushRulesEventView =
  | { readonly status: 'missing'; readonly reason: 'absent' | 'no-content' | 'empty-content' }
  | { readonly status: 'undecodable' }
  | {
      readonly status: 'valid';
      readonly ruleset: Ruleset;
      /** True when the ruleset was brought up to the current defaults here. */
      readonly upgraded: boolean;
    };

/**
 * Views already decided, by lookup object: the store hands the same lookup
 * object back while the stored text is unchanged (see `ParsedEntryCache`),
 * and a ruleset is then not decoded and checked again on every read. The
 * view depends on the user only through the upgrade, so the user is part of
 * the key.
 */
const views = new WeakMap<PushRulesLookup, { readonly userId: string; readonly view: PushRulesEventView }>();

export function viewPushRulesEvent(lookup: PushRulesLookup, userId: string): PushRulesEventView {
  const known = views.get(lookup);
  if (known?.userId === userId) return known.view;
  const view = decideView(lookup, userId);
  views.set(lookup, { userId, view });
  return view;
}

function decideView(lookup: PushRulesLookup, userId: string): PushRulesEventView {
  if (!lookup.found) return { status: 'missing', reason: 'absent' };
  const { event } = lookup;
  if (!isJsonObject(event)) return { status: 'undecodable' };
  if (!('content' in event)) return { status: 'missing', reason: 'no-content' };
  const content = event['content'];
  if (isJsonObject(content) && Object.keys(content).length === 0) return { status: 'missing', reason: 'empty-content' };
  const ruleset = decodeRulesetContent(content);
  if (ruleset === undefined) return { status: 'undecodable' };
  if (lookup.defaultsRevision === DEFAULT_RULES_REVISION) return { status: 'valid', ruleset, upgraded: false };
  return { status: 'valid', ruleset: upgradeRuleset(ruleset, userId), upgraded: true };
}

/**
 * The ruleset an operation other than `get_pushrules` works on, or the
 * error for the event's state
 * (docs/push-rules.md#the-push-rules-event-and-its-states).
 */
export function requireRuleset(view: PushRulesEventView): Result<Ruleset> {
  switch (view.status) {
    case 'missing':
      return fail(matrixError('NotFound', MESSAGES.eventNotFound));
    case 'undecodable':
      return fail(matrixError('Database', MESSAGES.undecodableEvent));
    case 'valid':
      return ok(view.ruleset);
  }
}
