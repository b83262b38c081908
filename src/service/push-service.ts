import { setTimeout as sleep } from 'node:timers/promises';
import { LIMIT_MESSAGES, matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { deletePushRule } from '../push-rules/delete-push-rule.js';
import { encodeRulesetContent, rulesetContentJson } from '../push-rules/decode-ruleset.js';
import { getPushRules } from '../push-rules/get-push-rules.js';
import type { Ruleset } from '../push-rules/push-rule.js';
import { setPushRuleActions } from '../push-rules/push-rule-actions.js';
import { setPushRuleEnabled } from '../push-rules/push-rule-enabled.js';
import type { PushRulesEventView } from '../push-rules/push-rules-event.js';
import { DEFAULT_RULES_REVISION } from '../push-rules/server-default-rules.js';
import { checkRulesetGrowth, type RulesetLimits } from '../push-rules/ruleset-limits.js';
import { leavesRulesetUnchanged } from '../push-rules/ruleset-unchanged.js';
import { setPushRule } from '../push-rules/set-push-rule.js';
import {
  decidePusherSet,
  resolveEnabled,
  type PusherPolicy,
  type RawPusherSetAction,
} from '../pushers/decide-pusher-set.js';
import type { PusherDeletion } from '../pushers/pusher-deletion.js';
import { pusherMatches, toWirePusher, type PusherKey, type StoredPusher } from '../pushers/pusher.js';
import type { Result } from '../result/result.js';
import type { ChangeEvent } from './change-event.js';
import type { Command } from './command.js';
import {
  StoreFailedError,
  type FoundWrite,
  type LoadedPushRules,
  type PushStore,
  type RecordedWrite,
} from '../store/push-store.js';
import { backoffDelay, type BackoffPolicy } from '../retry/backoff.js';
import { beforeDeadline, BoundedStore, type StoreBoundsObserver } from './bounded-store.js';
import { failureOutcome } from './failure-reply.js';
import { KeyedSerializer } from './keyed-serializer.js';
import { lateChanges, writtenTypes, type LateAnnouncer } from './late-writes.js';
import type { RulesetCache } from './ruleset-cache.js';
import { ruleRead, RuleReads, viewOf } from './rule-reads.js';
import { failure, success, successEncoded, type Reply } from '../contract/reply.js';
import { WeightedBudget } from './weighted-budget.js';

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

export interface HandleOutcome {
  readonly reply: Reply;
  /**
   * What the request changed, to announce in this order once it is
   * answered (two for a `delete_user_data` that erased both types); none
   * when absent.
   */
  readonly changes?: readonly ChangeEvent[];
  /** Compare-and-set conflicts met while serving the request. */
  readonly conflicts: number;
  /** An unexpected failure behind a Database reply, for the log. */
  readonly failure?: unknown;
  /** Why the store was unavailable, for the log. */
  readonly cause?: string;
  /** The request's `messageId` was already applied: this is the recorded reply, nothing was written. */
  readonly replayed?: true;
  /**
   * A write that changed nothing: served without storing anything but, when
   * it has a `messageId`, its record; no version bump, and no change event
   * but the one a pusher write with a `messageId` makes anyway (see
   * `PushService#pushersWritten`).
   */
  readonly unchanged?: true;
  /** Answered Unavailable because the request's deadline came before the store had served it. */
  readonly deadlinePassed?: true;
}

/** What the transport knows about a request beyond its body. */
export interface RequestContext {
  /** The AMQP `messageId`: writes carrying one are applied at most once per user. */
  readonly messageId?: string | undefined;
  /**
   * `Date.now()` by which the request is answered (`stopWorkBy`): no store
   * operation is started after it, and one under way is given up then.
   */
  readonly deadline?: number | undefined;
}

type RulesetWrite = (view: PushRulesEventView) => Result<Ruleset>;

/**
 * Applies commands to a store: loads, runs the pure operation, writes back
 * under compare-and-set, retries on conflict. Never throws: every outcome,
 * storage failures included, is a reply.
 */
export class PushService {
  readonly #store: PushStore;
  readonly #options: PushServiceOptions;
  /** Push-rule writes of one user, one at a time within this process. */
  readonly #perUser = new KeyedSerializer();
  /** Stored ruleset text that rule writes are processing at once, weighed by its length. */
  readonly #writesInFlight: WeightedBudget;
  readonly #now: () => number;
  readonly #reads: RuleReads | undefined;

  constructor(store: PushStore, options: PushServiceOptions) {
    this.#store = store;
    this.#options = options;
    this.#now = options.now ?? (() => Date.now());
    this.#writesInFlight = new WeightedBudget(options.rulesetCharsInFlight ?? 0);
    this.#reads = options.readCache === undefined ? undefined : new RuleReads(options.readCache);
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
    const kept = this.#reads?.answer(command);
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
        return this.#write(store, userId, messageId, (view) => setPushRule(view, command.request));
      case 'delete_pushrule':
        return this.#write(store, userId, messageId, (view) => deletePushRule(view, command.address));
      case 'set_pushrule_actions':
        return this.#write(store, userId, messageId, (view) =>
          setPushRuleActions(view, command.address, command.actions),
        );
      case 'set_pushrule_enabled':
        return this.#write(store, userId, messageId, (view) =>
          setPushRuleEnabled(view, command.address, command.enabled),
        );
      case 'get_pushers': {
        const pushers = await store.listPushers(userId);
        return { reply: success({ pushers: pushers.map(toWirePusher) }), conflicts: 0 };
      }
      case 'set_pusher':
        return this.#setPusher(store, userId, messageId, command.action, command.deviceId);
      case 'delete_pushers':
        return this.#deletePushers(store, messageId, {
          userId,
          devices: command.devices,
          includeEmail: command.includeEmail,
        });
      case 'delete_user_data':
        return this.#deleteUserData(store, userId, messageId);
    }
  }

  async #getPushRules(store: PushStore, userId: string): Promise<HandleOutcome> {
    return this.#withRetries(async () => {
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
      return this.#save(store, userId, loaded.version, ruleset, reply);
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

  async #write(
    store: PushStore,
    userId: string,
    messageId: string | undefined,
    operation: RulesetWrite,
  ): Promise<HandleOutcome> {
    return this.#perUser.run(userId, async () =>
      this.#withRetries(async () => {
        // Looked up on every attempt: after a conflict, the winner may have
        // been a redelivered copy of this very request.
        const loaded = await store.loadPushRules(userId, messageId);
        if (loaded.recorded !== undefined) return replayAnnounced(userId, loaded.version, loaded.recorded);
        // What a write holds until the database has answered grows with the
        // ruleset: large ones take turns (small ones weigh little).
        return this.#writesInFlight.run(loaded.storedChars ?? 0, async () =>
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
      return this.#recordUnchanged(store, userId, loaded.version, success({}), messageId);
    // An operation only succeeds on a valid view.
    const before = view.status === 'valid' ? view.ruleset : result.value;
    const limited = checkRulesetGrowth(before, result.value, this.#options.limits);
    if (!limited.ok) return { done: failure(limited.error) };
    return this.#save(store, userId, loaded.version, result.value, success({}), messageId);
  }

  async #save(
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
  async #recordUnchanged(
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

  /** Runs `attempt` until it is done or the budget of conflicts is spent. */
  async #withRetries(attempt: () => Promise<Attempt>): Promise<HandleOutcome> {
    const { maxWriteAttempts, backoff, random } = this.#options;
    for (let round = 0; round < maxWriteAttempts; round += 1) {
      if (round > 0) await sleep(backoffDelay(backoff, round - 1, random));
      const outcome = await attempt();
      if ('done' in outcome) {
        const { done, changes, replayed, unchanged } = outcome;
        return {
          reply: done,
          conflicts: round,
          ...(changes === undefined || changes.length === 0 ? {} : { changes }),
          ...(replayed === true ? { replayed } : {}),
          ...(unchanged === true ? { unchanged } : {}),
        };
      }
    }
    return { reply: failure(matrixError('Unavailable', MESSAGES.tooManyConflicts)), conflicts: maxWriteAttempts };
  }

  /**
   * Pushers live in their own collection, so a pusher write and its record
   * are two updates: a crash between them lets a redelivery apply the same
   * change again, which leaves the same pushers (a set is a replace by
   * value, a delete of a missing pusher is a no-op) and at worst announces
   * one more change event.
   *
   * A set that leaves the user's pusher exactly as it was (the store decides
   * it in the same atomic update, see `upsertPusher`), like a delete of a
   * pusher that is not there, bumps no version; its `messageId` is still
   * recorded, for the reason given at `#recordUnchanged`, and announced (see
   * `#pushersWritten`). Pushers of other users removed by `append: false`
   * are removed either way, and each of those users is announced with a
   * version bump of their own: their delivery caches would otherwise keep
   * sending their notifications to a pushkey that is someone else's now.
   * Should the worker die between that removal and the confirm of their
   * events, a retry finds nothing left to remove and cannot name them: the
   * caches' age bound (`delivery.pusherCacheMaxStalenessMs`) ends it.
   */
  async #setPusher(
    store: PushStore,
    userId: string,
    messageId: string | undefined,
    action: RawPusherSetAction,
    deviceId: string | undefined,
  ): Promise<HandleOutcome> {
    if (messageId !== undefined) {
      const recorded = await store.findRecordedWrite(userId, messageId);
      if (recorded !== undefined) return pushersReplayAnnounced(userId, recorded);
    }
    const plan = decidePusherSet(userId, action, this.#options.pusherPolicy, { deviceId });
    if (!plan.ok) return { reply: failure(plan.error), conflicts: 0 };
    let changed: boolean;
    let others: readonly ChangeEvent[] = [];
    if (plan.value.type === 'delete') {
      changed = await store.deletePusher(plan.value.key);
    } else {
      const { key } = plan.value;
      const pushers = await store.listPushers(userId);
      const refused = this.#checkPusherCount(pushers, key);
      if (refused !== undefined) return { reply: refused, conflicts: 0 };
      // The device is the store's to keep (see upsertPusher); `enabled`,
      // when the action names it twice, depends on the stored value.
      const existing = pushers.find((p) => pusherMatches(p, key));
      const enabled = existing === undefined ? plan.value.pusher.enabled : resolveEnabled(action, existing.enabled);
      const upserted = await store.upsertPusher({ ...plan.value.pusher, enabled, user_id: userId });
      if (plan.value.removeFromOtherUsers)
        others = await othersBumped(store, await store.deletePushersOfOtherUsers(key));
      changed = upserted !== 'unchanged';
    }
    const written = await this.#pushersWritten(store, userId, messageId, success({}), changed);
    return others.length === 0 ? written : { ...written, changes: [...(written.changes ?? []), ...others] };
  }

  /**
   * `delete_pushers`: one filtered delete in the store, so each pusher goes
   * whole or stays whole whatever `set_pusher` runs beside it (see
   * `PushStore.deletePushers`). Replies `{deleted: n}`; a redelivery after
   * a crash between the delete and its record deletes nothing more and
   * counts only what it deleted.
   */
  async #deletePushers(
    store: PushStore,
    messageId: string | undefined,
    deletion: PusherDeletion,
  ): Promise<HandleOutcome> {
    const { userId } = deletion;
    return this.#perUser.run(userId, async () => {
      if (messageId !== undefined) {
        const recorded = await store.findRecordedWrite(userId, messageId);
        if (recorded !== undefined) return pushersReplayAnnounced(userId, recorded);
      }
      const deleted = await store.deletePushers(deletion);
      return this.#pushersWritten(store, userId, messageId, success({ deleted }), deleted > 0);
    });
  }

  /**
   * After a pusher write: the record, and a version bump with its change
   * event when something changed.
   *
   * A write with a `messageId` announces its user even when it changed
   * nothing now. It found no record of itself (looked up first), so it may
   * be the retry of one whose change landed while its bump and record did
   * not (answered `Unavailable`, with no event): judged again on what is
   * stored, it changes nothing, and it is the last chance to announce that
   * change. A spare event costs each cache one read; a missing one leaves
   * every worker's delivery cache with the old list. It bumps no version
   * (consumers take any event as "read this user again", at a version seen
   * before too), and it is recorded as a change, so that a redelivery whose
   * event was not confirmed announces again.
   */
  async #pushersWritten(
    store: PushStore,
    userId: string,
    messageId: string | undefined,
    reply: Reply,
    changed: boolean,
  ): Promise<HandleOutcome> {
    const record = recordOf(messageId, reply);
    if (!changed) {
      if (record === undefined) return { reply, conflicts: 0, unchanged: true };
      const version = await store.recordWrite(userId, record);
      return { reply, conflicts: 0, unchanged: true, changes: [{ user_id: userId, type: 'm.pushers', version }] };
    }
    const version = await store.bumpPushersVersion(userId, record);
    return { reply, changes: [{ user_id: userId, type: 'm.pushers', version }], conflicts: 0 };
  }

  /**
   * `delete_user_data` (deactivation): every pusher of the user, e-mail
   * ones included, then in one compare-and-set update of the user's
   * document the push-rules entry, both version bumps and the record.
   * Afterwards the user reads as a new one (no push rules: the defaults;
   * no pushers), but the versions go on from where they were and the
   * recorded writes stay, this request's among them, so a retry replays
   * `{}`. The record is written last: a crash before it leaves nothing a
   * redelivery would not finish.
   */
  async #deleteUserData(store: PushStore, userId: string, messageId: string | undefined): Promise<HandleOutcome> {
    return this.#perUser.run(userId, async () => {
      if (messageId !== undefined) {
        const recorded = await store.findRecordedWrite(userId, messageId);
        if (recorded !== undefined)
          return this.#withRetries(async () =>
            userDataReplayAnnounced(userId, (await store.loadPushRules(userId)).version, recorded),
          );
      }
      const deletedPushers = await store.deletePushers({ userId, devices: { all: true }, includeEmail: true });
      return this.#withRetries(async () => {
        const loaded = await store.loadPushRules(userId, messageId);
        if (loaded.recorded !== undefined) {
          // A copy of this request got there first (a redelivery served beside it).
          const found = messageId === undefined ? undefined : await store.findRecordedWrite(userId, messageId);
          return userDataReplayAnnounced(userId, loaded.version, found ?? loaded.recorded);
        }
        const reply = success({});
        // A corrupt entry is erased too.
        const pushRules = loaded.lookup.found !== false;
        const pushers = deletedPushers > 0;
        const record = recordOf(messageId, reply, !pushRules && !pushers);
        if (!pushRules && !pushers && record === undefined) return { done: reply, unchanged: true };
        const erased = await store.eraseUserData(userId, loaded.version, { pushRules, pushers, record });
        if (!erased.saved) return { conflict: true };
        const changes: ChangeEvent[] = [];
        if (pushRules) changes.push({ user_id: userId, type: 'm.push_rules', version: erased.version });
        if (pushers) changes.push({ user_id: userId, type: 'm.pushers', version: erased.pushersVersion });
        return changes.length === 0 ? { done: reply, unchanged: true } : { done: reply, changes };
      });
    });
  }

  /**
   * A new pusher beyond the limit is refused; replacing one never is.
   * Workers serving the same user at the same instant may each let one
   * through, so the limit can be passed by a few — it bounds abuse, it is
   * not an invariant.
   */
  #checkPusherCount(pushers: readonly StoredPusher[], key: PusherKey): Reply | undefined {
    const { maxPushersPerUser } = this.#options.limits;
    if (pushers.length < maxPushersPerUser) return undefined;
    if (pushers.some((p) => p.app_id === key.appId && p.pushkey === key.pushkey)) return undefined;
    return failure(matrixError('TooLarge', LIMIT_MESSAGES.tooManyPushers(maxPushersPerUser)));
  }
}

