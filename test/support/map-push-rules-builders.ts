import { mapPushRules } from '../../src/import/map-push-rules.js';
import type { RuleSkipReason } from '../../src/import/synapse-rule-row.js';
import type { SynapsePushRuleEnableRow, SynapsePushRuleRow } from '../../src/import/synapse-rows.js';
import type { PushRule } from '../../src/push-rules/push-rule.js';
import { ALICE, ids } from './builders.js';

// Alice's Synapse rows mapped, and what to look at in the result: for
// test/import/map-push-rules*.test.ts.

export const ROOM = '!room:example.org';

export function map(rows: readonly SynapsePushRuleRow[], enableRows: readonly SynapsePushRuleEnableRow[] = []) {
  return mapPushRules(ALICE, rows, enableRows);
}

export function userRuleIds(rules: readonly PushRule[]): string[] {
  return ids(rules.filter((rule) => !rule.default));
}

export function skips(result: ReturnType<typeof map>): [string, RuleSkipReason][] {
  return result.skipped.map((skip) => [skip.ruleId, skip.reason]);
}
