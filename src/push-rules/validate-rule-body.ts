import { matrixError } from '../errors/error-catalogue.js';
import { fail, ok, type Result } from '../result/result.js';
import type { RuleBody, RuleKind } from './push-rule.js';
import { validateActions } from './validate-actions.js';
import { validateConditions } from './validate-conditions.js';

/** A rule body as the request schema admits it, before per-kind checks. */
export interface RawRuleBody {
  readonly actions: readonly unknown[];
  readonly conditions?: readonly unknown[] | undefined;
  readonly pattern?: string | undefined;
}

/**
 * The body a rule of each kind needs: `override`/`underride` carry
 * conditions, `content` a pattern, `room`/`sender` nothing but actions (their
 * rule ID is the room or user). Fields a kind does not use are dropped, like
 * any other unknown field of a request.
 */
export function validateRuleBody(kind: RuleKind, raw: RawRuleBody): Result<RuleBody> {
  const actions = validateActions(raw.actions);
  if (!actions.ok) return actions;
  switch (kind) {
    case 'override':
    case 'underride': {
      if (raw.conditions === undefined) return fail(matrixError('BadJson', `${kind} rules need conditions.`));
      const conditions = validateConditions(raw.conditions);
      if (!conditions.ok) return conditions;
      return ok({ actions: actions.value, conditions: conditions.value });
    }
    case 'content':
      if (raw.pattern === undefined) return fail(matrixError('BadJson', 'content rules need a pattern.'));
      return ok({ actions: actions.value, pattern: raw.pattern });
    case 'room':
    case 'sender':
      return ok({ actions: actions.value });
  }
}
