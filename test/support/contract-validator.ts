import { readdirSync, readFileSync } from 'node:fs';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';

/**
 * The JSON Schemas of contract/schemas/, as committed, compiled with Ajv
 * for JSON Schema 2020-12: what a caller in another language validates
 * with. Each check answers the schema's complaints, or undefined when the
 * value fits.
 */
const SCHEMAS = new URL('../../contract/schemas/', import.meta.url);

const read = (path: string): object => JSON.parse(readFileSync(new URL(path, SCHEMAS), 'utf8')) as object;

// strictRequired off: a `oneOf` of `required` names properties its parent defines (a lint of Ajv's, not of the dialect).
const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: false, allowUnionTypes: true });
ajv.addSchema(read('request.schema.json'), 'request');
const request = ajv.compile({ $ref: 'request' });
const evaluateEvent = ajv.compile({ $ref: 'request#/$defs/evaluate_event' });
const reply = ajv.compile(read('reply.schema.json'));
const changeEvent = ajv.compile(read('change-event.schema.json'));
const bodies = new Map<string, ValidateFunction>(
  readdirSync(new URL('ops/', SCHEMAS)).map((file) => [
    file.replace('.reply.schema.json', ''),
    ajv.compile(read(`ops/${file}`)),
  ]),
);

const words = (errors: readonly ErrorObject[] | null | undefined): string =>
  (errors ?? [])
    .map((e) => `${e.instancePath === '' ? '(body)' : e.instancePath} ${e.message ?? 'is invalid'}`)
    .join('; ');

function check(validate: ValidateFunction, value: unknown): string | undefined {
  return validate(value) ? undefined : words(validate.errors);
}

/** The ops with a success-body schema of their own (contract/schemas/ops/). */
export const OPS_WITH_REPLY_SCHEMAS: readonly string[] = [...bodies.keys()];

/** A request body against request.schema.json. */
export function requestProblems(body: unknown): string | undefined {
  return check(request, body);
}

/** One entry of evaluate's batch form (`events`) against its definition: a bad entry fails alone. */
export function evaluateEntryProblems(entry: unknown): string | undefined {
  return check(evaluateEvent, entry);
}

/** A reply envelope against reply.schema.json, and a success's body against `op`'s own schema. */
export function replyProblems(op: string, value: unknown): string | undefined {
  const envelope = check(reply, value);
  if (envelope !== undefined) return `envelope: ${envelope}`;
  const { ok, body: content } = value as { ok: boolean; body?: unknown };
  if (!ok) return undefined;
  const body = bodies.get(op);
  return body === undefined
    ? `a success for op ${JSON.stringify(op)}, which has no reply schema`
    : check(body, content);
}

/** A change event against change-event.schema.json. */
export function changeEventProblems(value: unknown): string | undefined {
  return check(changeEvent, value);
}
