import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { fail, ok, type Result } from '../result/result.js';

/** Only the `global` scope exists for writes (docs/push-rules.md#the-scope). */
export function checkScope(scope: string): Result<void> {
  return scope === 'global' ? ok(undefined) : fail(matrixError('InvalidParam', MESSAGES.scopeNotGlobal));
}
