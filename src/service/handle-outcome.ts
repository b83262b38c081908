import type { Reply } from '../contract/reply.js';
import type { ChangeEvent } from './change-event.js';

/** What serving one command came to: its reply, and what the worker announces and logs about it. */
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
   * pusher-writes.ts, `pushersWritten`).
   */
  readonly unchanged?: true;
  /** Answered Unavailable because the request's deadline came before the store had served it. */
  readonly deadlinePassed?: true;
}
