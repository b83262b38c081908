/**
 * The queues' default names, as both ends use them unless configured
 * otherwise: the workers' defaults (config/default.json, which a unit test
 * holds to these) and the client's.
 */
export const DEFAULT_QUEUES = {
  /** Every push-rule and pusher op (`amqp.queue`, RPC_QUEUE). */
  request: 'matrix.push.rpc',
  /** The read-only ops alone (`amqp.readQueue`, RPC_READ_QUEUE). */
  read: 'matrix.push.read',
  /** `evaluate` (`evaluate.queue`, EVALUATE_QUEUE). */
  evaluate: 'matrix.push.evaluate',
  /** `notify` messages, for push delivery (`delivery.queue`, DELIVERY_QUEUE). */
  deliver: 'matrix.push.deliver',
} as const;
