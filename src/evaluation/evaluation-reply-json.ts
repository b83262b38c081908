import type { RecipientOutcome } from './compiled-rule.js';
import { NOT_NOTIFIED } from './compiled-rule.js';
import type { Evaluation } from './evaluate-request.js';

/**
 * The JSON text of an evaluation's reply body, exactly what
 * `JSON.stringify(evaluationReply(evaluation))` gives for the default form,
 * assembled from pieces: a 10,000-recipient reply holds a handful of
 * distinct action lists, each serialised once (per outcome object, which
 * lives as long as its compiled rule), and the user IDs, which need no
 * escaping in the common case. Building and then stringifying one object
 * per recipient cost more than evaluating them.
 *
 * `compact` (asked for by the request) groups the notified recipients by
 * identical actions: `{"notify_groups": [{"actions": [...], "user_ids":
 * [...]}, ...], "evaluated": n}`; groups in the order their first recipient
 * comes, user IDs in the request's order (docs/rpc-contract.md#evaluate).
 *
 * `runs` (asked for by the request) names the notified recipients by their
 * position in the request's list instead, as runs: `{"notify_groups":
 * [{"actions": [...], "runs": [first, count, ...]}, ...], "evaluated": n}`,
 * the groups as with `compact`. A room whose members share a rule is then a
 * few bytes however large it is: no user ID is sent back to the caller who
 * sent them, and none is assembled here.
 */
export function evaluationReplyJson(evaluation: Evaluation): string {
  const parts: string[] = [];
  if (evaluation.runs) parts.push('{"notify_groups":', runsJson(evaluation));
  else if (evaluation.compact) parts.push('{"notify_groups":', groupsJson(evaluation));
  else parts.push('{"notify":', notifyJson(evaluation));
  parts.push(',"evaluated":', String(evaluation.evaluated));
  if (evaluation.explain) parts.push(',"rule_ids":', ruleIdsJson(evaluation));
  parts.push('}');
  return parts.join('');
}

function notifyJson(evaluation: Evaluation): string {
  const { recipients, outcomes, evaluated } = evaluation;
  const entries: string[] = [];
  let last: RecipientOutcome | undefined;
  let lastJson = '';
  for (let index = 0; index < evaluated; index += 1) {
    const outcome = outcomes[index] ?? NOT_NOTIFIED;
    if (!outcome.notify) continue;
    if (outcome !== last) {
      last = outcome;
      lastJson = actionsJson(outcome);
    }
    entries.push(`${quoted(recipients[index]?.user_id ?? '')}:${lastJson}`);
  }
  return `{${entries.join(',')}}`;
}

/**
 * The notified recipients grouped by the text of their actions (two rules
 * with the same actions make one group), in order of first appearance:
 * `add` is given each one's group and position. Consecutive recipients
 * with the same outcome object share one lookup.
 */
function groupByActions<G>(
  evaluation: Evaluation,
  start: () => G,
  add: (group: G, index: number) => void,
): Map<string, G> {
  const { outcomes, evaluated } = evaluation;
  const groups = new Map<string, G>();
  let last: RecipientOutcome | undefined;
  let lastGroup: G | undefined;
  for (let index = 0; index < evaluated; index += 1) {
    const outcome = outcomes[index] ?? NOT_NOTIFIED;
    if (!outcome.notify) continue;
    if (outcome !== last || lastGroup === undefined) {
      last = outcome;
      const json = actionsJson(outcome);
      lastGroup = groups.get(json);
      if (lastGroup === undefined) {
        lastGroup = start();
        groups.set(json, lastGroup);
      }
    }
    add(lastGroup, index);
  }
  return groups;
}

function groupsJson(evaluation: Evaluation): string {
  const { recipients } = evaluation;
  // User IDs as they are; quoted once per group (`quotedList`).
  const groups = groupByActions<string[]>(
    evaluation,
    () => [],
    (userIds, index) => userIds.push(recipients[index]?.user_id ?? ''),
  );
  const entries: string[] = [];
  for (const [json, userIds] of groups) entries.push(`{"actions":${json},"user_ids":[${quotedList(userIds)}]}`);
  return `[${entries.join(',')}]`;
}

/**
 * The user IDs as JSON strings, comma-separated: in one join when none
 * needs escaping (the rule), rather than one quoted copy of each of a large
 * room's thousands of IDs.
 */
function quotedList(userIds: readonly string[]): string {
  if (userIds.length === 0) return '';
  for (const userId of userIds) if (NEEDS_ESCAPING.test(userId)) return userIds.map(quoted).join(',');
  return `"${userIds.join('","')}"`;
}

function runsJson(evaluation: Evaluation): string {
  // Each group's runs as flat pairs: [first, count, first, count, …].
  const groups = groupByActions<number[]>(
    evaluation,
    () => [],
    (runs, index) => {
      const end = runs.length;
      // The group's last run goes on when it ended right before this recipient.
      if (end > 0 && (runs[end - 2] as number) + (runs[end - 1] as number) === index)
        runs[end - 1] = (runs[end - 1] as number) + 1;
      else runs.push(index, 1);
    },
  );
  const entries: string[] = [];
  for (const [json, runs] of groups) entries.push(`{"actions":${json},"runs":[${runs.join(',')}]}`);
  return `[${entries.join(',')}]`;
}

function ruleIdsJson(evaluation: Evaluation): string {
  const { recipients, outcomes, evaluated } = evaluation;
  const entries: string[] = [];
  for (let index = 0; index < evaluated; index += 1) {
    const ruleId = (outcomes[index] ?? NOT_NOTIFIED).ruleId;
    entries.push(`${quoted(recipients[index]?.user_id ?? '')}:${ruleId === null ? 'null' : JSON.stringify(ruleId)}`);
  }
  return `{${entries.join(',')}}`;
}

/** Each outcome's actions serialised once; an outcome is shared by every recipient its rule decides for. */
const actionsText = new WeakMap<RecipientOutcome, string>();

function actionsJson(outcome: RecipientOutcome): string {
  let json = actionsText.get(outcome);
  if (json === undefined) {
    json = JSON.stringify(outcome.actions);
    actionsText.set(outcome, json);
  }
  return json;
}

/** Valid user IDs are printable ASCII: only `"` and `\` (allowed in historical localparts) need escaping. */
// eslint-disable-next-line no-control-regex -- control characters are exactly what JSON must escape
const NEEDS_ESCAPING = /["\\\u0000-\u001f\u007f-\uffff]/;

function quoted(userId: string): string {
  return NEEDS_ESCAPING.test(userId) ? JSON.stringify(userId) : `"${userId}"`;
}
