import { describe, expect, it } from 'vitest';
import type { JsonObject } from '../../src/matrix/json.js';
import { parseEvaluateRequest, toEvaluateCommand, type EvaluateLimits } from '../../src/consumer/evaluate-request.js';

const LIMITS: EvaluateLimits = {
  maxRequestBytes: 4096,
  maxJsonDepth: 8,
  maxEventBytes: 65_536,
  maxRecipients: 5,
  maxBatchEvents: 3,
  maxBatchRecipients: 20_000,
};

function anEvaluateRequest(overrides: Record<string, unknown> = {}): JsonObject {
  return {
    op: 'evaluate',
    event: { event_id: '$e', type: 'm.room.message', room_id: '!r:x.org', sender: '@s:x.org', content: { body: 'hi' } },
    room: { member_count: 3, sender_power_level: 50, notification_power_levels: { room: 50 } },
    recipients: [{ user_id: '@a:x.org', display_name: 'A' }, { user_id: '@b:x.org' }],
    ...overrides,
  };
}

const event = (fields: Record<string, unknown>) => ({
  type: 'm.room.message',
  room_id: '!r:x.org',
  sender: '@s:x.org',
  content: {},
  ...fields,
});

describe('toEvaluateCommand', () => {
  it('turns a valid request into a command', () => {
    const result = toEvaluateCommand(anEvaluateRequest({ explain: true }), LIMITS);
    expect(result).toEqual({ ok: true, value: { op: 'evaluate', request: anEvaluateRequest({ explain: true }) } });
  });

  it.each([
    ['absent', {}],
    ['null', { sender_power_level: null }],
  ])('accepts a sender power level that is %s, and no notification levels', (_name, room) => {
    expect(toEvaluateCommand(anEvaluateRequest({ room: { member_count: 0, ...room } }), LIMITS).ok).toBe(true);
  });

  it('accepts an empty recipient list and extra event keys', () => {
    const result = toEvaluateCommand(
      anEvaluateRequest({ recipients: [], event: event({ state_key: '', unsigned: { age: 1 } }) }),
      LIMITS,
    );
    expect(result.ok).toBe(true);
  });

  it.each([
    ['no event', { event: undefined }, "request must have required property 'event'."],
    ['an event that is not an object', { event: [] }, 'event must be object.'],
    [
      'an event without a type',
      { event: { room_id: '!r:x.org', sender: '@s:x.org', content: {} } },
      "event must have required property 'type'.",
    ],
    ['a numeric sender', { event: event({ sender: 1 }) }, 'event.sender must be string.'],
    ['content that is not an object', { event: event({ content: 'x' }) }, 'event.content must be object.'],
    ['a numeric state_key', { event: event({ state_key: 1 }) }, 'event.state_key must be string.'],
    ['no room', { room: undefined }, "request must have required property 'room'."],
    ['a negative member count', { room: { member_count: -1 } }, 'room.member_count must be >= 0.'],
    ['a fractional member count', { room: { member_count: 1.5 } }, 'room.member_count must be integer.'],
    [
      'a string power level',
      { room: { member_count: 1, sender_power_level: '50' } },
      'room.sender_power_level must be integer.',
    ],
    [
      'a non-integer notification level',
      { room: { member_count: 1, notification_power_levels: { room: 'x' } } },
      'room.notification_power_levels.room must be integer.',
    ],
    ['recipients that are not an array', { recipients: {} }, 'recipients must be array.'],
    [
      'a recipient without user_id',
      { recipients: [{ user_id: '@a:x.org' }, {}] },
      "recipients.1 must have required property 'user_id'.",
    ],
    [
      'a numeric display name',
      { recipients: [{ user_id: '@a:x.org', display_name: 1 }] },
      'recipients.0.display_name must be string.',
    ],
    [
      'an invalid user ID',
      { recipients: [{ user_id: '@a:x.org' }, { user_id: 'bob' }] },
      'recipients.1.user_id is not a valid Matrix user ID.',
    ],
    [
      'a duplicate',
      { recipients: [{ user_id: '@a:x.org' }, { user_id: '@b:x.org' }, { user_id: '@a:x.org' }] },
      'recipients.2.user_id repeats @a:x.org.',
    ],
    ['a string explain', { explain: 'yes' }, 'explain must be boolean.'],
  ])('%s is BadJson: %s', (_name, overrides, message) => {
    expect(toEvaluateCommand(anEvaluateRequest(overrides), LIMITS)).toMatchObject({
      ok: false,
      error: { kind: 'BadJson', message },
    });
  });

  it('refuses more recipients than the limit with TooLarge', () => {
    const recipients = Array.from({ length: 6 }, (_, i) => ({ user_id: `@u${i}:x.org` }));
    expect(toEvaluateCommand(anEvaluateRequest({ recipients }), LIMITS)).toMatchObject({
      ok: false,
      error: { kind: 'TooLarge', message: 'Too many recipients: an evaluate request may name at most 5.' },
    });
    expect(toEvaluateCommand(anEvaluateRequest({ recipients: recipients.slice(0, 5) }), LIMITS).ok).toBe(true);
  });

  it('measures the event by its compact JSON in UTF-8 bytes', () => {
    const base = Buffer.byteLength(JSON.stringify(event({ content: { body: '' } })), 'utf8');
    const limits = { ...LIMITS, maxEventBytes: base + 4 };
    // "é" is two bytes: two of them fit, three do not.
    expect(toEvaluateCommand(anEvaluateRequest({ event: event({ content: { body: 'éé' } }) }), limits).ok).toBe(true);
    expect(toEvaluateCommand(anEvaluateRequest({ event: event({ content: { body: 'ééé' } }) }), limits)).toMatchObject({
      ok: false,
      error: { kind: 'TooLarge', message: `The event is larger than ${base + 4} bytes.` },
    });
  });
});

