import { randomUUID } from 'node:crypto';
import type { ConformanceCase } from '../../../scripts/contract/conformance-case.js';
import type { NamedCase } from '../../support/conformance-case-files.js';
import { mismatches } from '../../support/conformance-match.js';
import { fill, type Bindings } from '../../support/conformance-template.js';
import type { ConformanceWorkers } from './conformance-workers.js';
import type { WireAdapterProcess } from './wire-adapter-process.js';

/**
 * One run of one conformance case through one client's wire adapter
 * (contract/schemas/conformance-case.schema.json): fresh user IDs, the
 * state before made, the request sent, its reply and the state after
 * checked. Answers what went wrong, each failure naming its step.
 */

type Publisher = 'trusted' | 'none';
type Step = NonNullable<ConformanceCase['before']>[number];

export interface CaseRunContext {
  readonly workers: ConformanceWorkers;
  /** The client's adapter running as that publisher. */
  adapter(publisher: Publisher): WireAdapterProcess;
  /** How long one request may take to be answered. */
  readonly timeoutMs: number;
}

/** The placeholders of one run: each user a Matrix user ID no other run uses. */
export function bindingsFor(users: readonly string[], gatewayUrl: string): Bindings {
  const token = randomUUID().replaceAll('-', '').slice(0, 10);
  return {
    ...Object.fromEntries(users.map((user) => [user, `@${user}-${token}:example.org`])),
    case: token,
    gateway: gatewayUrl,
  };
}

const shown = (value: unknown) => JSON.stringify(value);

async function check(
  context: CaseRunContext,
  where: string,
  step: { request: { op: string }; publisher?: Publisher; reply?: unknown; match?: 'exact' | 'subset' },
): Promise<string[]> {
  const label = `${where} (${step.request.op})`;
  const answer = await context.adapter(step.publisher ?? 'trusted').send(step.request, context.timeoutMs);
  if ('failure' in answer) return [`${label}: ${answer.failure}`];
  // Without a reply to match, a step of the state before must succeed.
  const [expected, mode] = step.reply === undefined ? [{ ok: true }, 'subset' as const] : [step.reply, step.match];
  const problems = mismatches(expected, answer.reply, mode ?? 'exact');
  return problems.length === 0 ? [] : [`${label}: ${problems.join('; ')}; the reply: ${shown(answer.reply)}`];
}

async function prepare(context: CaseRunContext, step: Step, index: number): Promise<string[]> {
  if ('stored_push_rules' in step) {
    const { user_id: userId, content_json: contentJson } = step.stored_push_rules;
    await context.workers.storePushRules(userId, contentJson);
    return [];
  }
  return check(context, `before[${index}]`, step);
}

/** Every way the client's answers differ from the case: empty when it passes. */
export async function runCase({ case: template }: NamedCase, context: CaseRunContext): Promise<string[]> {
  const run = fill(template, bindingsFor(template.users, context.workers.gatewayUrl)) as ConformanceCase;
  for (const [index, step] of (run.before ?? []).entries()) {
    const failures = await prepare(context, step, index);
    // The rest would run on a state the case does not describe.
    if (failures.length > 0) return failures;
  }
  const failures = await check(context, 'request', run);
  for (const [index, step] of (run.after ?? []).entries())
    failures.push(...(await check(context, `after[${index}]`, step)));
  return failures;
}
