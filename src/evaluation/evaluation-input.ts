import type { JsonObject } from '../matrix/json.js';

/**
 * What an `evaluate` request carries (docs/rpc-contract.md#evaluate), in wire
 * names. The request schema checks these shapes before the evaluator sees
 * them; the evaluator relies on them and on nothing else.
 */

/** The event in client format: these fields are required, any other key may be matched. */
export interface EvaluationEvent extends JsonObject {
  readonly type: string;
  readonly room_id: string;
  readonly sender: string;
  readonly content: JsonObject;
  readonly state_key?: string;
}

/** Room facts resolved by the homeserver. */
export interface EvaluationRoom {
  /** What `room_member_count` compares with. */
  readonly member_count: number;
  /** Absent or null: no `sender_notification_permission` condition matches. */
  readonly sender_power_level?: number | null;
  /** The `notifications` object of the room's power levels. */
  readonly notification_power_levels?: Readonly<Record<string, number>>;
}

export interface EvaluationRecipient {
  readonly user_id: string;
  /** For `contains_display_name`; absent or empty never matches. */
  readonly display_name?: string;
}
