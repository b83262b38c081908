/**
 * The one place where error kinds, their Matrix errcodes, HTTP statuses and
 * the fixed message texts live. Kinds and codes are the RPC contract's table;
 * messages are those of docs/push-rules.md#error-messages, verbatim (no
 * `M_...:` prefix).
 */

export const ERROR_KINDS = {
  NotFound: { errcode: 'M_NOT_FOUND', status: 404 },
  InvalidParam: { errcode: 'M_INVALID_PARAM', status: 400 },
  MissingParam: { errcode: 'M_MISSING_PARAM', status: 400 },
  BadJson: { errcode: 'M_BAD_JSON', status: 400 },
  Unrecognized: { errcode: 'M_UNRECOGNIZED', status: 400 },
  Forbidden: { errcode: 'M_FORBIDDEN', status: 403 },
  TooLarge: { errcode: 'M_TOO_LARGE', status: 413 },
  /** The store failed or holds what cannot be read: a storage problem, not a bug. */
  Database: { errcode: 'M_UNKNOWN', status: 500 },
  /** A bug: something failed that nothing expected (logged with its cause). */
  Internal: { errcode: 'M_UNKNOWN', status: 500 },
  Unavailable: { errcode: 'M_UNKNOWN', status: 503 },
} as const satisfies Record<string, { errcode: `M_${string}`; status: number }>;

export type ErrorKind = keyof typeof ERROR_KINDS;

/** Fixed messages. The first group is the table of docs/push-rules.md#error-messages. */
export const MESSAGES = {
  scopeNotGlobal: "Scopes other than 'global' are not supported.",
  eventNotFound: 'PushRules event not found.',
  ruleNotFound: 'Push rule not found.',
  ruleIdReserved: 'Rule IDs starting with a dot are reserved for server-default rules.',
  ruleIdInvalidCharacters: 'Rule ID containing invalid characters.',
  placementRelativeToDefault: "Can't place a push rule relatively to a server-default rule.",
  placementRuleNotFound: 'The before or after rule could not be found.',
  beforeAboveAfter: 'The before rule has a higher priority than the after rule.',
  invalidData: 'Invalid data.',
  deleteServerDefault: 'Cannot delete a server-default pushrule.',

  // Our own wording, where that table has no text.
  undecodableEvent: 'The stored push rules event could not be decoded.',
  storeUnavailable: 'The push rules store is unavailable; try again.',
  deadlinePassed: "The push rules store did not answer before the request's deadline; try again.",
  tooManyConflicts: "Too many concurrent changes to this user's push rules; try again.",
  storageFailure: 'The push rules store failed.',
  internalError: 'Internal error.',
  evaluationInterrupted: 'The evaluation was interrupted before it finished; try again.',
  untrustedPublisher: 'The publisher of this request is not trusted.',
  homeserverOpWithoutTrustedPublishers:
    'delete_pushers and delete_user_data are homeserver ops: the worker serves them only to trusted publishers, and amqp.trustedPublishers (TRUSTED_PUBLISHERS) is empty.',
  evaluateOnItsQueue:
    'evaluate is served on its own queue (evaluate.queue, matrix.push.evaluate by default), not on the request queue.',
  notifyWithoutTrustedPublishers:
    'notify is a homeserver op: the worker takes it only from trusted publishers, and amqp.trustedPublishers (TRUSTED_PUBLISHERS) is empty.',
  unserializableRequest:
    'The request cannot be serialized as JSON: it nests too deeply or holds values JSON cannot represent.',
} as const;

/** Messages for the configured limits; they name the limit so a caller can stay under it. */
export const LIMIT_MESSAGES = {
  requestTooLarge: (max: number) => `Request body is larger than ${max} bytes.`,
  jsonTooDeep: (max: number) => `Request body nests arrays and objects deeper than ${max} levels.`,
  stringTooLong: (path: string, max: number) => `${path} is longer than ${max} bytes.`,
  tooManyActions: (max: number) => `Too many actions: a rule may have at most ${max}.`,
  tooManyConditions: (max: number) => `Too many conditions: a rule may have at most ${max}.`,
  tooManyRules: (max: number) => `Too many push rules: a user may have at most ${max} of their own.`,
  rulesetTooLarge: (max: number) => `The push rules would be larger than ${max} bytes.`,
  tooManyPushers: (max: number) => `Too many pushers: a user may have at most ${max}.`,
  tooManyRecipients: (max: number) => `Too many recipients: an evaluate request may name at most ${max}.`,
  eventTooLarge: (max: number) => `The event is larger than ${max} bytes.`,
  tooManyEvents: (max: number) => `Too many events: an evaluate request may carry at most ${max}.`,
  tooManyBatchRecipients: (max: number) =>
    `Too many recipients: an evaluate request may name at most ${max} over all its events.`,
  replyTooLarge: (max: number) =>
    `The reply would be larger than ${max} bytes: ask for the compact form (runs), or name fewer recipients or events per request.`,
  tooManyNotifyRecipients: (max: number) => `Too many recipients: a notify message may name at most ${max}.`,
} as const;

/** Messages that point at what a request sent, so that a caller can find it. */
export const REQUEST_MESSAGES = {
  forbiddenKey: (path: string) =>
    `Key not accepted: ${path} (__proto__, constructor and prototype are refused anywhere in a request).`,
  writeOnReadQueue: (op: string) => `${op} changes data: send it to the request queue, not the read queue.`,
} as const;

/** A domain error as it travels on the wire (the contract's `error` object). */
export interface MatrixErrorBody {
  readonly kind: ErrorKind;
  readonly errcode: string;
  readonly error: string;
  readonly status: number;
}

export class MatrixError extends Error {
  readonly kind: ErrorKind;
  readonly errcode: string;
  readonly status: number;

  constructor(kind: ErrorKind, message: string) {
    super(message);
    this.name = 'MatrixError';
    this.kind = kind;
    this.errcode = ERROR_KINDS[kind].errcode;
    this.status = ERROR_KINDS[kind].status;
  }

  toBody(): MatrixErrorBody {
    return { kind: this.kind, errcode: this.errcode, error: this.message, status: this.status };
  }
}

export function matrixError(kind: ErrorKind, message: string): MatrixError {
  return new MatrixError(kind, message);
}
