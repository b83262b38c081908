import type { ErrorKind, MatrixErrorBody } from '../errors/error-catalogue.js';
import { ERROR_KINDS, MESSAGES } from '../errors/error-catalogue.js';
import type { TransportFailure } from './rpc-errors.js';

/** What a caller sees when a transport failure stands in for the reply. */
const TRANSPORT_MESSAGES: Record<TransportFailure, string> = {
  timeout: 'The push rules service did not answer in time; try again.',
  'connection-lost': 'The connection to the push rules service was lost; try again.',
  unroutable: 'No push rules worker is taking requests; try again.',
  refused: 'The push rules service did not take the request; try again.',
  closed: 'The push rules client is closed.',
  'bad-reply': 'The push rules service sent a reply that is not JSON.',
};

/**
 * The one error `PushRulesClient` throws: a worker's Matrix error, a
 * transport failure as `Unavailable` (503) with its `reason`, or a body that
 * cannot be serialized as `BadJson` (400). A front answers `status` with
 * `{errcode, error: message}`.
 */
export class PushRulesError extends Error {
  readonly kind: ErrorKind;
  readonly errcode: string;
  readonly status: number;
  /** Set when no reply arrived: the write may or may not have been applied (retry it with the same `messageId`). */
  readonly reason: TransportFailure | undefined;

  constructor(body: MatrixErrorBody, reason?: TransportFailure) {
    super(body.error);
    this.name = 'PushRulesError';
    this.kind = body.kind;
    this.errcode = body.errcode;
    this.status = body.status;
    this.reason = reason;
  }

  static fromTransport(reason: TransportFailure): PushRulesError {
    const { errcode, status } = ERROR_KINDS.Unavailable;
    return new PushRulesError({ kind: 'Unavailable', errcode, status, error: TRANSPORT_MESSAGES[reason] }, reason);
  }

  /** A call whose body `JSON.stringify` refused: `BadJson` (400), nothing sent, no `reason`. */
  static unserializable(): PushRulesError {
    const { errcode, status } = ERROR_KINDS.BadJson;
    return new PushRulesError({ kind: 'BadJson', errcode, status, error: MESSAGES.unserializableRequest });
  }

  /** The standard Matrix error body. */
  toMatrixBody(): { readonly errcode: string; readonly error: string } {
    return { errcode: this.errcode, error: this.message };
  }
}
