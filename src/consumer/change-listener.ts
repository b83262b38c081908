/**
 * Where the change events of every worker are delivered to this one: the
 * push rules of `userId` changed. `subscriptionReset` when the
 * subscription ended (so events may have been missed), and again when a
 * new one starts.
 */
export interface ChangeListener {
  /** The push rules of `userId` changed; a listener without it is not subscribed to push-rule events (delivery's thread). */
  pushRulesChanged?(userId: string): void;
  /** The pushers of `userId` changed; a listener without it is not subscribed to pusher events. */
  pushersChanged?(userId: string): void;
  subscriptionReset(): void;
}
