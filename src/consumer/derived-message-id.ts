import { createHash } from 'node:crypto';

/** What names a `notify` published without a `messageId`, besides its body. */
export interface UnnamedMessage {
  /** The publisher's AMQP `timestamp`, as sent (kept on a redelivery, new on every publish). */
  readonly timestamp?: number | undefined;
  /** The publisher's AMQP `correlationId` (kept on a redelivery; the client makes a fresh one per publish). */
  readonly correlationId?: string | undefined;
  /** When the router took the message (its clock). */
  readonly receivedAt: number;
}

/**
 * The ID of a `notify` its publisher did not name (docs/rpc-contract.md).
 * It must stay the same when the broker redelivers the message (a router
 * that stopped after publishing some parts: the parts taken in before are
 * skipped by their IDs), and must differ for a later publish of the same
 * bytes (a badge reset sent again), which would otherwise be skipped as a
 * replay for as long as its record is kept. The body's hash alone cannot
 * tell the two apart; the properties a publisher sets anew on every
 * publish and the broker keeps on a redelivery can: the `timestamp` and
 * the `correlationId`. A message with neither is named by its body and the
 * window of the router's clock it was taken in (`windowMs`): a later
 * publish in another window is a new message, one in the same window is
 * taken for a redelivery, and a redelivery that crosses into the next
 * window is sent again (a duplicate, never a loss).
 */
export function derivedMessageId(body: Uint8Array, message: UnnamedMessage, windowMs: number): string {
  const named = message.timestamp !== undefined || message.correlationId !== undefined;
  const names = JSON.stringify([
    createHash('sha256').update(body).digest('base64url'),
    message.timestamp ?? null,
    message.correlationId ?? null,
    named ? null : Math.floor(message.receivedAt / windowMs),
  ]);
  return `sha256:${createHash('sha256').update(names).digest('base64url')}`;
}
