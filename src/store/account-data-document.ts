import type { Filter, UpdateFilter } from 'mongodb';
import type { PusherListFields } from './mongo-pusher-lists.js';
import type { RecordedWrite } from './push-store.js';

/**
 * One document per user in the account-data collection; the push-rules
 * event content is kept as JSON text (see `push-rules-entry.ts`).
 */
export interface AccountDataDocument extends PusherListFields {
  _id: string;
  /** Compare-and-set version of the push rules; absent until first stored. */
  version?: number;
  push_rules?: { content_json?: string; defaults_revision?: string };
  pushers_version?: number;
  /** The newest recorded writes, oldest first, at most the configured window. */
  recent_writes?: { message_id: string; reply_json: string; unchanged?: true }[];
}

/** The user's document if its push rules are at `version`; 0 matches a document that has none yet. */
export function versionFilter(userId: string, version: number): Filter<AccountDataDocument> {
  return version === 0 ? { _id: userId, version: { $exists: false } } : { _id: userId, version };
}

/** The record of `messageId` in the user's recorded writes, if it is one of them. */
export function findRecorded(
  doc: Pick<AccountDataDocument, 'recent_writes'> | null,
  messageId: string,
): RecordedWrite | undefined {
  // Newest first: an id recorded twice (see rule-writes.ts) answers as last recorded.
  const entry = doc?.recent_writes?.findLast((w) => w.message_id === messageId);
  if (entry === undefined) return undefined;
  return {
    messageId: entry.message_id,
    replyJson: entry.reply_json,
    ...(entry.unchanged === true ? { unchanged: true as const } : {}),
  };
}

/** Appends a write's record to the window of recorded writes and drops the oldest beyond `window`, in the same update. */
export function pushRecord(
  record: RecordedWrite | undefined,
  window: number,
): Pick<UpdateFilter<AccountDataDocument>, '$push'> {
  if (record === undefined) return {};
  const entry = {
    message_id: record.messageId,
    reply_json: record.replyJson,
    ...(record.unchanged === true ? { unchanged: true as const } : {}),
  };
  return { $push: { recent_writes: { $each: [entry], $slice: -window } } };
}
