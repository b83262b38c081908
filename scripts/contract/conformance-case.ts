// The format of a conformance case (contract/cases/<name>.json): the one
// definition of it. scripts/contract/json-schemas.ts publishes it as
// contract/schemas/conformance-case.schema.json; the conformance runner
// (test/integration/conformance.test.ts) checks every case against it and
// reads cases by its type.
import { Type, type Static } from '@sinclair/typebox';
import { ERROR_KINDS } from '../../src/errors/error-catalogue.js';

/** Placeholders every case may use besides its users (see `users`). */
export const RUN_PLACEHOLDERS = ['case', 'gateway'] as const;

const Matcher = Type.Object(
  { $match: Type.Literal('any') },
  {
    additionalProperties: false,
    description:
      'In an expected reply, in place of a value: `{"$match": "any"}` matches whatever value the reply has there (the key must be present). For what the contract does not fix, such as the wording of a schema validator’s message.',
  },
);

const Request = Type.Object(
  {
    op: Type.String(),
    message_id: Type.Optional(
      Type.String({
        description:
          "The write's idempotency key (AMQP messageId), not a body field: the adapter passes it to the typed method's message ID option.",
      }),
    ),
  },
  {
    description:
      'A request body as it goes on the wire, with its `op`, plus `message_id` when given. Templates: in every string and object key, `{{name}}` is replaced by the Matrix user ID of the case user `name` (see `users`), `{{case}}` by a token unique to this run of this case (for pushkeys and notify message IDs, which are not per user), `{{gateway}}` by the URL of the runner\'s push gateway (`http://127.0.0.1:<port>/_matrix/push/v1/notify`); a value `{"$repeat": "<text>", "times": n}` is replaced by the text repeated n times (long strings without long files).',
  },
);

const Publisher = Type.Union([Type.Literal('trusted'), Type.Literal('none')], {
  description:
    '`trusted` (the default): the adapter runs with PUBLISHER_USER_ID set to a trusted publisher of the workers. `none`: an adapter without it, whose requests carry no AMQP userId (Forbidden).',
});

const Match = Type.Union([Type.Literal('exact'), Type.Literal('subset')], {
  description:
    'How the reply is held to `reply` (after the templates are filled in). `exact` (the default): equal as JSON values (object keys in any order, arrays in order). `subset`: every key of an expected object is in the reply with a matching value, the reply may have more; arrays have the same length and match item by item. Numbers compare by value. `{"$match": "any"}` matches any value in both.',
});

/** Each error kind with its errcode and status, as error-catalogue.ts has them: a case cannot pair them otherwise. */
const ExpectedError = Type.Union(
  Object.entries(ERROR_KINDS).map(([kind, { errcode, status }]) =>
    Type.Object(
      {
        kind: Type.Literal(kind),
        errcode: Type.Literal(errcode),
        error: Type.Union([Type.String(), Matcher]),
        status: Type.Literal(status),
      },
      { additionalProperties: false },
    ),
  ),
);

const ExpectedReply = Type.Union(
  [
    Type.Object({ ok: Type.Literal(true), body: Type.Unknown() }, { additionalProperties: false }),
    Type.Object({ ok: Type.Literal(false), error: ExpectedError }, { additionalProperties: false }),
  ],
  {
    description:
      'The reply envelope expected: `{"ok": true, "body": …}` (the body as the typed method returns it: `evaluate` in its default form, `notify` as asked with a reply), or `{"ok": false, "error": {"kind", "errcode", "error", "status"}}`, the error text exact unless a matcher.',
  },
);

const StepFields = { request: Request, publisher: Type.Optional(Publisher), match: Type.Optional(Match) };

const RequestStep = Type.Object(
  { ...StepFields, reply: Type.Optional(ExpectedReply) },
  { additionalProperties: false },
);

const CheckStep = Type.Object({ ...StepFields, reply: ExpectedReply }, { additionalProperties: false });

const StoreStep = Type.Object(
  {
    stored_push_rules: Type.Object(
      {
        user_id: Type.String(),
        content_json: Type.String({
          description: "The text of the user's push-rules event content as the store holds it (possibly not JSON).",
        }),
      },
      { additionalProperties: false },
    ),
  },
  {
    additionalProperties: false,
    description:
      'State no request can make: the runner writes it into the store directly (a stored event that cannot be decoded).',
  },
);

export const ConformanceCaseSchema = Type.Object(
  {
    $schema: Type.Optional(Type.String()),
    description: Type.String({ minLength: 1, description: 'What the case shows, in a sentence.' }),
    users: Type.Array(Type.String({ pattern: '^[a-z][a-z0-9]*$', not: { enum: [...RUN_PLACEHOLDERS] } }), {
      uniqueItems: true,
      description:
        "The case's users by name: each run of the case gives each a fresh Matrix user ID (`{{name}}` in its templates), so that runs never share state.",
    }),
    before: Type.Optional(
      Type.Array(Type.Union([RequestStep, StoreStep]), {
        description:
          'The state before, made in order: requests (each must succeed, `{"ok": true}`, unless it gives its `reply`) and stored state.',
      }),
    ),
    request: Request,
    publisher: Type.Optional(Publisher),
    reply: ExpectedReply,
    match: Type.Optional(Match),
    after: Type.Optional(
      Type.Array(CheckStep, {
        description: 'The state after: requests sent in order once the reply came, each with the reply it must get.',
      }),
    ),
  },
  {
    additionalProperties: false,
    description:
      "One example of the RPC contract, run through every client's wire adapter against real workers (test/integration/conformance.test.ts). Its name is its file name without `.json`: `<op of request>.<what-it-shows>`. Each request is a call a homeserver makes through a client's typed method: the fields the method takes as arguments of their types, and what the homeserver forwards from its own caller (a rule, actions, a pusher action, an event) as it came, however wrong. The workers run with their defaults, except that they trust the adapters' publisher and let pushers name `{{gateway}}` over plain HTTP.",
  },
);

export type ConformanceCase = Static<typeof ConformanceCaseSchema>;
