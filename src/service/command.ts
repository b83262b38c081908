import type { PushAction } from '../push-rules/push-rule.js';
import type { RuleAddress } from '../push-rules/rule-address.js';
import type { SetPushRuleRequest } from '../push-rules/set-push-rule.js';
import type { RawPusherSetAction } from '../pushers/decide-pusher-set.js';
import type { DeviceSelector } from '../pushers/pusher-deletion.js';
import type { EvaluateRequest } from '../evaluation/evaluate-request.js';
import type { Result } from '../result/result.js';

/**
 * A request that passed the schema and every syntax check: what the worker
 * dispatches on. Names are camelCase; the wire's snake_case stays in the
 * schemas and in the stored data.
 */
export type Command =
  | { readonly op: 'get_pushrules'; readonly userId: string }
  | {
      readonly op: 'get_pushrule' | 'delete_pushrule' | 'get_pushrule_actions' | 'get_pushrule_enabled';
      readonly userId: string;
      readonly address: RuleAddress;
    }
  | { readonly op: 'set_pushrule'; readonly userId: string; readonly request: SetPushRuleRequest }
  | {
      readonly op: 'set_pushrule_actions';
      readonly userId: string;
      readonly address: RuleAddress;
      readonly actions: readonly PushAction[];
    }
  | {
      readonly op: 'set_pushrule_enabled';
      readonly userId: string;
      readonly address: RuleAddress;
      readonly enabled: boolean;
    }
  | { readonly op: 'get_pushers'; readonly userId: string }
  | {
      readonly op: 'set_pusher';
      readonly userId: string;
      readonly action: RawPusherSetAction;
      /** The front's word for the device of the access token (the envelope's `device_id`). */
      readonly deviceId?: string;
    }
  | {
      readonly op: 'delete_pushers';
      readonly userId: string;
      readonly devices: DeviceSelector;
      readonly includeEmail: boolean;
    }
  | { readonly op: 'delete_user_data'; readonly userId: string };

/**
 * A valid `evaluate` request, as the worker runs it: the body itself, in
 * wire names, which is what the evaluator reads (a fan-out of 20,000
 * recipients is not copied into other objects first).
 */
export interface EvaluateCommand {
  readonly op: 'evaluate';
  readonly request: EvaluateRequest;
}

/**
 * The batch form of `evaluate`: each entry of `events` checked on its own,
 * so that one bad event is answered with its own error and the others are
 * evaluated (docs/rpc-contract.md#many-events-in-one-message).
 */
export interface EvaluateBatchCommand {
  readonly op: 'evaluate_batch';
  readonly events: readonly Result<EvaluateRequest>[];
}
