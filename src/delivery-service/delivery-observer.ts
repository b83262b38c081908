/**
 * What happened to a gateway request and its devices:
 * - delivered: the gateway took it (its devices, rejected ones aside);
 * - rejected: devices whose pushkey the gateway rejected (their pushers are removed);
 * - retried: the attempt failed in a way worth retrying;
 * - failed: a 4xx or a redirect, for good (pushers kept);
 * - refused: the gateway's address is one deliveries may not go to;
 * - given_up: still failing at the end of the give-up window;
 * - dropped: pushed out of a device's backlog by newer notifications (or a badge update by a newer one);
 * - expired: waited longer than the maximum age (`delivery.maxAgeMs`): not sent any more;
 * - pusher_removed: its pushers were removed before it could be sent.
 */
export type DeliveryOutcome =
  'delivered' | 'rejected' | 'retried' | 'failed' | 'refused' | 'given_up' | 'dropped' | 'expired' | 'pusher_removed';

/** Narrow hook for the delivery metrics; tests pass object literals. */
export interface DeliveryObserver {
  /** A request (and `devices` of its devices) ended an attempt this way. */
  settled(url: string, outcome: DeliveryOutcome, devices: number): void;
  /** The gateway answered (or failed to) after this long. */
  gatewayAnswered(url: string, seconds: number): void;
  /** A request was delivered this long after its `notify` was taken in. */
  deliveredAfter(seconds: number): void;
  /** A device's request waits because its gateway's breaker is open. */
  heldByBreaker(url: string): void;
}
