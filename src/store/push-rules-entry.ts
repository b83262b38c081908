import { rulesetContentJson } from '../push-rules/decode-ruleset.js';
import type { Ruleset } from '../push-rules/push-rule.js';
import type { LoadedPushRules } from './push-store.js';

/**
 * How both adapters keep the `m.push_rules` event: its content as JSON text
 * beside the defaults revision. Rule conditions and tweaks may carry any key
 * a client invents (dots and `$` included), which BSON field names would
 * restrict, and nothing ever queries inside a ruleset.
 */
export function encodePushRulesContent(ruleset: Ruleset): string {
  return rulesetContentJson(ruleset);
}

/**
 * Reads a stored entry back into the states of the push-rules event
 * (docs/push-rules.md#the-push-rules-event-and-its-states): no entry
 * (absent), an entry without content, content that parses (decodable or
 * not, the domain decides), or text that is not JSON at all — a failed
 * lookup.
 */
export function readPushRulesEntry(
  entry: { readonly contentJson?: unknown; readonly defaultsRevision?: string | undefined } | undefined,
): LoadedPushRules['lookup'] {
  if (entry === undefined) return { found: false };
  const { contentJson, defaultsRevision } = entry;
  if (contentJson === undefined) return { found: true, event: {}, defaultsRevision };
  if (typeof contentJson !== 'string') return { found: 'failed' };
  try {
    const content: unknown = JSON.parse(contentJson);
    return { found: true, event: { content }, defaultsRevision };
  } catch {
    return { found: 'failed' };
  }
}
