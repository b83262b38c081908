import { encodeRulesetContent, rulesetContentJson } from '../push-rules/decode-ruleset.js';
import { getPushRule } from '../push-rules/get-push-rule.js';
import { getPushRules } from '../push-rules/get-push-rules.js';
import { getPushRuleActions } from '../push-rules/push-rule-actions.js';
import { getPushRuleEnabled } from '../push-rules/push-rule-enabled.js';
import { viewPushRulesEvent, type PushRulesEventView } from '../push-rules/push-rules-event.js';
import type { RuleAddress } from '../push-rules/rule-address.js';
import { mapResult, type Result } from '../result/result.js';
import { encodeReplyBytes, failure, success, successKept, type Reply } from '../contract/reply.js';
import type { LoadedPushRules, PushStore } from '../store/push-store.js';
import type { Command } from './command.js';
import type { RulesetCache } from './ruleset-cache.js';

/** The reads of one rule; `get_pushrules` reads them all. */
export type RuleRead = 'get_pushrule' | 'get_pushrule_actions' | 'get_pushrule_enabled';

/** What the domain sees of a user's loaded rules. */
export function viewOf(loaded: LoadedPushRules, userId: string): PushRulesEventView {
  return loaded.lookup.found === 'failed' ? { status: 'undecodable' } : viewPushRulesEvent(loaded.lookup, userId);
}

/** What a single-rule read answers from the user's rules. */
export function ruleRead(op: RuleRead, address: RuleAddress): (view: PushRulesEventView) => Result<unknown> {
  switch (op) {
    case 'get_pushrule':
      return (view) => getPushRule(view, address);
    case 'get_pushrule_actions':
      return (view) => mapResult(getPushRuleActions(view, address), (actions) => ({ actions }));
    case 'get_pushrule_enabled':
      return (view) => mapResult(getPushRuleEnabled(view, address), (enabled) => ({ enabled }));
  }
}

/**
 * What a kept ruleset is weighed at: its parsed form takes a few times its
 * stored text (one-byte strings, objects per rule and condition), plus the
 * entry itself. A user without stored rules weighs the entry alone; their
 * defaults are built per read.
 */
export function readCacheBytes(loaded: LoadedPushRules): number {
  return 256 + 4 * (loaded.storedChars ?? 0);
}

/**
 * What `get_pushrules`' reply kept with an entry adds to it: its encoded
 * bytes (an exact-size copy, see `successKept`), the body's JSON text (one
 * byte a character; counted even when it is the stored text itself) and
 * the reply's objects.
 */
export function keptReplyBytes(reply: Reply, json: string): number {
  return 128 + encodeReplyBytes(reply).byteLength + json.length;
}

/**
 * Push-rule reads (`get_pushrules`, `get_pushrule*`) answered from the
 * rules a worker keeps in memory (`reads.*`). The service drops a user when
 * its own write of their rules completes (`dropChanged`); the worker drops
 * them on every change event (`invalidate` on the cache) and everyone when
 * the event subscription is lost (`clear`).
 */
export class RuleReads {
  readonly #cache: RulesetCache<LoadedPushRules>;
  /** `get_pushrules`' reply for a kept entry, encoded once; it goes with the entry. */
  readonly #wholeRulesets = new WeakMap<LoadedPushRules, Reply>();

  constructor(cache: RulesetCache<LoadedPushRules>) {
    this.#cache = cache;
  }

  /**
   * A push-rule read of a user kept in memory, which `answer` may serve:
   * counted when it answers. Any other read is counted here as a miss.
   */
  keeps(command: Command): boolean {
    if (!isRuleRead(command)) return false;
    if (this.#cache.has(command.userId)) return true;
    // Counted (and a stale entry dropped) as `answer` counted every read before it waited for the change events.
    this.#cache.get(command.userId);
    return false;
  }

  /**
   * The reply to a push-rule read of a user kept in memory, or undefined:
   * another op, a user not kept, or `get_pushrules` of a user whose
   * defaults must be stored first. Then the store is read.
   */
  answer(command: Command): Reply | undefined {
    if (!isRuleRead(command)) return undefined;
    const { userId } = command;
    const kept = this.#cache.get(userId);
    if (kept === undefined) return undefined;
    if (command.op !== 'get_pushrules') {
      const result = ruleRead(command.op, command.address)(viewOf(kept, userId));
      return result.ok ? success(result.value) : failure(result.error);
    }
    const sent = this.#wholeRulesets.get(kept);
    if (sent !== undefined) return sent;
    const decision = getPushRules(kept.lookup, userId);
    if (!decision.ok) return failure(decision.error);
    const { ruleset, persist } = decision.value;
    if (persist !== 'none') return undefined;
    // The whole ruleset (a few KB) is encoded once per kept entry, not once
    // per read, and the entry is weighed with it: `maxBytes` counts what the
    // cache holds, not only the ruleset.
    const json = rulesetContentJson(ruleset);
    const reply = successKept(encodeRulesetContent(ruleset), json);
    if (this.#cache.reweigh(userId, kept, readCacheBytes(kept) + keptReplyBytes(reply, json)))
      this.#wholeRulesets.set(kept, reply);
    return reply;
  }

  /**
   * A user's rules for a read `answer` did not serve: from the store, kept
   * for the next read unless a change of the user came while it was read
   * (the cache's ticket) or the stored data is bad.
   */
  async load(store: PushStore, userId: string): Promise<LoadedPushRules> {
    const ticket = this.#cache.ticket();
    const loaded = await store.loadPushRules(userId);
    if (loaded.lookup.found !== 'failed') this.#cache.set(userId, loaded, readCacheBytes(loaded), ticket);
    return loaded;
  }

  /** A write of the user's rules may be under way: they are read again. */
  dropUser(userId: string): void {
    this.#cache.invalidate(userId);
  }

  /** What a request changed: its users' push rules are read again. */
  dropChanged(changes: readonly { readonly type: string; readonly user_id: string }[] | undefined): void {
    for (const change of changes ?? []) if (change.type === 'm.push_rules') this.#cache.invalidate(change.user_id);
  }
}

function isRuleRead(command: Command): command is Command & { readonly op: RuleRead | 'get_pushrules' } {
  return (
    command.op === 'get_pushrules' ||
    command.op === 'get_pushrule' ||
    command.op === 'get_pushrule_actions' ||
    command.op === 'get_pushrule_enabled'
  );
}
