import { describe, expect, it } from 'vitest';
import { parseEvaluateRequest, type EvaluateLimits } from '../../src/consumer/evaluate-request.js';

const LIMITS: EvaluateLimits = {
  maxRequestBytes: 4096,
  maxJsonDepth: 10,
  maxEventBytes: 65_536,
  maxRecipients: 3,
  maxBatchEvents: 3,
  maxBatchRecipients: 5,
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
      'another op',
      JSON.stringify({ op: 'notify', events: [anEntry()] }),
      'Unrecognized',
      'Only evaluate is served on this queue, not "notify".',
    ],
  ])('refuses the whole message %s, as the single form: %s', (_name, body, kind, message) => {
    expect(parse(body)).toMatchObject({ ok: false, error: { kind, message } });
  });

  /** An entry whose event content nests `levels` arrays: the entry itself is then `levels + 3` deep. */
  const nested = (levels: number) =>
    anEntry({
      event: {
        type: 't',
        room_id: '!r:x.org',
        sender: '@s:x.org',
        content: { a: JSON.parse('['.repeat(levels) + ']'.repeat(levels)) as unknown },
      },
    });
  const TOO_DEEP = 'Request body nests arrays and objects deeper than 10 levels.';

  it('takes an entry as deep as the single form takes it, though events and the entry add two levels', () => {
    // 10 levels alone (the limit), 12 in the batch.
    expect(parse({ op: 'evaluate', ...nested(7) })).toMatchObject({ ok: true });
    expect(parse({ op: 'evaluate', events: [anEntry(), nested(7)] })).toMatchObject({
      ok: true,
      value: { op: 'evaluate_batch', events: [{ ok: true }, { ok: true }] },
    });
  });

  it.each([
    ['one level past the limit', 8],
    ['far past the limit', 400],
  ])('refuses an entry nested %s alone, as the single form refuses it, and keeps its neighbours', (_name, levels) => {
    expect(parse({ op: 'evaluate', ...nested(levels) })).toMatchObject({
      ok: false,
      error: { kind: 'BadJson', message: TOO_DEEP },
    });
    expect(parse({ op: 'evaluate', events: [anEntry(), nested(levels), anEntry()] })).toMatchObject({
      ok: true,
      value: {
        op: 'evaluate_batch',
        events: [{ ok: true }, { ok: false, error: { kind: 'BadJson', message: TOO_DEEP } }, { ok: true }],
      },
    });
  });

  it('counts each entry on its own, whatever its neighbours hold (scalars, strings with brackets, escaped keys)', () => {
    const body = `{"op":"evaluate","ev\u0065nts":[7,${JSON.stringify(nested(8))},${JSON.stringify(
      anEntry({ room: { member_count: 3, name: '[[[{{{' } }),
    )}]}`;
    const parsed = parse(body);
    if (!parsed.ok || parsed.value.op !== 'evaluate_batch') throw new Error('expected a batch');
    expect(parsed.value.events.map((entry) => (entry.ok ? 'ok' : entry.error.message))).toEqual([
      'Each entry of events must be a JSON object.',
      TOO_DEEP,
      'ok',
    ]);
  });

  it('takes the entries of the last events key, as JSON.parse does', () => {
    const body = `{"op":"evaluate","events":[${JSON.stringify(nested(8))}],"events":[${JSON.stringify(anEntry())}]}`;
    expect(parse(body)).toMatchObject({ ok: true, value: { op: 'evaluate_batch', events: [{ ok: true }] } });
  });

  it.each([
    ['nested past maxJsonDepth beside events', { op: 'evaluate', events: [anEntry()], x: [[[[[[[[[[1]]]]]]]]]] }],
    ['nested past the ceiling of the batch form (1024 levels) in an entry', { op: 'evaluate', events: [nested(1100)] }],
  ])('refuses the whole message %s', (_name, body) => {
    expect(parse(body)).toMatchObject({ ok: false, error: { kind: 'BadJson', message: TOO_DEEP } });
  });

  it('refuses a message whose events name more recipients together than maxBatchRecipients, each within its own limit', () => {
    const three = anEntry({ recipients: ['@a', '@b', '@c'].map((u) => ({ user_id: `${u}:x.org` })) });
    expect(parse({ op: 'evaluate', events: [anEntry(), three] })).toMatchObject({ ok: true });
    expect(parse({ op: 'evaluate', events: [anEntry(), three, anEntry()] })).toMatchObject({
      ok: false,
      error: {
        kind: 'TooLarge',
        message: 'Too many recipients: an evaluate request may name at most 5 over all its events.',
      },
    });
    // Entries refused on their own do not count.
    const refused = anEntry({ recipients: [{ user_id: 'bob' }, { user_id: 'carol' }] });
    expect(parse({ op: 'evaluate', events: [refused, three, refused] })).toMatchObject({ ok: true });
  });

  it('leaves the single form as it was: a body without events', () => {
    const single = { op: 'evaluate', ...anEntry() };
    expect(parse(single)).toEqual({ ok: true, value: { op: 'evaluate', request: single } });
  });
});
