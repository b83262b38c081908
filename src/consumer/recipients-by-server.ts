import type { Static } from '@sinclair/typebox';
import type { RecipientsByServerSchema } from '../contract/request-schemas.js';
import { matrixError } from '../errors/error-catalogue.js';
import type { EvaluationRecipient } from '../evaluation/evaluation-input.js';
import { userIdValidator } from '../matrix/user-id.js';
import { fail, ok, type Result } from '../result/result.js';

/**
 * The compact form of an `evaluate` request's recipients
 * (docs/rpc-contract.md#evaluate): user IDs grouped by server, each server
 * named once, display names alongside (`null`: none). A large room's list
 * is then less than half the bytes to send, parse and check, and no object
 * per recipient is parsed.
 */
export type RecipientsByServer = Static<typeof RecipientsByServerSchema>;

/** How many recipients the groups name, before anything is built (the TooLarge bound). */
export function recipientsByServerCount(groups: RecipientsByServer): number {
  let count = 0;
  for (const group of groups) count += group.localparts.length;
  return count;
}

/**
 * The recipients the groups stand for, in order (group by group, each
 * group's localparts in order), as the plain `recipients` list would carry
 * them; or BadJson naming the first localpart that makes no valid user ID
 * or repeats a user (groups may name the same server twice), or display
 * names not one per localpart. The shapes were checked by the schema.
 */
export function expandRecipientsByServer(groups: RecipientsByServer): Result<EvaluationRecipient[]> {
  const recipients: EvaluationRecipient[] = [];
  const seen = new Set<string>();
  const isValidUserId = userIdValidator();
  for (let at = 0; at < groups.length; at += 1) {
    const { server, localparts, display_names: displayNames } = groups[at] as RecipientsByServer[number];
    const field = `recipients_by_server.${at}`;
    if (displayNames !== undefined && displayNames.length !== localparts.length)
      return fail(matrixError('BadJson', `${field}.display_names must have one entry per localpart.`));
    const suffix = `:${server}`;
    for (let index = 0; index < localparts.length; index += 1) {
      const userId = `@${localparts[index] as string}${suffix}`;
      if (!isValidUserId(userId))
        return fail(matrixError('BadJson', `${field}.localparts.${index} does not make a valid Matrix user ID.`));
      if (seen.has(userId)) return fail(matrixError('BadJson', `${field}.localparts.${index} repeats ${userId}.`));
      seen.add(userId);
      const displayName = displayNames?.[index];
      recipients.push(
        typeof displayName === 'string' ? { user_id: userId, display_name: displayName } : { user_id: userId },
      );
    }
  }
  return ok(recipients);
}
