import { afterAll, describe, expect, it, vi } from 'vitest';
import { encodeReply } from '../../src/contract/reply.js';
import { EvaluatePool } from '../../src/evaluate-threads/evaluate-pool.js';
import { createLogger } from '../../src/logging/logger.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';

/*
 * The real evaluation thread, with a store that never answers (nothing
 * listens on its port): what it answers without a store, and that it keeps
 * trying to connect rather than give up for good.
 */

const logger = createLogger('silent');
const warn = vi.spyOn(logger, 'warn');
const pool = new EvaluatePool({
  threads: 1,
  data: {
    evaluate: DEFAULT_CONFIG.evaluate,
    mongodb: {
      ...DEFAULT_CONFIG.mongodb,
      url: 'mongodb://127.0.0.1:1',
      serverSelectionTimeoutMs: 100,
      connectTimeoutMs: 100,
    },
    maxJsonDepth: 32,
    cacheMaxEntries: 100,
    cacheMaxBytes: 1_000_000,
  },
  logger,
});
afterAll(async () => {
  await pool.close();
});

const anEvaluate = (extra: object = {}) =>
  Buffer.from(
    JSON.stringify({
      op: 'evaluate',
      event: { type: 'm.room.message', room_id: '!r:example.org', sender: '@s:example.org', content: { body: 'hi' } },
      room: { member_count: 2 },
      recipients: [{ user_id: '@a:example.org' }],
      ...extra,
    }),
  );
const wire = (reply: Parameters<typeof encodeReply>[0]) => JSON.parse(encodeReply(reply)) as Record<string, unknown>;

describe('the evaluation thread', () => {
  it('caps its reply at evaluate.maxReplyBytes, answering TooLarge, and keeps serving', async () => {
    const capped = new EvaluatePool({
      threads: 1,
      data: {
        evaluate: { ...DEFAULT_CONFIG.evaluate, maxReplyBytes: 4096 },
        mongodb: { ...DEFAULT_CONFIG.mongodb, url: 'mongodb://127.0.0.1:1', serverSelectionTimeoutMs: 100 },
        maxJsonDepth: 32,
        cacheMaxEntries: 100,
        cacheMaxBytes: 1_000_000,
      },
      logger,
    });
    try {
      // Refused entries need no store, and their errors alone are past 4 KiB.
      const refused = { event: { type: 't' }, room: { member_count: 1 }, recipients: [{ user_id: 'not-a-user' }] };
      const batch = Buffer.from(JSON.stringify({ op: 'evaluate', events: Array.from({ length: 60 }, () => refused) }));
      const run = await capped.run(batch, { deadline: undefined });
      expect(wire(run.reply)).toMatchObject({ ok: false, error: { kind: 'TooLarge', status: 413 } });
      const small = await capped.run(Buffer.from(JSON.stringify({ op: 'evaluate', events: [refused] })), {
        deadline: undefined,
      });
      expect(wire(small.reply)).toMatchObject({ ok: true, body: { results: [{ ok: false }] } });
    } finally {
      await capped.close();
    }
  });

  it('refuses a bad body itself, with the contract error', async () => {
    const run = await pool.run(Buffer.from('{"op": "evaluate", "event": 1}'), { deadline: undefined });
    expect(wire(run.reply)).toMatchObject({ ok: false, error: { kind: 'BadJson', status: 400 } });
  });

  it('answers Unavailable at the deadline while the store cannot be reached, and keeps trying to connect', async () => {
    const run = await pool.run(anEvaluate(), { deadline: Date.now() + 500 });
    expect(wire(run.reply)).toMatchObject({ ok: false, error: { kind: 'Unavailable', status: 503 } });
    expect(run.deadlinePassed).toBe(true);
    await vi.waitFor(() => {
      const attempts = warn.mock.calls.filter(
        ([, message]) => message === 'an evaluation thread cannot reach MongoDB; retrying',
      );
      expect(attempts.length).toBeGreaterThanOrEqual(2);
    });
  });
});
