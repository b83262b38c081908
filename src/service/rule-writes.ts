import { failure, success, type Reply } from '../contract/reply.js';
import type { Ruleset } from '../push-rules/push-rule.js';
import type { PushRulesEventView } from '../push-rules/push-rules-event.js';
import { checkRulesetGrowth, type RulesetLimits } from '../push-rules/ruleset-limits.js';
import { leavesRulesetUnchanged } from '../push-rules/ruleset-unchanged.js';
import { DEFAULT_RULES_REVISION } from '../push-rules/server-default-rules.js';
import type { Result } from '../result/result.js';
import type { LoadedPushRules, PushStore, RecordedWrite } from '../store/push-store.js';
import type { HandleOutcome } from './handle-outcome.js';
import type { KeyedSerializer } from './keyed-serializer.js';
import { viewOf } from './rule-reads.js';
import { WeightedBudget } from './weighted-budget.js';
import { recordOf, replayOf, withRetries, type Attempt, type AttemptPolicy } from './write-attempts.js';

/** A push-rule write as a pure operation on the user's current rules. */
export type RulesetWrite = (view: PushRulesEventView) => Result<Ruleset>;

export interface RuleWritesOptions {
  readonly attempts: AttemptPolicy;
  readonly limits: RulesetLimits;
  /** Push-rule writes of one user, one at a time within this process (shared with the other writes of a user). */
  readonly perUser: KeyedSerializer;
  /** Characters of stored ruleset text that rule writes may be processing at once; 0: no bound. */
  readonly rulesetCharsInFlight: number;
}

/**
 * Push-rule writes: the user's rules loaded, the pure operation run on
 * them, the result written back under compare-and-set with the request's
 * record, retried on conflict.
 */
export class RuleWrites {
  readonly #options: RuleWritesOptions;
  /** Stored ruleset text that rule writes are processing at once, weighed by its length. */
  readonly #inFlight: WeightedBudget;

  constructor(options: RuleWritesOptions) {
    this.#options = options;
    this.#inFlight = new WeightedBudget(options.rulesetCharsInFlight);
  }

  async write(
    store: PushStore,
    userId: string,
    messageId: string | undefined,
    operation: RulesetWrite,
  ): Promise<HandleOutcome> {
    return this.#options.perUser.run(userId, async () =>
      withRetries(this.#options.attempts, async () => {
        // Looked up on every attempt: after a conflict, the winner may have
        // been a redelivered copy of this very request.
        const loaded = await store.loadPushRules(userId, messageId);
        if (loaded.recorded !== undefined) return replayAnnounced(userId, loaded.version, loaded.recorded);
        // What a write holds until the database has answered grows with the
        // ruleset: large ones take turns (small ones weigh little).
        return this.#inFlight.run(loaded.storedChars ?? 0, async () =>
          this.#apply(store, userId, loaded, messageId, operation),
        );
      }),
    );
  }

  async #apply(
    store: PushStore,
    userId: string,
    loaded: LoadedPushRules,
    messageId: string | undefined,
    operation: RulesetWrite,
  ): Promise<Attempt> {
    const view = viewOf(loaded, userId);
    const result = operation(view);
    if (!result.ok) return { done: failure(result.error) };
    if (leavesRulesetUnchanged(view, result.value))
      return recordUnchanged(store, userId, loaded.version, success({}), messageId);
    // An operation only succeeds on a valid view.
    const before = view.status === 'valid' ? view.ruleset : result.value;
    const limited = checkRulesetGrowth(before, result.value, this.#options.limits);
    if (!limited.ok) return { done: failure(limited.error) };
    return saveRuleset(store, userId, loaded.version, result.value, success({}), messageId);
  }
}

/** Writes `ruleset` under compare-and-set on `version`, with the record of `messageId`; announces the new version. */
export async function saveRuleset(
  store: PushStore,
  userId: string,
  version: number,
  ruleset: Ruleset,
  reply: Reply,
  messageId?: string,
): Promise<Attempt> {
  const record = recordOf(messageId, reply);
  const saved = await store.savePushRules(userId, version, ruleset, DEFAULT_RULES_REVISION, record);
  if (!saved.saved) return { conflict: true };
  return { done: reply, changes: [{ user_id: userId, type: 'm.push_rules', version: saved.version }] };
}

/**
 * Serves a push-rule write that changed nothing: no ruleset stored, no
 * version bump, no change event — but a `messageId` is still recorded.
 *
 * Not recording it would be wrong. Re-applying a no-op is a no-op only as
 * long as nothing else changed: set enabled=false on a disabled rule
 * (unchanged), another client sets it true, then a retry of the first
 * request would set it false — applying it twice, and undoing a change
 * made after it. With the record, the retry gets `{}` and changes nothing,
 * as it would had the first request changed something.
 *
 * The record is written the way a changing write writes it: under
 * compare-and-set on the version the no-op was decided on, without bumping
 * it. If another writer got in between, this is a conflict like any other
 * and the request is judged again on what is stored now (where it may be
 * a change, or meet the record of a redelivered copy of itself). A plain
 * append would not do: a copy of this request judged after that other
 * writer would apply it for real while this one records its no-op.
 *
 * Without a `messageId` nothing is written at all.
 */
async function recordUnchanged(
  store: PushStore,
  userId: string,
  version: number,
  reply: Reply,
  messageId: string | undefined,
): Promise<Attempt> {
  const record = recordOf(messageId, reply, true);
  if (record !== undefined && !(await store.recordWriteAtVersion(userId, version, record))) return { conflict: true };
  return { done: reply, unchanged: true };
}

/**
 * A push-rule write met its own record: answered from it, nothing written.
 * One that changed the push rules announces them again, at the version
 * stored now: the first delivery may have applied the write and then died
 * (or lost its connection) before the broker confirmed its change event,
 * and this redelivery is what is left to announce it. A spare event costs
 * its consumers one re-read; a missing one leaves a /sync stream asleep.
 */
function replayAnnounced(userId: string, version: number, recorded: RecordedWrite): Attempt {
  const reply = replayOf(recorded);
  return recorded.unchanged !== true
    ? { done: reply, replayed: true, changes: [{ user_id: userId, type: 'm.push_rules', version }] }
    : { done: reply, replayed: true };
}
