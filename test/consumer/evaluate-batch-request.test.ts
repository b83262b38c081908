import { describe, expect, it } from 'vitest';
import { parseEvaluateRequest, type EvaluateLimits } from '../../src/consumer/evaluate-request.js';

const LIMITS: EvaluateLimits = {
  maxRequestBytes: 4096,
  maxJsonDepth: 10,
  maxEventBytes: 65_536,
  maxRecipients: 3,
  maxBatchEvents: 3,
};

/** One entry of `events`: the single form's fields without `op`. */
function anEntry(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    event: { type: 'm.room.message', room_id: '!r:x.org', sender: '@s:x.org', content: { body: 'hi' } },
    room: { member_count: 3 },
    recipients: [{ user_id: '@a:x.org' }, { user_id: '@b:x.org' }],
    ...overrides,
  };
}

const parse = (body: unknown) =>
  parseEvaluateRequest(Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), LIMITS);

describe('parseEvaluateRequest, the batch form', () => {
  it('turns `events` into one command whose entries are the requests, in order', () => {
    const first = anEntry();
    const second = anEntry({ explain: true, compact: true, recipients: [] });
    expect(parse({ op: 'evaluate', events: [first, second] })).toEqual({
      ok: true,
      value: {
        op: 'evaluate_batch',
        events: [
          { ok: true, value: first },
          { ok: true, value: second },
        ],
      },
    });
  });

  it('answers a bad entry with the error the single form gives it, and keeps the others', () => {
    const parsed = parse({
      op: 'evaluate',
      events: [anEntry(), anEntry({ recipients: [{ user_id: 'bob' }] }), anEntry()],
    });
    if (!parsed.ok || parsed.value.op !== 'evaluate_batch') throw new Error('expected a batch');
    expect(parsed.value.events.map((entry) => (entry.ok ? 'ok' : entry.error.message))).toEqual([
      'ok',
      'recipients.0.user_id is not a valid Matrix user ID.',
      'ok',
    ]);
    const alone = parse({ op: 'evaluate', ...anEntry({ recipients: [{ user_id: 'bob' }] }) });
    expect(alone).toMatchObject({
      ok: false,
      error: { message: 'recipients.0.user_id is not a valid Matrix user ID.' },
    });
  });

  it.each([
    ['not an object', 7, 'BadJson', 'Each entry of events must be a JSON object.'],
    [
      'without an event',
      { room: { member_count: 1 }, recipients: [] },
      'BadJson',
      "request must have required property 'event'.",
    ],
    [
      'with a numeric sender',
      anEntry({ event: { type: 't', room_id: '!r:x.org', sender: 1, content: {} } }),
      'BadJson',
      'event.sender must be string.',
    ],
    [
      'with a string member count',
      anEntry({ room: { member_count: '3' } }),
      'BadJson',
      'room.member_count must be integer.',
    ],
    [
      'with a recipient twice',
      anEntry({ recipients: [{ user_id: '@a:x.org' }, { user_id: '@a:x.org' }] }),
      'BadJson',
      'recipients.1.user_id repeats @a:x.org.',
    ],
    [
      'with more recipients than maxRecipients',
      anEntry({ recipients: ['@a', '@b', '@c', '@d'].map((u) => ({ user_id: `${u}:x.org` })) }),
      'TooLarge',
      'Too many recipients: an evaluate request may name at most 3.',
    ],
    ['with a string explain', anEntry({ explain: 'yes' }), 'BadJson', 'explain must be boolean.'],
  ])('an entry %s fails alone: %s', (_name, entry, kind, message) => {
    const parsed = parse({ op: 'evaluate', events: [anEntry(), entry] });
    expect(parsed).toMatchObject({
      ok: true,
      value: { op: 'evaluate_batch', events: [{ ok: true }, { ok: false, error: { kind, message } }] },
    });
  });

  it.each([
    ['events that are not an array', { events: {} }, 'BadJson', 'events must be array.'],
    ['no events', { events: [] }, 'BadJson', 'events must not be empty.'],
    [
      'more events than maxBatchEvents',
      { events: [anEntry(), anEntry(), anEntry(), anEntry()] },
      'TooLarge',
      'Too many events: an evaluate request may carry at most 3.',
    ],
    [
      'an event beside events',
      { events: [anEntry()], event: anEntry()['event'] },
      'BadJson',
      'event is not taken beside events.',
    ],
    [
      'recipients beside events',
      { events: [anEntry()], recipients: [] },
      'BadJson',
      'recipients is not taken beside events.',
    ],
  ])('refuses the whole message for %s: %s', (_name, fields, kind, message) => {
    expect(parse({ op: 'evaluate', ...fields })).toMatchObject({ ok: false, error: { kind, message } });
  });

  it.each([
    [
      'over maxRequestBytes',
      JSON.stringify({ op: 'evaluate', events: [anEntry({ pad: 'x'.repeat(4096) })] }),
      'TooLarge',
      'Request body is larger than 4096 bytes.',
    ],
    [
      // The envelope, `events` and the entry are three levels: the event's content is at the fifth.
      'nested past maxJsonDepth',
      JSON.stringify({
        op: 'evaluate',
        events: [
          anEntry({ event: { type: 't', room_id: '!r:x.org', sender: '@s:x.org', content: { a: [[[[[[1]]]]]] } } }),
        ],
      }),
      'BadJson',
      'Request body nests arrays and objects deeper than 10 levels.',
    ],
    [
      'another op',
      JSON.stringify({ op: 'notify', events: [anEntry()] }),
      'Unrecognized',
      'Only evaluate is served on this queue, not "notify".',
    ],
  ])('refuses the whole message %s, as the single form: %s', (_name, body, kind, message) => {
    expect(parse(body)).toMatchObject({ ok: false, error: { kind, message } });
  });

  it('leaves the single form as it was: a body without events', () => {
    const single = { op: 'evaluate', ...anEntry() };
    expect(parse(single)).toEqual({ ok: true, value: { op: 'evaluate', request: single } });
  });
});
