import type { Static } from '@sinclair/typebox';
import type { RecipientsByServerSchema } from '../contract/request-schemas.js';
import type { EvaluationRecipient } from '../evaluation/evaluation-input.js';

type RecipientsByServer = Static<typeof RecipientsByServerSchema>;
type Group = { server: string; localparts: string[]; display_names?: (string | null)[] };

/** The grouped form, and the recipients in the order it names them (what a reply's positions point into). */
export interface GroupedRecipients {
  readonly groups: RecipientsByServer;
  readonly order: readonly EvaluationRecipient[];
}

/**
 * `evaluate`'s recipients in the grouped form (`recipients_by_server`,
 * docs/rpc-contract.md#evaluate): one group per server, in the order of
 * each server's first recipient, localparts in the list's order; display
 * names only in a group where some recipient has one. Undefined when some
 * user ID has no `@` or no `:`: the plain form then carries the list, and
 * the worker's refusal names the recipient as it always did.
 */
export function groupRecipientsByServer(recipients: readonly EvaluationRecipient[]): GroupedRecipients | undefined {
  const groups = new Map<string, { group: Group; members: EvaluationRecipient[] }>();
  let last: { group: Group; members: EvaluationRecipient[] } | undefined;
  for (let index = 0; index < recipients.length; index += 1) {
    const recipient = recipients[index] as EvaluationRecipient;
    const { user_id: userId, display_name: displayName } = recipient;
    const colon = userId.indexOf(':');
    if (userId.charCodeAt(0) !== 0x40 /* @ */ || colon < 0) return undefined;
    // Most recipients are on the server of the one before: recognised in place, not cut out and looked up.
    const lastServer = last?.group.server;
    let entry =
      lastServer !== undefined && userId.length - colon - 1 === lastServer.length && userId.endsWith(lastServer)
        ? last
        : undefined;
    if (entry === undefined) {
      const server = userId.slice(colon + 1);
      entry = groups.get(server);
      if (entry === undefined) {
        entry = { group: { server, localparts: [] }, members: [] };
        groups.set(server, entry);
      }
      last = entry;
    }
    const { group } = entry;
    if (displayName !== undefined && group.display_names === undefined)
      group.display_names = new Array<string | null>(group.localparts.length).fill(null);
    group.localparts.push(userId.slice(1, colon));
    group.display_names?.push(displayName ?? null);
    entry.members.push(recipient);
  }
  const entries = [...groups.values()];
  // One server (the usual room): the order is the list's own.
  const order = entries.length === 1 ? recipients : entries.flatMap((entry) => entry.members);
  return { groups: entries.map((entry) => entry.group), order };
}
