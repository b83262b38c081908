import { setTimeout as sleep } from 'node:timers/promises';
import { failure, type Reply } from '../contract/reply.js';
import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { backoffDelay, type BackoffPolicy } from '../retry/backoff.js';
import { StoreFailedError, type RecordedWrite } from '../store/push-store.js';
import type { ChangeEvent } from './change-event.js';
import type { HandleOutcome } from './handle-outcome.js';

/** One compare-and-set attempt of a write: done (with its reply and changes), or lost to another writer. */
export type Attempt =
  | {
      readonly done: Reply;
      readonly changes?: readonly ChangeEvent[];
      readonly replayed?: true;
      readonly unchanged?: true;
    }
  | { readonly conflict: true };

/** How many compare-and-set rounds a write gets, and the jittered wait between them. */
export interface AttemptPolicy {
  readonly maxWriteAttempts: number;
  readonly backoff: BackoffPolicy;
  readonly random?: (() => number) | undefined;
}

/** Runs `attempt` until it is done or the budget of conflicts is spent (`Unavailable`). */
export async function withRetries(policy: AttemptPolicy, attempt: () => Promise<Attempt>): Promise<HandleOutcome> {
  const { maxWriteAttempts, backoff, random } = policy;
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

/** The record of a write with a `messageId`; `unchanged` for a no-op (whose replay announces nothing). */
export function recordOf(messageId: string | undefined, reply: Reply, unchanged = false): RecordedWrite | undefined {
  if (messageId === undefined) return undefined;
  return { messageId, replyJson: JSON.stringify(reply), ...(unchanged ? { unchanged: true as const } : {}) };
}

/**
 * The recorded reply; the store only ever holds what `recordOf` wrote, so
 * anything else is stored data gone bad: a storage failure (Database).
 */
export function replayOf(recorded: RecordedWrite): Reply {
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
