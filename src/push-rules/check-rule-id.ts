import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { isValidRoomId } from '../matrix/room-id.js';
import { isValidUserId } from '../matrix/user-id.js';
import { fail, ok, type Result } from '../result/result.js';
import { isServerDefaultRuleId, type RuleKind } from './push-rule.js';

/**
 * The ID checks of rule creation, in order: reserved dot prefix, then
 * characters that cannot appear in a path segment (`/`, `\`), then, for
 * `room` and `sender` rules, the ID must be the room or user it applies to.
 * The last is an "other insertion failure" (`Invalid data.`):
 * docs/push-rules.md#rule-ids.
 */
export function checkNewRuleId(kind: RuleKind, ruleId: string): Result<void> {
  if (isServerDefaultRuleId(ruleId)) return fail(matrixError('InvalidParam', MESSAGES.ruleIdReserved));
  if (ruleId.includes('/') || ruleId.includes('\\')) {
    return fail(matrixError('InvalidParam', MESSAGES.ruleIdInvalidCharacters));
  }
  if (kind === 'room' && !isValidRoomId(ruleId)) return fail(matrixError('InvalidParam', MESSAGES.invalidData));
  if (kind === 'sender' && !isValidUserId(ruleId)) return fail(matrixError('InvalidParam', MESSAGES.invalidData));
  return ok(undefined);
}
