import type { Static } from '@sinclair/typebox';
import type { RecipientsByServerSchema } from '../contract/request-schemas.js';
import { matrixError } from '../errors/error-catalogue.js';
import type { EvaluationRecipient } from '../evaluation/evaluation-input.js';
import { isValidServerName } from '../matrix/server-name.js';
import { isValidLocalpartOf } from '../matrix/user-id.js';
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
 * them; or BadJson naming the first server that is not a valid server name,
 * the first localpart that is no valid localpart (a `:` included) or makes
 * an ID over 255 bytes, or that repeats a user (groups may name the same
 * server twice), or display names not one per localpart. The shapes were
 * checked by the schema. Each part is checked as it came: a large list's
 * user IDs are only put together, never taken apart again.
 */
export function expandRecipientsByServer(groups: RecipientsByServer): Result<EvaluationRecipient[]> {
  const recipients = new Array<EvaluationRecipient>(recipientsByServerCount(groups));
  const seen = new Set<string>();
  let next = 0;
  for (let at = 0; at < groups.length; at += 1) {
    const { server, localparts, display_names: displayNames } = groups[at] as RecipientsByServer[number];
    const field = `recipients_by_server.${at}`;
    if (!isValidServerName(server)) return fail(matrixError('BadJson', `${field}.server is not a valid server name.`));
    if (displayNames !== undefined && displayNames.length !== localparts.length)
      return fail(matrixError('BadJson', `${field}.display_names must have one entry per localpart.`));
    const suffix = `:${server}`;
    for (let index = 0; index < localparts.length; index += 1) {
      const localpart = localparts[index] as string;
      if (!isValidLocalpartOf(localpart, server))
        return fail(matrixError('BadJson', `${field}.localparts.${index} does not make a valid Matrix user ID.`));
      const userId = `@${localpart}${suffix}`;
      if (seen.has(userId)) return fail(matrixError('BadJson', `${field}.localparts.${index} repeats ${userId}.`));
      seen.add(userId);
      const displayName = displayNames?.[index];
      recipients[next] =
        typeof displayName === 'string' ? { user_id: userId, display_name: displayName } : { user_id: userId };
      next += 1;
    }
  }
  return ok(recipients);
}
