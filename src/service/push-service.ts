import { failure, success, successEncoded, type Reply } from '../contract/reply.js';
import { encodeRulesetContent, rulesetContentJson } from '../push-rules/decode-ruleset.js';
import { deletePushRule } from '../push-rules/delete-push-rule.js';
import { getPushRules } from '../push-rules/get-push-rules.js';
import { setPushRuleActions } from '../push-rules/push-rule-actions.js';
import { setPushRuleEnabled } from '../push-rules/push-rule-enabled.js';
import type { PushRulesEventView } from '../push-rules/push-rules-event.js';
import type { RulesetLimits } from '../push-rules/ruleset-limits.js';
import { DEFAULT_RULES_REVISION } from '../push-rules/server-default-rules.js';
import { setPushRule } from '../push-rules/set-push-rule.js';
import type { PusherPolicy } from '../pushers/decide-pusher-set.js';
import { toWirePusher } from '../pushers/pusher.js';
import type { Result } from '../result/result.js';
import type { BackoffPolicy } from '../retry/backoff.js';
import type { LoadedPushRules, PushStore } from '../store/push-store.js';
import { beforeDeadline, BoundedStore, type StoreBoundsObserver } from './bounded-store.js';
import type { Command } from './command.js';
import { failureOutcome } from './failure-reply.js';
import type { HandleOutcome } from './handle-outcome.js';
import { KeyedSerializer } from './keyed-serializer.js';
import { lateChanges, writtenTypes, type LateAnnouncer } from './late-writes.js';
import { PusherWrites } from './pusher-writes.js';
import { ruleRead, RuleReads, viewOf } from './rule-reads.js';
import { RuleWrites, saveRuleset } from './rule-writes.js';
import type { RulesetCache } from './ruleset-cache.js';
import { eraseUserData } from './user-data-erasure.js';
import { withRetries, type AttemptPolicy } from './write-attempts.js';

export interface PushServiceOptions {
  /** Compare-and-set attempts per request before answering Unavailable. */
  readonly maxWriteAttempts: number;
  readonly backoff: BackoffPolicy;
  readonly pusherPolicy: PusherPolicy;
  readonly limits: ServiceLimits;
  /**
   * Characters of stored ruleset text that rule writes may be processing
   * at once (`WeightedBudget`); 0 or absent: no bound.
   */
  readonly rulesetCharsInFlight?: number;
  /**
   * Each store operation is given up after this long (`Unavailable`), or
   * at the request's deadline if that comes first; absent: only the
   * deadline bounds it. See `BoundedStore`.
   */
  readonly operationTimeoutMs?: number | undefined;
  /** Store operations not started, or given up, at a deadline or a timeout: for metrics. */
  readonly observer?: StoreBoundsObserver;
  /** The clock deadlines are read on (`Date.now`). */
  readonly now?: () => number;
  readonly random?: () => number;
  /**
   * Push rules kept for reads (`get_pushrules`, `get_pushrule*`): a read
   * of a user kept here reads nothing from the store. The service drops a
   * user when its own write of their rules completes; the worker drops them
   * on every change event (`invalidate`) and everyone when the event
   * subscription is lost (`clear`). Absent: every read goes to the store.
   */
  readonly readCache?: RulesetCache<LoadedPushRules>;
  /**
   * Announces what a write answered `Unavailable` changed once its work
   * has settled (see `lateChanges`); absent: not announced (the caches'
   * staleness bounds cover it).
   */
  readonly announceLate?: LateAnnouncer;
}

/** Limits on what a user may accumulate (per-request limits are checked when parsing). */
export interface ServiceLimits extends RulesetLimits {
  readonly maxPushersPerUser: number;
}

export type { ChangeEvent } from './change-event.js';