type Attempt =
  | {
      readonly done: Reply;
      readonly changes?: readonly ChangeEvent[];
      readonly replayed?: true;
      readonly unchanged?: true;
    }
  | { readonly conflict: true };

/** The users a `set_pusher` took a pushkey from, each with a pushers version bump and its change event. */
async function othersBumped(store: PushStore, userIds: readonly string[]): Promise<readonly ChangeEvent[]> {
  const changes: ChangeEvent[] = [];
  for (const userId of userIds) {
    changes.push({ user_id: userId, type: 'm.pushers', version: await store.bumpPushersVersion(userId) });
  }
  return changes;
}

/** The record of a write with a `messageId`; `unchanged` for a no-op (whose replay announces nothing). */
function recordOf(messageId: string | undefined, reply: Reply, unchanged = false): RecordedWrite | undefined {
  if (messageId === undefined) return undefined;
  return { messageId, replyJson: JSON.stringify(reply), ...(unchanged ? { unchanged: true as const } : {}) };
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

/**
 * A pusher write (or `delete_pushers`, `delete_user_data`) met its own
 * record: answered from it; one that changed the user's pushers announces
 * them again at the pushers version stored now, for the reason given at
 * `replayAnnounced`.
 */
function pushersReplayAnnounced(userId: string, recorded: FoundWrite): HandleOutcome {
  const reply = replayOf(recorded);
  return recorded.unchanged !== true
    ? {
        reply,
        conflicts: 0,
        replayed: true,
        changes: [{ user_id: userId, type: 'm.pushers', version: recorded.pushersVersion }],
      }
    : { reply, conflicts: 0, replayed: true };
}

/**
 * `delete_user_data` met its own record: answered from it; one that erased
 * anything announces both types again, at the versions stored now, for the
 * reason given at `replayAnnounced` (the record does not say which it
 * erased: a spare event costs a re-read). Without the pushers version (a
 * record the store no longer finds), the push rules alone.
 */
function userDataReplayAnnounced(userId: string, version: number, recorded: RecordedWrite | FoundWrite): Attempt {
  const done = replayOf(recorded);
  if (recorded.unchanged === true) return { done, replayed: true };
  const changes: ChangeEvent[] = [{ user_id: userId, type: 'm.push_rules', version }];
  if ('pushersVersion' in recorded)
    changes.push({ user_id: userId, type: 'm.pushers', version: recorded.pushersVersion });
  return { done, replayed: true, changes };
}

/**
 * The recorded reply; the store only ever holds what `recordOf` wrote, so
 * anything else is stored data gone bad: a storage failure (Database).
 */
function replayOf(recorded: RecordedWrite): Reply {
  let reply: unknown;
  try {
    reply = JSON.parse(recorded.replyJson) as unknown;
  } catch (error) {
    throw new StoreFailedError(`the recorded reply for messageId ${recorded.messageId} is not JSON`, { cause: error });
  }
  if (typeof reply !== 'object' || reply === null || typeof (reply as { ok?: unknown }).ok !== 'boolean') {
    throw new StoreFailedError(`the recorded reply for messageId ${recorded.messageId} is not a reply`);
  }
  return reply as Reply;
}

/** A lookup that failed is, for every op but `get_pushrules`, an unreadable event. */
