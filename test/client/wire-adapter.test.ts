import { describe, expect, it } from 'vitest';
import { PushRulesClient, type RpcTransport } from '../../src/client/push-rules-client.js';
import type { RequestOptions } from '../../src/client/rpc-client-options.js';
import { RpcTransportError } from '../../src/client/rpc-errors.js';
import { replyThroughClient, WireRequestError } from '../../src/client/wire-adapter.js';
import type { Reply } from '../../src/contract/reply.js';
import { loadCases } from '../support/conformance-case-files.js';
import { fill } from '../support/conformance-template.js';

/**
 * The TypeScript client's wire adapter (`npm run --silent wire`): each
 * request of contract/cases/ goes out through the typed method as the
 * same body (its `message_id` as the AMQP messageId), and what the method
 * resolves or rejects with comes back as the reply envelope. Against real
 * workers: test/integration/conformance.test.ts.
 */
interface Sent {
  readonly body: Record<string, unknown>;
  readonly options: RequestOptions;
}

function recording(
  answer: (body: Record<string, unknown>) => Promise<Reply> = async () => Promise.resolve({ ok: true, body: {} }),
) {
  const sent: Sent[] = [];
  const transport: RpcTransport = {
    request: async (body, options) => {
      // The evaluate coalescer hands over bodies it has encoded already.
      const json = 'json' in body ? (JSON.parse((body as { json: string }).json) as Record<string, unknown>) : body;
      sent.push({ body: json as Record<string, unknown>, options });
      return answer(json as Record<string, unknown>);
    },
    publish: async () => Promise.reject(new Error('the adapter always asks for a reply')),
    close: async () => Promise.resolve(),
  };
  return { client: new PushRulesClient({ url: 'amqp://unused' }, transport), sent };
}

const BINDINGS = { alice: '@alice:example.org', bob: '@bob:example.org', sender: '@sender:example.org' };
const requestOf = (template: unknown) =>
  fill(template, { ...BINDINGS, case: 'run1', gateway: 'http://127.0.0.1:1/_matrix/push/v1/notify' }) as Record<
    string,
    unknown
  >;
const CASE_REQUESTS = loadCases().map(({ name, case: c }) => [name, requestOf(c.request)] as const);

describe('the wire adapter sends each case through the typed method', () => {
  it.each(CASE_REQUESTS.filter(([, request]) => request['op'] !== 'evaluate'))(
    '%s: the same body, message_id as the messageId',
    async (_name, request) => {
      const { client, sent } = recording();
      await replyThroughClient(client, request);
      const { message_id: messageId, ...body } = request;
      expect(sent.map((s) => s.body)).toEqual([body]);
      if (messageId !== undefined) expect(sent[0]?.options.messageId).toBe(messageId);
    },
  );

  it.each(CASE_REQUESTS.filter(([, request]) => request['op'] === 'evaluate' && request['events'] === undefined))(
    '%s: the event, room and recipients, asking for the compact reply',
    async (_name, request) => {
      const { client, sent } = recording();
      await replyThroughClient(client, request);
      const events = (sent[0]?.body['events'] as Record<string, unknown>[] | undefined) ?? [sent[0]?.body ?? {}];
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ event: request['event'], room: request['room'], compact: true, runs: true });
    },
  );
});

describe('the wire adapter answers with the reply envelope', () => {
  const GET = { op: 'get_pushrule_enabled', user_id: BINDINGS.alice, scope: 'global', kind: 'override', rule_id: 'x' };
  const NOT_FOUND = { kind: 'NotFound', errcode: 'M_NOT_FOUND', error: 'Push rule not found.', status: 404 } as const;

  it("of the method's result", async () => {
    const { client } = recording(async () => Promise.resolve({ ok: true, body: { enabled: true } }));
    expect(await replyThroughClient(client, GET)).toEqual({ ok: true, body: { enabled: true } });
  });

  it("of the method's PushRulesError: kind, errcode, message and status", async () => {
    const { client } = recording(async () => Promise.resolve({ ok: false, error: NOT_FOUND }));
    expect(await replyThroughClient(client, GET)).toEqual({ ok: false, error: NOT_FOUND });
  });

  it('of a transport failure, as the method rejects with it', async () => {
    const { client } = recording(async () => Promise.reject(new RpcTransportError('timeout', 'no reply')));
    expect(await replyThroughClient(client, GET)).toEqual({
      ok: false,
      error: {
        kind: 'Unavailable',
        errcode: 'M_UNKNOWN',
        error: 'The push rules service did not answer in time; try again.',
        status: 503,
      },
    });
  });

  it("of each event of the batch form, in order, from evaluateMany's settled answers", async () => {
    const entry = { event: {}, room: { member_count: 2 }, recipients: [{ user_id: BINDINGS.alice }] };
    const { client } = recording(async () =>
      Promise.resolve({
        ok: true,
        body: {
          results: [
            { ok: true, body: { notify_groups: [{ actions: ['notify'], runs: [0, 1] }], evaluated: 1 } },
            { ok: false, error: NOT_FOUND },
          ],
        },
      }),
    );
    expect(await replyThroughClient(client, { op: 'evaluate', events: [entry, entry] })).toEqual({
      ok: true,
      body: {
        results: [
          { ok: true, body: { notify: { [BINDINGS.alice]: ['notify'] }, evaluated: 1 } },
          { ok: false, error: NOT_FOUND },
        ],
      },
    });
  });
});

describe('the wire adapter refuses what no typed call expresses', () => {
  const USER = { user_id: BINDINGS.alice };

  it.each<[string, Record<string, unknown>, string]>([
    ['an op without a method', { op: 'drop_database', ...USER }, 'no typed method for op "drop_database"'],
    ['a user ID that is not a string', { op: 'get_pushers', user_id: 7 }, 'user_id must be a string'],
    ['two device selectors', { op: 'delete_pushers', ...USER, all: true, except_device_id: 'D' }, 'exactly one'],
    ['no device selector', { op: 'delete_pushers', ...USER }, 'exactly one'],
    ['all: false', { op: 'delete_pushers', ...USER, all: false }, 'all: false cannot be expressed'],
    [
      'enabled that is not a boolean',
      { op: 'set_pushrule_enabled', ...USER, ...{ scope: 'global', kind: 'override', rule_id: 'x' }, enabled: 'yes' },
      'enabled must be a boolean',
    ],
  ])('%s', async (_what, request, message) => {
    const { client, sent } = recording();
    const refused = replyThroughClient(client, request);
    await expect(refused).rejects.toBeInstanceOf(WireRequestError);
    await expect(refused).rejects.toThrow(message);
    expect(sent).toEqual([]);
  });
});
