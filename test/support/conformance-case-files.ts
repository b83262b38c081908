import { readdirSync, readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { RUN_PLACEHOLDERS, type ConformanceCase } from '../../scripts/contract/conformance-case.js';
import { placeholdersOf } from './conformance-template.js';

/**
 * The conformance cases of contract/cases/, each checked against the
 * committed contract/schemas/conformance-case.schema.json (as a runner in
 * another language would check it) and against what the schema cannot
 * say: its name (`<op>.<what-it-shows>`, the op its request's) and its
 * placeholders (each one it binds).
 */
const CASES = new URL('../../contract/cases/', import.meta.url);
const SCHEMA = new URL('../../contract/schemas/conformance-case.schema.json', import.meta.url);

const validate = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true }).compile<ConformanceCase>(
  JSON.parse(readFileSync(SCHEMA, 'utf8')) as object,
);

const NAME = /^([a-z_]+)\.([a-z0-9]+(?:-[a-z0-9]+)*)$/;

export interface NamedCase {
  /** The file name without `.json`: what the docs cite and the runner reports. */
  readonly name: string;
  readonly case: ConformanceCase;
}

/** What is wrong with the case `name` holding `json`: empty when nothing. */
export function caseProblems(name: string, json: unknown): string[] {
  if (!validate(json))
    return (validate.errors ?? []).map(
      (e) => `${e.instancePath === '' ? '(case)' : e.instancePath} ${e.message ?? ''}`,
    );
  const problems: string[] = [];
  const op = NAME.exec(name)?.[1];
  if (op === undefined) problems.push(`the name is not <op>.<what-it-shows> in lower case and hyphens`);
  else if (op !== json.request.op) problems.push(`the name starts with ${op}, the request's op is ${json.request.op}`);
  const bound = new Set<string>([...json.users, ...RUN_PLACEHOLDERS]);
  for (const used of placeholdersOf(json)) if (!bound.has(used)) problems.push(`{{${used}}} is bound to nothing`);
  return problems;
}

/** The names of the files of contract/cases/, sorted. */
export function caseNames(): string[] {
  return readdirSync(CASES)
    .filter((file) => file.endsWith('.json'))
    .map((file) => file.slice(0, -'.json'.length))
    .sort();
}

export function readCase(name: string): unknown {
  return JSON.parse(readFileSync(new URL(`${name}.json`, CASES), 'utf8')) as unknown;
}

/** Every case, checked; throws naming every problem of every case. */
export function loadCases(): NamedCase[] {
  const problems: string[] = [];
  const cases = caseNames().map((name) => {
    const json = readCase(name);
    problems.push(...caseProblems(name, json).map((problem) => `${name}: ${problem}`));
    return { name, case: json as ConformanceCase };
  });
  if (problems.length > 0) throw new Error(`contract/cases/ has problems:\n${problems.join('\n')}`);
  return cases;
}
