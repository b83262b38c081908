import type { NotifyRequestBody } from '../contract/ops.js';
import type { DeliveryPusher } from './device-batches.js';
import { gatewayBodyEncoder } from './gateway-payload.js';
import { planRecipient } from './notification-plan.js';
import { queueNames } from './queue-names.js';
import { planRecipientRequests } from './recipient-requests.js';
import type { RequestBody } from './request-body.js';

/** One gateway request of a `notify` message, ready to be stored and sent (the store's `PendingDelivery`). */
export interface PlannedDelivery {
  readonly id: string;
  readonly partition: number;
  readonly key: string;
  readonly seq: number;
  readonly userId: string;
  readonly url: string;
  /** What the body is built from, not its text: encoded when sent or stored. */
  readonly body: RequestBody;
  readonly devices: readonly { readonly appId: string; readonly pushkey: string }[];
  readonly acceptedAt: number;
  readonly countsOnly?: boolean;
}

export interface IntakePlan {
  readonly deliveries: readonly PlannedDelivery[];
  /** Recipients with at least one device to push (the reply's `recipients`). */
  readonly recipients: number;
  /** Devices scheduled (the reply's `devices`). */
  readonly devices: number;
  /** Enabled e-mail pushers of pushed recipients: this service sends no mail (counted, docs/delivery.md). */
  readonly emailPushers: number;
}

/** How the intake names and orders what it plans. */
export interface IntakeStamp {
  /** The `notify` message's ID (its `messageId`, or one made up): request IDs derive from it. */
  readonly notifyId: string;
  /** The partition the message's recipients belong to (the router split the `notify` by partition). */
  readonly partition: number;
  /** Intake order of the message; every request of one message has it (no two share a device queue). */
  readonly seq: number;
  /** When the `notify` was published (not taken in): the requests' maximum age counts from it. */
  readonly acceptedAt: number;
}

/** The user IDs whose pushers the plan needs: recipients who are pushed at all. */
export function pushedUserIds(request: NotifyRequestBody): readonly string[] {
  return request.recipients
    .filter((recipient) => planRecipient(request.notification, recipient).pushed)
    .map((recipient) => recipient.user_id);
}

/**
 * Every gateway request of one `notify` message, from its recipients and
 * their pushers. Request IDs are `<notifyId>/<device queue tag>`, and
 * `<notifyId>/<device queue tag>.<n>` for the n-th further request of one
 * device queue (the same pushkey under two app IDs goes in two requests:
 * device-batches.ts). So the same message planned again (redelivered after
 * a crash) gives the same IDs, which the store, the journal and the
 * scheduler take only once, and every planned request has an ID of its
 * own: two sharing one would be taken as one, and the second never sent.
 */
export function planIntake(
  request: NotifyRequestBody,
  pushersOf: (userId: string) => readonly DeliveryPusher[],
  stamp: IntakeStamp,
): IntakePlan {
  const deliveries: PlannedDelivery[] = [];
  let recipients = 0;
  let devices = 0;
  let emailPushers = 0;
  const encode = gatewayBodyEncoder(request.notification);
  // One string for all the message's IDs: each is this and its device queue's tag.
  const idPrefix = `${stamp.notifyId}/`;
  for (const recipient of request.recipients) {
    const planned = planRecipientRequests(request.notification, recipient, pushersOf(recipient.user_id), encode);
    emailPushers += planned.emailPushers.length;
    if (planned.requests.length === 0) continue;
    recipients += 1;
    const perKey = new Map<string, number>();
    for (const { batch, body } of planned.requests) {
      devices += batch.pushers.length;
      const { key, tag, devices: named } = queueNames(batch);
      const index = perKey.get(key) ?? 0;
      perKey.set(key, index + 1);
      // The first keeps the plain form: IDs planned before the index existed stay the same.
      const id = `${idPrefix}${tag}${index === 0 ? '' : `.${String(index)}`}`;
      deliveries.push({
        id,
        partition: stamp.partition,
        key,
        seq: stamp.seq,
        // The batch's, from its pushers: the same string for every notify while the pusher cache holds them.
        userId: batch.userId,
        url: batch.url,
        body,
        devices: named,
        acceptedAt: stamp.acceptedAt,
        ...(request.notification.event_id === undefined ? { countsOnly: true } : {}),
      });
    }
  }
  assertUniqueIds(deliveries);
  return { deliveries, recipients, devices, emailPushers };
}

/** The `notifyId` a planned request's ID was made from: the tag after the last `/` has none (a notify ID may). */
export function notifyIdOf(requestId: string): string {
  return requestId.slice(0, requestId.lastIndexOf('/'));
}

/** A bug, not bad input: two requests under one ID would be stored, journalled and sent as one. */
function assertUniqueIds(deliveries: readonly PlannedDelivery[]): void {
  const seen = new Set<string>();
  for (const delivery of deliveries) {
    if (seen.has(delivery.id))
      throw new Error(`internal error: two planned gateway requests share the ID ${delivery.id}`);
    seen.add(delivery.id);
  }
}