describe('parseEvaluateRequest', () => {
  const bytes = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));

  it('parses a valid body into the command', () => {
    expect(parseEvaluateRequest(bytes(anEvaluateRequest()), LIMITS)).toEqual({
      ok: true,
      value: { op: 'evaluate', request: anEvaluateRequest() },
    });
  });

  it('keeps keys such as constructor in the event: an event may carry any key', () => {
    const withKeys = anEvaluateRequest({ event: event({ content: { constructor: 1, prototype: { a: 1 } } }) });
    expect(
      parseEvaluateRequest(Buffer.from(JSON.stringify(withKeys).replace('"constructor"', '"__proto__"')), LIMITS).ok,
    ).toBe(true);
    expect(parseEvaluateRequest(bytes(withKeys), LIMITS).ok).toBe(true);
  });

  it.each([
    ['over maxRequestBytes', 'x'.repeat(4097), 'TooLarge', 'Request body is larger than 4096 bytes.'],
    ['not JSON', '{', 'BadJson', 'Request body is not valid JSON.'],
    ['not an object', '[]', 'BadJson', 'Request body must be a JSON object.'],
    [
      'nested past maxJsonDepth',
      JSON.stringify({ ...anEvaluateRequest(), event: event({ content: { a: [[[[[[[1]]]]]]] } }) }),
      'BadJson',
      'Request body nests arrays and objects deeper than 8 levels.',
    ],
    [
      'another op',
      JSON.stringify({ op: 'get_pushrules', user_id: '@a:x.org' }),
      'Unrecognized',
      'Only evaluate is served on this queue, not "get_pushrules".',
    ],
    ['no op', '{}', 'Unrecognized', 'Only evaluate is served on this queue, not null.'],
  ])('%s: %s', (_name, body, kind, message) => {
    expect(parseEvaluateRequest(bytes(body), LIMITS)).toMatchObject({ ok: false, error: { kind, message } });
  });
});
