import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { decodeRulesetContent } from '../../src/push-rules/decode-ruleset.js';
import { compileUserRuleset, sharedDefaultRuleset } from '../../src/evaluation/compile-ruleset.js';
import type { CompiledRuleset } from '../../src/evaluation/compiled-ruleset.js';
import type { RulesetLookup } from '../../src/evaluation/evaluate-request.js';
import type { EvaluationEvent, EvaluationRecipient, EvaluationRoom } from '../../src/evaluation/evaluation-input.js';

/**
 * The steering team's `evaluate` workload (test/fixtures/evaluate-bench/,
 * see its README): rows of events × recipients with the recipients' stored
 * rules, the same rows Synapse's evaluator was timed and checked on.
 */
export const WORKLOAD_PATH = new URL('../fixtures/evaluate-bench/workload.json.gz', import.meta.url);
export const EXPECTED_PATH = new URL('../fixtures/evaluate-bench/expected.json', import.meta.url);

export interface WorkloadEvent {
  readonly event: EvaluationEvent;
  readonly room: EvaluationRoom;
}

export interface WorkloadRow {
  readonly name: string;
  readonly description: string;
  /** User ID → the `get_pushrules` body (`{"global": Ruleset}`); absent users have no stored rules. */
  readonly rules: Readonly<Record<string, unknown>>;
  readonly events: readonly WorkloadEvent[];
  readonly recipients: readonly EvaluationRecipient[];
}

export interface Workload {
  readonly format: string;
  readonly rows: readonly WorkloadRow[];
}

/** One entry of expected.json: Synapse's answer for a pair, and the project's where they differ. */
export interface ExpectedPair {
  readonly row: string;
  readonly event_index: number;
  readonly user_id: string;
  readonly notified: boolean;
  readonly actions: readonly unknown[];
  readonly rule_id: string | null;
  readonly known_departure: string | null;
  readonly project_notified?: boolean;
  readonly project_actions?: readonly unknown[];
}

export function loadWorkload(path: URL = WORKLOAD_PATH): Workload {
  const workload = JSON.parse(gunzipSync(readFileSync(path)).toString('utf8')) as Workload;
  if (workload.format !== 'evaluate-bench workload v1')
    throw new Error(`unexpected workload format ${workload.format}`);
  return workload;
}

export function loadExpected(path: URL = EXPECTED_PATH): readonly ExpectedPair[] {
  return JSON.parse(readFileSync(path, 'utf8')) as ExpectedPair[];
}

/**
 * Every recipient's compiled rules, as a worker with a warm cache holds
 * them: stored rules decoded as the store's reader decodes them, then
 * compiled; recipients without stored rules get the shared defaults.
 */
export function compileRowRulesets(row: WorkloadRow): RulesetLookup {
  const compiled = new Map<string, CompiledRuleset>();
  for (const [userId, content] of Object.entries(row.rules)) {
    const ruleset = decodeRulesetContent(content);
    if (ruleset === undefined) throw new Error(`row ${row.name}: the rules of ${userId} do not decode`);
    compiled.set(userId, compileUserRuleset(ruleset, userId));
  }
  const defaults = sharedDefaultRuleset();
  return (recipient) => compiled.get(recipient.user_id) ?? defaults;
}
