import { describe, expect, it } from 'vitest';
import type { EvaluateRun, EvaluateRunner } from '../../src/consumer/evaluate-queue.js';
import { splitEvaluateRunner, type EvaluatedOn } from '../../src/consumer/split-evaluate-runner.js';

const bounds = { maxBytes: 4096, maxRecipients: 2 };
const anEvaluate = (count: number) =>
  new TextEncoder().encode(
    JSON.stringify({ op: 'evaluate', recipients: Array.from({ length: count }, (_, i) => ({ user_id: `@u${i}:a` })) }),
  );
const answer = (by: string): EvaluateRun => ({ reply: { ok: true, body: { by } } });
const runner =
  (by: string, calls: string[]): EvaluateRunner =>
  async () => {
    calls.push(by);
    return Promise.resolve(answer(by));
  };
/** A pool that must not be asked. */
const noPool: EvaluateRunner = async () => Promise.reject(new Error('the pool was asked for a small request'));

describe('splitEvaluateRunner', () => {
  it('answers a small request on the event loop without asking the pool', async () => {
    const calls: string[] = [];
    const run = splitEvaluateRunner({ inline: runner('event loop', calls), thread: noPool, bounds });
    expect(await run(anEvaluate(2), { deadline: undefined })).toEqual(answer('event loop'));
    expect(calls).toEqual(['event loop']);
  });

  it.each([
    ['more recipients than the bound', anEvaluate(3)],
    ['more bytes than the bound', new Uint8Array(4097)],
  ])('hands a request with %s to the pool, with its deadline', async (_case, body) => {
    const calls: string[] = [];
    const deadlines: (number | undefined)[] = [];
    const run = splitEvaluateRunner({
      inline: async () => Promise.reject(new Error('a big request was evaluated on the event loop')),
      thread: async (_body, context) => {
        deadlines.push(context.deadline);
        calls.push('thread');
        return Promise.resolve(answer('thread'));
      },
      bounds,
    });
    expect(await run(body, { deadline: 1234 })).toEqual(answer('thread'));
    expect(calls).toEqual(['thread']);
    expect(deadlines).toEqual([1234]);
  });

  it('evaluates everything on the event loop without a pool (evaluate.threads 0), whatever its size', async () => {
    const calls: string[] = [];
    const run = splitEvaluateRunner({ inline: runner('event loop', calls), bounds });
    await run(anEvaluate(1), { deadline: undefined });
    await run(anEvaluate(500), { deadline: undefined });
    expect(calls).toEqual(['event loop', 'event loop']);
  });

  it('tells the observer where each request was evaluated', async () => {
    const seen: EvaluatedOn[] = [];
    const run = splitEvaluateRunner({
      inline: runner('event loop', []),
      thread: runner('thread', []),
      bounds,
      observer: { evaluatedOn: (where) => seen.push(where) },
    });
    for (const count of [1, 5, 2, 0]) await run(anEvaluate(count), { deadline: undefined });
    expect(seen).toEqual(['event_loop', 'thread', 'event_loop', 'event_loop']);
  });
});
