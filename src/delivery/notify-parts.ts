import type { NotifyRequestBody } from '../contract/ops.js';
import { planRecipient } from './notification-plan.js';
import { partitionOf } from './partitions.js';

/** The recipients of one partition, as a `notify` of their own. */
export interface NotifyPart {
  readonly partition: number;
  readonly request: NotifyRequestBody;
}

/**
 * Splits a `notify` by the partitions of its recipients (docs/delivery.md):
 * one part per partition that has a pushed recipient, each with the same
 * notification, in partition order; recipients pushed nowhere (their
 * actions hold no `notify`) are left out, as nothing is sent to them.
 */
export function splitNotify(request: NotifyRequestBody, partitions: number): readonly NotifyPart[] {
  const byPartition = new Map<number, NotifyRequestBody['recipients'][number][]>();
  for (const recipient of request.recipients) {
    if (!planRecipient(request.notification, recipient).pushed) continue;
    const partition = partitionOf(recipient.user_id, partitions);
    const list = byPartition.get(partition);
    if (list === undefined) byPartition.set(partition, [recipient]);
    else list.push(recipient);
  }
  return [...byPartition]
    .sort(([a], [b]) => a - b)
    .map(([partition, recipients]) => ({
      partition,
      request: { op: 'notify', notification: request.notification, recipients },
    }));
}
