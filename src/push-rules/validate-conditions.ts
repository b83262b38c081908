import { matrixError } from '../errors/error-catalogue.js';
import { isCanonicalInteger, isJsonObject, type JsonObject } from '../matrix/json.js';
import { fail, ok, type Result } from '../result/result.js';
import type { KnownConditionKind, PushCondition } from './push-rule.js';

type FieldCheck = (value: unknown) => boolean;

const isString: FieldCheck = (value) => typeof value === 'string';
/** The spec restricts these comparison values to canonical-JSON scalars. */
const isScalar: FieldCheck = (value) =>
  value === null || typeof value === 'string' || typeof value === 'boolean' || isCanonicalInteger(value);

const REQUIRED_FIELDS: Readonly<Record<KnownConditionKind, Readonly<Record<string, readonly [FieldCheck, string]>>>> = {
  event_match: { key: [isString, 'a string'], pattern: [isString, 'a string'] },
  event_property_is: { key: [isString, 'a string'], value: [isScalar, 'a string, integer, boolean or null'] },
  event_property_contains: { key: [isString, 'a string'], value: [isScalar, 'a string, integer, boolean or null'] },
  contains_display_name: {},
  room_member_count: { is: [isString, 'a string'] },
  sender_notification_permission: { key: [isString, 'a string'] },
};

function isKnownKind(kind: string): kind is KnownConditionKind {
  return Object.hasOwn(REQUIRED_FIELDS, kind);
}

/**
 * Known condition kinds must carry their fields with the spec's types;
 * unknown kinds are kept exactly as sent (the spec says they never match,
 * and a newer client may rely on them round-tripping).
 */
export function validateConditions(conditions: readonly unknown[]): Result<readonly PushCondition[]> {
  for (const [index, condition] of conditions.entries()) {
    const problem = conditionProblem(condition);
    if (problem !== undefined) return fail(matrixError('BadJson', `conditions[${index}] ${problem}.`));
  }
  return ok(conditions as readonly PushCondition[]);
}

function conditionProblem(condition: unknown): string | undefined {
  if (!isJsonObject(condition)) return 'must be an object';
  const kind = condition['kind'];
  if (typeof kind !== 'string') return 'needs a string kind';
  if (!isKnownKind(kind)) return undefined;
  return fieldProblem(kind, condition);
}

function fieldProblem(kind: KnownConditionKind, condition: JsonObject): string | undefined {
  for (const [field, [check, expected]] of Object.entries(REQUIRED_FIELDS[kind])) {
    if (!check(condition[field])) return `(${kind}) needs ${field} to be ${expected}`;
  }
  return undefined;
}
