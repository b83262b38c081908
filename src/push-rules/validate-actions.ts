import { matrixError } from '../errors/error-catalogue.js';
import { isJsonObject, type JsonValue } from '../matrix/json.js';
import { fail, ok, type Result } from '../result/result.js';
import type { PushAction } from './push-rule.js';

/**
 * Checks a client's action list. Only the two tweaks the spec gives a value
 * type are checked; everything else that is a string or an object is kept
 * as sent. Numbers, booleans, null and arrays are not actions in any spec
 * version, so they are refused rather than stored.
 */
export function validateActions(actions: readonly unknown[]): Result<readonly PushAction[]> {
  for (const [index, action] of actions.entries()) {
    const problem = actionProblem(action);
    if (problem !== undefined) return fail(matrixError('BadJson', `actions[${index}] ${problem}.`));
  }
  return ok(actions as readonly PushAction[]);
}

function actionProblem(action: unknown): string | undefined {
  if (typeof action === 'string') return undefined;
  if (!isJsonObject(action)) return 'must be a string or an object';
  if (!('set_tweak' in action)) return undefined;
  const tweak: JsonValue | undefined = action['set_tweak'];
  if (typeof tweak !== 'string') return 'has a set_tweak that is not a string';
  const value = action['value'];
  if (tweak === 'sound' && typeof value !== 'string') return 'is a sound tweak without a string value';
  if (tweak === 'highlight' && value !== undefined && typeof value !== 'boolean') {
    return 'is a highlight tweak whose value is not a boolean';
  }
  return undefined;
}
