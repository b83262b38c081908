import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EvaluateRun } from '../../src/consumer/evaluate-queue.js';
import { encodeReply } from '../../src/contract/reply.js';
import { EvaluatePool, type EvaluatePoolOptions } from '../../src/evaluate-threads/evaluate-pool.js';
import { createLogger } from '../../src/logging/logger.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';

const SCRIPTED = new URL('./support/scripted-thread.ts', import.meta.url);
const pools: EvaluatePool[] = [];

function aPool(overrides: Partial<EvaluatePoolOptions> = {}, extraData: object = {}): EvaluatePool {
  const pool = new EvaluatePool({
    threads: 1,
    data: {
      evaluate: DEFAULT_CONFIG.evaluate,
      mongodb: DEFAULT_CONFIG.mongodb,
      maxJsonDepth: 32,
      cacheMaxEntries: 100,
      cacheMaxBytes: 1000,
      ...extraData,
    },
    logger: createLogger('silent'),
    threadUrl: SCRIPTED,
    restartDelayMs: 20,
    ...overrides,
  });
  pools.push(pool);
  return pool;
}

afterEach(async () => {
  await Promise.all(pools.splice(0).map(async (pool) => pool.close()));
});

const send = async (pool: EvaluatePool, act: string, n?: number): Promise<EvaluateRun> =>
  pool.run(Buffer.from(JSON.stringify({ act, n })), { deadline: undefined });
/** The reply as it would be published. */
const wire = (run: EvaluateRun) => JSON.parse(encodeReply(run.reply)) as Record<string, unknown>;
const echoOf = (run: EvaluateRun) => (wire(run) as { body?: { echo?: number } }).body?.echo;
const UNAVAILABLE = {
  ok: false,
  error: {
    kind: 'Unavailable',
    errcode: 'M_UNKNOWN',
    status: 503,
    error: 'The evaluation was interrupted before it finished; try again.',
  },
};

describe('EvaluatePool', () => {
  it("starts its threads with the first request, and publishes a thread's reply bytes as they are, with its stats", async () => {
    const pool = aPool({ threads: 2 });
    expect(pool.running).toBe(0);
    const run = await send(pool, 'echo', 7);
    expect(wire(run)).toMatchObject({ ok: true, body: { echo: 7 } });
    expect(run.stats).toEqual({ recipients: 1, notified: 1, cacheHits: 1, loaded: 0, storeQueries: 0 });
    expect(pool.running).toBe(2);
    expect(pool.cache.size).toBe(1);
    expect(pool.inFlight).toBe(0);
  });

  it.each([
    ['throws out of its message handler', 'throw'],
    ['exits', 'exit'],
  ])('answers Unavailable for every request a thread held when it %s, and replaces the thread', async (_case, act) => {
    const pool = aPool();
    const first = await send(pool, 'echo', 1);
    const held = [send(pool, 'hang'), send(pool, 'hang')];
    const failing = send(pool, act);
    const runs = await Promise.all([...held, failing]);
    for (const run of runs) {
      expect(wire(run)).toEqual(UNAVAILABLE);
      expect(run.cause).toMatch(/^the evaluation thread exited \(code \d+\)$/);
    }
    expect(pool.inFlight).toBe(0);
    // Another thread serves the next request.
    const next = await send(pool, 'echo', 2);
    expect(echoOf(next)).toBe(2);
    expect(wire(next)).not.toEqual(wire(first));
  });

  it('spreads requests over the threads, and a failing thread takes down only the requests it held', async () => {
    const pool = aPool({ threads: 2 });
    const hung = send(pool, 'hang');
    // The other thread is the least busy: it gets the crash.
    const crash = await send(pool, 'exit');
    expect(wire(crash)).toEqual(UNAVAILABLE);
    expect(pool.inFlight).toBe(1);
    expect(echoOf(await send(pool, 'echo', 3))).toBe(3);
    await pool.close();
    expect(wire(await hung)).toEqual(UNAVAILABLE);
  });

  it('keeps its cache counters from going back when a thread is replaced', async () => {
    const pool = aPool();
    await send(pool, 'echo', 1);
    expect(pool.cache.stats.hits).toBe(1);
    await send(pool, 'exit');
    await send(pool, 'echo', 2);
    expect(pool.cache.stats.hits).toBe(2);
    expect(pool.cache.size).toBe(1);
  });

  it('tells every thread of invalidations and of a cleared cache, before the requests sent after them', async () => {
    const pool = aPool({ threads: 2 });
    await Promise.all([send(pool, 'echo', 0), send(pool, 'echo', 0)]);
    pool.invalidate('@a:example.org');
    pool.invalidate('@b:example.org');
    pool.clear();
    const answers = await Promise.all([send(pool, 'echo', 1), send(pool, 'echo', 2)]);
    expect(answers.map((run) => (wire(run) as { body: { thread: number } }).body.thread)).toHaveLength(2);
    expect(new Set(answers.map((run) => (wire(run) as { body: { thread: number } }).body.thread)).size).toBe(2);
    // Each thread counted 2 invalidations and one clear (100).
    expect(pool.cache.stats.invalidations).toBe(2 * 102);
  });

  it('answers Unavailable once closed, and for the requests still held when it closes', async () => {
    const pool = aPool();
    const held = send(pool, 'hang');
    await pool.close();
    expect(wire(await held)).toEqual(UNAVAILABLE);
    expect(wire(await send(pool, 'echo', 1))).toEqual(UNAVAILABLE);
  });

  it('answers Unavailable while its thread cannot start, and waits longer between attempts', async () => {
    const logger = createLogger('silent');
    const error = vi.spyOn(logger, 'error');
    const pool = aPool({ logger, restartDelayMs: 50 }, { failAtStart: true });
    const runs = await Promise.all([send(pool, 'echo', 1), send(pool, 'echo', 2)]);
    for (const run of runs) expect(wire(run)).toEqual(UNAVAILABLE);
    const retries = () =>
      error.mock.calls
        .filter(([, message]) => message === 'an evaluation thread stopped; starting another')
        .map(([fields]) => (fields as { retryInMs: number }).retryInMs);
    await vi.waitFor(() => {
      expect(retries().length).toBeGreaterThanOrEqual(3);
    });
    expect(retries().slice(0, 3)).toEqual([50, 100, 200]);
  });
});