/** What the transport knows about a request beyond its body. */
export interface RequestContext {
  /** The AMQP `messageId`: writes carrying one are applied at most once per user. */
  readonly messageId?: string | undefined;
  /**
   * `Date.now()` by which the request is answered (`stopWorkBy`): no store
   * operation is started after it, and one under way is given up then.
   */
  readonly deadline?: number | undefined;
  /**
   * Resolves once the change events already queued for this worker are
   * applied to its caches: a read answered from the read cache waits for
   * it, so it never predates a write whose reply came before the read was
   * sent. Absent: the cache answers at once (no change events).
   */
  readonly changesApplied?: (() => Promise<void>) | undefined;
}

/**
 * Applies commands to a store: loads, runs the pure operation, writes back
 * under compare-and-set, retries on conflict. Never throws: every outcome,
 * storage failures included, is a reply.
 */
export class PushService {
  readonly #store: PushStore;
  readonly #options: PushServiceOptions;
  readonly #now: () => number;
  readonly #reads: RuleReads | undefined;
  readonly #attempts: AttemptPolicy;
  readonly #writes: { readonly perUser: KeyedSerializer; readonly attempts: AttemptPolicy };
  readonly #ruleWrites: RuleWrites;
  readonly #pusherWrites: PusherWrites;

  constructor(store: PushStore, options: PushServiceOptions) {
    this.#store = store;
    this.#options = options;
    this.#now = options.now ?? (() => Date.now());
    this.#reads = options.readCache === undefined ? undefined : new RuleReads(options.readCache);
    const { maxWriteAttempts, backoff, random } = options;
    this.#attempts = { maxWriteAttempts, backoff, random };
    // The writes of one user, one at a time within this process.
    const perUser = new KeyedSerializer();
    this.#writes = { perUser, attempts: this.#attempts };
    this.#ruleWrites = new RuleWrites({
      attempts: this.#attempts,
      limits: options.limits,
      perUser,
      rulesetCharsInFlight: options.rulesetCharsInFlight ?? 0,
    });
    this.#pusherWrites = new PusherWrites({
      policy: options.pusherPolicy,
      maxPushersPerUser: options.limits.maxPushersPerUser,
      perUser,
    });
  }

  /**
   * With a deadline, the reply comes by the deadline: `Unavailable` if the
   * request is still waiting then (for its turn behind the user's other
   * writes, or for the store), and no store operation of it is started
   * afterwards.
   */
  async handle(command: Command, context: RequestContext = {}): Promise<HandleOutcome> {
    // A read of rules kept in memory is answered here, with no store, so no
    // deadline timer and no bounded store are worth setting up for it.
    const kept = await this.#keptReply(command, context.changesApplied);
    if (kept !== undefined) return { reply: kept, conflicts: 0 };
    const { deadline, messageId } = context;
    const { operationTimeoutMs, observer } = this.#options;
    const bounded = deadline !== undefined || (operationTimeoutMs ?? 0) > 0;
    const store = bounded
      ? new BoundedStore(this.#store, { deadline, operationTimeoutMs, now: this.#now, observer })
      : this.#store;
    const dispatched = this.#dispatch(store, command, messageId);
    try {
      // On the dispatch, not on what `beforeDeadline` answers: a write that
      // completes after its deadline still drops what it changed.
      const reads = this.#reads;
      if (reads !== undefined)
        void dispatched.then(
          (outcome) => {
            reads.dropChanged(outcome.changes);
          },
          () => undefined,
        );
      return await beforeDeadline(dispatched, deadline, this.#now);
    } catch (error) {
      if (store instanceof BoundedStore) this.#givenUp(command, dispatched, store);
      return { ...failureOutcome(error), conflicts: 0 };
    }
  }

  /**
   * The reply to a read of rules kept in memory, once the change events
   * queued for this worker are applied (one may drop what is kept); none
   * when they cannot be waited for (the subscription ended): the store
   * answers.
   */
  async #keptReply(command: Command, changesApplied: RequestContext['changesApplied']): Promise<Reply | undefined> {
    const reads = this.#reads;
    if (reads === undefined || !reads.keeps(command)) return undefined;
    if (
      changesApplied !== undefined &&
      !(await changesApplied().then(
        () => true,
        () => false,
      ))
    )
      return undefined;
    return reads.answer(command);
  }

  /**
   * A request answered with a failure may still write: what it changed is
   * dropped from this worker's read cache at once, and announced (with its
   * change events, which every worker's caches hear) once it has settled.
   */
  #givenUp(command: Command, dispatched: Promise<HandleOutcome>, store: BoundedStore): void {
    const types = writtenTypes(command);
    if (types.length === 0) return;
    if (types.includes('m.push_rules')) this.#reads?.dropUser(command.userId);
    const announce = this.#options.announceLate;
    void lateChanges(command, dispatched, () => store.abandoned, this.#store)
      .then(async (changes) => {
        if (changes.length === 0) return;
        this.#reads?.dropChanged(changes);
        await announce?.(changes);
      })
      .catch(() => undefined);
  }

  async #dispatch(store: PushStore, command: Command, messageId: string | undefined): Promise<HandleOutcome> {
    const { userId } = command;
    switch (command.op) {
      case 'get_pushrules':
        return this.#getPushRules(store, userId);
      case 'get_pushrule':
      case 'get_pushrule_actions':
      case 'get_pushrule_enabled':
        return this.#read(store, userId, ruleRead(command.op, command.address));
      case 'set_pushrule':
        return this.#ruleWrites.write(store, userId, messageId, (view) => setPushRule(view, command.request));
      case 'delete_pushrule':
        return this.#ruleWrites.write(store, userId, messageId, (view) => deletePushRule(view, command.address));
      case 'set_pushrule_actions':
        return this.#ruleWrites.write(store, userId, messageId, (view) =>
          setPushRuleActions(view, command.address, command.actions),
        );
      case 'set_pushrule_enabled':
        return this.#ruleWrites.write(store, userId, messageId, (view) =>
          setPushRuleEnabled(view, command.address, command.enabled),
        );
      case 'get_pushers': {
        const pushers = await store.listPushers(userId);
        return { reply: success({ pushers: pushers.map(toWirePusher) }), conflicts: 0 };
      }
      case 'set_pusher':
        return this.#pusherWrites.setPusher(store, userId, messageId, command.action, command.deviceId);
      case 'delete_pushers':
        return this.#pusherWrites.deletePushers(store, messageId, {
          userId,
          devices: command.devices,
          includeEmail: command.includeEmail,
        });
      case 'delete_user_data':
        return eraseUserData(store, userId, messageId, this.#writes);
    }
  }

  async #getPushRules(store: PushStore, userId: string): Promise<HandleOutcome> {
    return withRetries(this.#attempts, async () => {
      const loaded = await this.#loadForRead(store, userId);
      const decision = getPushRules(loaded.lookup, userId);
      if (!decision.ok) return { done: failure(decision.error) };
      const { ruleset, persist } = decision.value;
      // `{"global": …}` is the ruleset's stored form, whose text is kept with the ruleset.
      const reply = successEncoded(encodeRulesetContent(ruleset), rulesetContentJson(ruleset));
      if (persist === 'none') return { done: reply };
      if (persist === 'store-if-absent') {
        // Version 1 for a new user; the next version for one whose data was erased.
        const inserted = await store.insertPushRulesIfAbsent(userId, ruleset, DEFAULT_RULES_REVISION);
        return {
          done: reply,
          ...(inserted.saved
            ? { changes: [{ user_id: userId, type: 'm.push_rules', version: inserted.version }] }
            : {}),
        };
      }
      return saveRuleset(store, userId, loaded.version, ruleset, reply);
    });
  }

  async #read(
    store: PushStore,
    userId: string,
    operation: (view: PushRulesEventView) => Result<unknown>,
  ): Promise<HandleOutcome> {
    const loaded = await this.#loadForRead(store, userId);
    const result = operation(viewOf(loaded, userId));
    return { reply: result.ok ? success(result.value) : failure(result.error), conflicts: 0 };
  }

  /** A user's rules for a read the read cache did not answer: from the store, kept there for next time. */
  async #loadForRead(store: PushStore, userId: string): Promise<LoadedPushRules> {
    return this.#reads === undefined ? store.loadPushRules(userId) : this.#reads.load(store, userId);
  }
}
