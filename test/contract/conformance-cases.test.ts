import { describe, expect, it } from 'vitest';
import { REQUEST_OPS } from '../../scripts/contract/json-schemas.js';
import { ERROR_KINDS, type ErrorKind } from '../../src/errors/error-catalogue.js';
import { caseNames, caseProblems, loadCases, readCase } from '../support/conformance-case-files.js';
import { containsMatcher } from '../support/conformance-match.js';
import { fill } from '../support/conformance-template.js';
import { evaluateEntryProblems, replyProblems, requestProblems } from '../support/contract-validator.js';

/**
 * contract/cases/, the contract's examples (docs/rpc-contract.md#examples):
 * each is well formed, and together they cover every op and every error
 * kind a call of a typed method can meet. Whether the workers and each
 * client answer them as written is test/integration/conformance.test.ts.
 */
const CASES = loadCases();

/** Error kinds no typed call can meet on a healthy pool, and why: the suite's other tests have them. */
const NOT_REACHABLE_BY_A_TYPED_CALL: Partial<Record<ErrorKind, string>> = {
  Unrecognized: 'an unknown op or a newer wire version: no typed method sends either (bad-input, wire-version tests)',
  Internal: 'a bug in the worker (failure-reply tests)',
  Unavailable: 'a store or broker that fails or is too slow (fault tests)',
};

/** Placeholders bound to something of the right shape, for checking what a case expects. */
function filled(value: unknown, users: readonly string[]): unknown {
  return fill(value, {
    ...Object.fromEntries(users.map((user) => [user, `@${user}:example.org`])),
    case: 'run1',
    gateway: 'http://127.0.0.1:1/_matrix/push/v1/notify',
  });
}

/** Every step of a case that has a request and an expected reply. */
function checkedSteps({ case: c }: (typeof CASES)[number]) {
  return [
    ...(c.before ?? []).flatMap((step) => ('request' in step && step.reply !== undefined ? [step] : [])),
    c,
    ...(c.after ?? []),
  ].map((step) => ({
    request: filled(step.request, c.users) as { op: string; events?: unknown },
    reply: filled(step.reply, c.users),
    // A subset, or a reply with a matcher, is no whole reply: only the whole can be held to the schemas.
    whole: (step.match ?? 'exact') === 'exact' && !containsMatcher(step.reply),
  }));
}

/** What the schema refuses of a request that a case expects served: the batch form's entries each on their own. */
function servedThoughRefused(request: { op: string; events?: unknown }, reply: unknown): string | undefined {
  const { ok, body } = reply as { ok: boolean; body?: { results?: { ok: boolean }[] } };
  if (!ok) return undefined;
  if (!Array.isArray(request.events)) return requestProblems(request);
  return (
    request.events
      .flatMap((entry: unknown, i) =>
        body?.results?.[i]?.ok === true && evaluateEntryProblems(entry) !== undefined ? [`events.${i}`] : [],
      )
      .join(', ') || undefined
  );
}

describe('contract/cases/', () => {
  it.each(caseNames())('%s is well formed', (name) => {
    expect(caseProblems(name, readCase(name))).toEqual([]);
  });

  it('has a case for every op, each named after it', () => {
    const ops = new Set(CASES.map(({ case: c }) => c.request.op));
    expect(REQUEST_OPS.filter((op) => !ops.has(op))).toEqual([]);
  });

  it('expects every error kind a typed call can meet', () => {
    const expected = new Set(
      CASES.flatMap((named) =>
        checkedSteps(named).flatMap(({ reply }) => {
          const { ok, error, body } = reply as { ok: boolean; error?: { kind: string }; body?: { results?: unknown } };
          const results = (Array.isArray(body?.results) ? body.results : []) as { error?: { kind: string } }[];
          return [...(ok ? [] : [error?.kind]), ...results.map((result) => result.error?.kind)];
        }),
      ),
    );
    const missing = Object.keys(ERROR_KINDS).filter((kind) => !expected.has(kind));
    expect(missing).toEqual(Object.keys(NOT_REACHABLE_BY_A_TYPED_CALL));
  });

  it('expects only replies contract/schemas/ allows, and an error for whatever request it refuses', () => {
    const problems = CASES.flatMap((named) =>
      checkedSteps(named).flatMap(({ request, reply, whole }) => {
        const problem = whole ? replyProblems(request.op, reply) : undefined;
        const refused = servedThoughRefused(request, reply);
        return [
          ...(problem === undefined ? [] : [`${named.name}: ${request.op} expects ${problem}`]),
          ...(refused === undefined
            ? []
            : [`${named.name}: ${request.op} expects a success for what the schema refuses (${refused})`]),
        ];
      }),
    );
    expect(problems).toEqual([]);
  });
});

describe('the checks of a case', () => {
  const valid = readCase('get_pushers.none-for-a-new-user') as Record<string, unknown>;

  it.each<[string, string, unknown, RegExp]>([
    ['a name without its op', 'none-for-a-new-user', valid, /not <op>\.<what-it-shows>/],
    ['a name of another op', 'set_pusher.none-for-a-new-user', valid, /the request's op is get_pushers/],
    [
      'a placeholder bound to nothing',
      'get_pushers.none-for-a-new-user',
      { ...valid, request: { op: 'get_pushers', user_id: '{{bob}}' } },
      /\{\{bob\}\} is bound to nothing/,
    ],
    [
      'an error kind with another errcode',
      'get_pushers.none-for-a-new-user',
      { ...valid, reply: { ok: false, error: { kind: 'NotFound', errcode: 'M_UNKNOWN', error: 'x', status: 404 } } },
      /errcode/,
    ],
    ['a field the format has not', 'get_pushers.none-for-a-new-user', { ...valid, expect: {} }, /additional/],
  ])('find %s', (_what, name, json, problem) => {
    expect(caseProblems(name, json).join('\n')).toMatch(problem);
  });
});
