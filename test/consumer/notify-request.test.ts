import { describe, expect, it } from 'vitest';
import { parseNotifyRequest, type NotifyLimits } from '../../src/consumer/notify-request.js';

const LIMITS: NotifyLimits = { maxRequestBytes: 4096, maxJsonDepth: 8, maxRecipients: 3 };

function aNotify(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    op: 'notify',
    notification: { event_id: '$e', room_id: '!r:x.org', type: 'm.room.message', content: { body: 'hi' } },
    recipients: [{ user_id: '@a:x.org', actions: ['notify'], counts: { unread: 0 } }, { user_id: '@b:x.org' }],
    ...overrides,
  };
}

const bytes = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));

describe('parsing a notify message', () => {
  it('accepts a valid message as it is, zero counts and unknown fields included', () => {
    const message = aNotify({ extra: 1 });
    expect(parseNotifyRequest(bytes(message), LIMITS)).toEqual({ ok: true, value: message });
  });

  it.each<[string, unknown, string, string]>([
    ['not JSON', '{"op":', 'BadJson', 'Request body is not valid JSON.'],
    ['not an object', '[1]', 'BadJson', 'Request body must be a JSON object.'],
    ['another op', aNotify({ op: 'evaluate' }), 'Unrecognized', 'Only notify is served on this queue, not "evaluate".'],
    ['no recipients', aNotify({ recipients: undefined }), 'BadJson', ''],
    ['a recipient without user_id', aNotify({ recipients: [{}] }), 'BadJson', ''],
    ['a negative count', aNotify({ recipients: [{ user_id: '@a:x.org', counts: { unread: -1 } }] }), 'BadJson', ''],
    ['a prio that is not high or low', aNotify({ notification: { prio: 'urgent' } }), 'BadJson', ''],
    [
      'an invalid user ID',
      aNotify({ recipients: [{ user_id: 'alice' }] }),
      'BadJson',
      'recipients.0.user_id is not a valid Matrix user ID.',
    ],
    [
      'a repeated recipient',
      aNotify({ recipients: [{ user_id: '@a:x.org' }, { user_id: '@a:x.org' }] }),
      'BadJson',
      'recipients.1.user_id repeats @a:x.org.',
    ],
    [
      'too many recipients',
      aNotify({ recipients: ['@a:x', '@b:x', '@c:x', '@d:x'].map((user_id) => ({ user_id })) }),
      'TooLarge',
      'Too many recipients: a notify message may name at most 3.',
    ],
    [
      'too deep',
      aNotify({ notification: { content: { a: { b: { c: { d: { e: { f: {} } } } } } } } }),
      'BadJson',
      'Request body nests arrays and objects deeper than 8 levels.',
    ],
    [
      'too large',
      aNotify({ notification: { content: { body: 'x'.repeat(5000) } } }),
      'TooLarge',
      'Request body is larger than 4096 bytes.',
    ],
  ])('refuses %s', (_name, message, kind, text) => {
    const result = parseNotifyRequest(bytes(message), LIMITS);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.kind).toBe(kind);
    // Schema errors name the offending field; the exact wording is the shared describer's.
    if (text === '') expect(result.error.message).toMatch(/recipients|notification|prio|unread|user_id/);
    else expect(result.error.message).toBe(text);
  });
});
