import { batchDevices, type DeliveryPusher, type DeviceBatch } from './device-batches.js';
import { gatewayBodyEncoder, type GatewayBodyEncoder } from './gateway-payload.js';
import { planRecipient, type NotifyNotification, type NotifyRecipient } from './notification-plan.js';
import { plannedBody, type PlannedBody } from './request-body.js';

/** One POST to a push gateway: where (`batch.url`), for which pushers, and the body. */
export interface GatewayRequest {
  /** The pushers the request names: a rejected pushkey is looked up here. */
  readonly batch: DeviceBatch;
  /** Encoded when sent (`bodyText`): what it is built from is all a waiting request holds. */
  readonly body: PlannedBody;
}

export interface RecipientRequests {
  /** Empty when the recipient is not pushed or has no enabled HTTP pusher. */
  readonly requests: readonly GatewayRequest[];
  /**
   * Enabled e-mail pushers that a full homeserver would have mailed for this
   * notification: none for a recipient not pushed or for a badge update.
   */
  readonly emailPushers: readonly DeliveryPusher[];
}

/**
 * Everything one recipient of one `notify` message is sent, given their
 * pushers as the store resolved them. Pushers of another user are ignored:
 * the body carries this recipient's counts.
 */
export function planRecipientRequests(
  notification: NotifyNotification,
  recipient: NotifyRecipient,
  pushers: readonly DeliveryPusher[],
  // One per notification when its recipients are planned together: the shared fields encoded once.
  encode: GatewayBodyEncoder = gatewayBodyEncoder(notification),
): RecipientRequests {
  const plan = planRecipient(notification, recipient);
  if (!plan.pushed) return { requests: [], emailPushers: [] };
  const own = pushers.filter((pusher) => pusher.user_id === recipient.user_id);
  const { batches, emailPushers } = batchDevices(own);
  return {
    requests: batches.map((batch) => ({ batch, body: plannedBody(encode, recipient, plan, batch) })),
    emailPushers: plan.countsOnly ? [] : emailPushers,
  };
}
