import type { PushStore } from '../store/push-store.js';
import type { AbandonedOperation } from './bounded-store.js';
import type { ChangeEvent } from './change-event.js';
import type { Command } from './command.js';

/** Where the changes of a write answered `Unavailable` but applied afterwards are announced (`RpcWorker.announce`). */
export type LateAnnouncer = (changes: readonly ChangeEvent[]) => Promise<unknown>;

/**
 * The store operations that change what a change event announces: one of
 * them given up under way may still be applied. (Recording a `messageId`
 * alone changes nothing a cache holds.)
 */
const DATA_WRITES: ReadonlySet<string> = new Set([
  'savePushRules',
  'insertPushRulesIfAbsent',
  'eraseUserData',
  'upsertPusher',
  'deletePusher',
  'deletePushers',
  'deletePushersOfOtherUsers',
  'bumpPushersVersion',
]);

/** The change types a command may write; none for a read that stores nothing. */
export function writtenTypes(command: Command): readonly ChangeEvent['type'][] {
  switch (command.op) {
    case 'get_pushrule':
    case 'get_pushrule_actions':
    case 'get_pushrule_enabled':
    case 'get_pushers':
      return [];
    // It may store the defaults (a new user's, or an upgrade).
    case 'get_pushrules':
    case 'set_pushrule':
    case 'delete_pushrule':
    case 'set_pushrule_actions':
    case 'set_pushrule_enabled':
      return ['m.push_rules'];
    case 'set_pusher':
    case 'delete_pushers':
      return ['m.pushers'];
    case 'delete_user_data':
      return ['m.push_rules', 'm.pushers'];
  }
}

/**
 * A write answered `Unavailable` (its deadline came, or a store operation
 * took longer than `operationTimeoutMs`) may still be applied: the driver
 * cannot cancel what it has sent. Once the request's work has settled
 * (`dispatched`, and every operation it gave up under way), this says what
 * to announce so that no cache keeps what it changed:
 *
 * - the work finished after all (the reply had gone at the deadline while it
 *   waited): exactly what it changed;
 * - it was cut short while a data write was under way: a spare event of each
 *   type the command writes, at the version stored now (push rules: read;
 *   pushers: bumped, as every pusher write does, since nothing else reads
 *   that version). An event for a write that was not applied after all
 *   costs each consumer one re-read;
 * - otherwise (nothing under way was given up): nothing was written.
 *
 * `store` is the unbounded store: this runs after the request's deadline.
 * A failure to read the versions announces nothing; what the caches keep is
 * then bounded by their staleness bounds, as for a lost event.
 */
export async function lateChanges(
  command: Command,
  dispatched: Promise<{ readonly changes?: readonly ChangeEvent[] | undefined }>,
  abandoned: () => readonly AbandonedOperation[],
  store: Pick<PushStore, 'loadPushRules' | 'bumpPushersVersion'>,
): Promise<readonly ChangeEvent[]> {
  const types = writtenTypes(command);
  if (types.length === 0) return [];
  let finished: { readonly changes?: readonly ChangeEvent[] | undefined } | undefined;
  try {
    finished = await dispatched;
  } catch {
    finished = undefined;
  }
  // Read after `dispatched` settled: no operation of the request starts after that.
  const givenUp = abandoned();
  await Promise.all(givenUp.map(async (operation) => operation.settled));
  if (finished !== undefined) return finished.changes ?? [];
  if (!givenUp.some((operation) => DATA_WRITES.has(operation.operation))) return [];
  const { userId } = command;
  const changes: ChangeEvent[] = [];
  try {
    for (const type of types) {
      const version =
        type === 'm.push_rules' ? (await store.loadPushRules(userId)).version : await store.bumpPushersVersion(userId);
      changes.push({ user_id: userId, type, version });
    }
  } catch {
    // The store failed again: the caches' staleness bounds cover it.
  }
  return changes;
}
