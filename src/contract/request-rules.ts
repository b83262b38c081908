import { DNS_NAME, IPV6_LITERAL, PORT } from '../matrix/server-name.js';
import { LOCALPART, MAX_USER_ID_BYTES } from '../matrix/user-id.js';
import { REQUEST_SCHEMAS } from './request-schemas.js';

/**
 * What the request schemas cannot say and the parsers check after them in
 * their own words (parse-request.ts, evaluate-request.ts,
 * notify-request.ts): the user ID grammar, which recipient form, the
 * `delete_pushers` selectors, the batch form's envelope. Written here once
 * as JSON Schema, merged into contract/schemas/request.schema.json by
 * scripts/generate-contract.ts, and held to the parsers by
 * test/contract/contract-schemas.test.ts (what these refuse, a worker
 * refuses). The workers do not validate with them: their messages are the
 * parsers'.
 */

/** `regex.source` without its anchors. */
const inner = (regex: RegExp): string => regex.source.replace(/^\^/, '').replace(/\$$/, '');

/** A Matrix user ID as `isValidUserId` takes it (historical localparts too), as a JSON Schema pattern. */
export const USER_ID_PATTERN = `^@${inner(LOCALPART)}:(?:${inner(IPV6_LITERAL)}|${inner(DNS_NAME)})(?::${inner(PORT)})?$`;

const UserId = {
  pattern: USER_ID_PATTERN,
  // All of it ASCII by the pattern: characters are bytes.
  maxLength: MAX_USER_ID_BYTES,
  description: 'A Matrix user ID (historical localparts accepted), at most 255 bytes.',
};

const RecipientIds = { properties: { recipients: { items: { properties: { user_id: UserId } } } } };

const OneRecipientForm = {
  oneOf: [{ required: ['recipients'] }, { required: ['recipients_by_server'] }],
  description:
    'Exactly one of recipients and recipients_by_server; no user twice; at most evaluate.maxRecipients recipients; the event at most evaluate.maxEventBytes bytes as compact JSON (docs/configuration.md has their defaults).',
};

const UserOps = Object.fromEntries(Object.keys(REQUEST_SCHEMAS).map((op) => [op, { properties: { user_id: UserId } }]));

/** Each rule by the name of the definition it joins in request.schema.json's `$defs`. */
export const REQUEST_RULES: Readonly<Record<string, object>> = {
  ...UserOps,
  delete_pushers: {
    properties: { user_id: UserId, all: { const: true } },
    oneOf: [{ required: ['device_ids'] }, { required: ['except_device_id'] }, { required: ['all'] }],
    description: 'Exactly one selector: device_ids, except_device_id or all (only as true).',
  },
  evaluate_single: { ...OneRecipientForm, ...RecipientIds, not: { required: ['events'] } },
  evaluate_event: { ...OneRecipientForm, ...RecipientIds },
  evaluate_batch: {
    not: { anyOf: ['event', 'room', 'recipients', 'recipients_by_server'].map((key) => ({ required: [key] })) },
    description:
      'The batch form: 1 to evaluate.maxBatchEvents entries, nothing of the single form beside them; each entry is checked and answered on its own.',
  },
  notify: RecipientIds,
};
