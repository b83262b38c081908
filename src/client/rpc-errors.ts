/**
 * - `timeout`: no reply within the deadline (the request may have been applied);
 * - `connection-lost`: the connection went before the reply (it may have been applied);
 * - `refused`: the broker did not take the request (a nack: say a quorum queue
 *   failing over to another node); it reached no worker;
 * - `unroutable`: no queue took it (no worker has declared it);
 * - `closed`: the client was closed; `bad-reply`: the reply is not an envelope.
 */
export type TransportFailure = 'timeout' | 'connection-lost' | 'refused' | 'unroutable' | 'closed' | 'bad-reply';

/** A request that got no reply; the worker may or may not have applied it. */
export class RpcTransportError extends Error {
  readonly reason: TransportFailure;

  constructor(reason: TransportFailure, message: string) {
    super(message);
    this.name = 'RpcTransportError';
    this.reason = reason;
  }
}

/**
 * A request body that cannot be sent as JSON (`JSON.stringify` refused it:
 * nested too deep for its stack, a cycle, a BigInt). Nothing was sent, and
 * only this call fails: it says nothing about the connection.
 */
export class RpcRequestError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'RpcRequestError';
  }
}
