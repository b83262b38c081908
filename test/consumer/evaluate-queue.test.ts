import { describe, expect, it } from 'vitest';
import { evaluateQueue, type EvaluateRunner } from '../../src/consumer/evaluate-queue.js';
import type { ServeContext } from '../../src/consumer/consumed-queue.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';

/**
 * The evaluate queue runs an evaluation only once the change events queued
 * for the worker are applied (`changesApplied`): a push-rule change whose
 * reply came before the `evaluate` was sent is in the rules it evaluates.
 */
function aQueue(steps: string[]) {
  const run: EvaluateRunner = async () => {
    steps.push('evaluated');
    return Promise.resolve({ reply: { ok: true, body: { notify: {} } } });
  };
  return evaluateQueue({ amqp: DEFAULT_CONFIG.amqp, evaluate: DEFAULT_CONFIG.evaluate, run });
}

const context = (changesApplied?: () => Promise<void>): ServeContext => ({
  messageId: undefined,
  deadline: undefined,
  ...(changesApplied === undefined ? {} : { changesApplied }),
});

describe('evaluateQueue: the change events queued before an evaluate are applied first', () => {
  it.each<[string, (steps: string[]) => (() => Promise<void>) | undefined, string[]]>([
    [
      'they are applied, then it is evaluated',
      (steps) => async () => {
        steps.push('waiting');
        await new Promise((resolve) => setImmediate(resolve));
        steps.push('applied');
      },
      ['waiting', 'applied', 'evaluated'],
    ],
    [
      'they cannot be waited for (the subscription ended, the caches emptied): evaluated from the store',
      (steps) => async () => {
        steps.push('waiting');
        return Promise.reject(new Error('change-event subscription closed'));
      },
      ['waiting', 'evaluated'],
    ],
    ['no subscription: evaluated at once', () => undefined, ['evaluated']],
  ])('%s', async (_, changesApplied, expected) => {
    const steps: string[] = [];
    const outcome = await aQueue(steps).serve(Buffer.from('{}'), context(changesApplied(steps)));
    expect(outcome.reply).toEqual({ ok: true, body: { notify: {} } });
    expect(steps).toEqual(expected);
  });
});
